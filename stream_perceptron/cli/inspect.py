"""``stream-perceptron inspect CHECKPOINT``: hyperparameters, counters, largest weights."""

from __future__ import annotations

import argparse
import sys

from stream_perceptron.checkpoint import load_checkpoint
from stream_perceptron.errors import StreamPerceptronError
from stream_perceptron.learners import Preprocessed
from stream_perceptron.paths import READ, file_flag_problem

__all__ = ["inspect_command"]


def inspect_command(args: argparse.Namespace) -> int:
    # before opening it: opening a FIFO for reading waits for a writer, forever
    problem = file_flag_problem([("CHECKPOINT", args.checkpoint, READ)])
    if problem is not None:
        print(f"stream-perceptron: error: {problem}", file=sys.stderr)
        return 1
    try:
        checkpoint = load_checkpoint(args.checkpoint)
    except StreamPerceptronError as e:
        print(f"stream-perceptron: error: {e}", file=sys.stderr)
        return 1
    model = checkpoint.model
    out = sys.stdout
    out.write(f"model        {model!r}\n")
    out.write(f"examples     {model.n_seen}\n")
    out.write(f"updates      {model.n_mistakes}\n")
    out.write(f"R (max |x|)  {model.max_norm:.6g}\n")
    for (source, partition), offset in sorted(checkpoint.next_offsets.items(), key=repr):
        where = source if partition is None else f"{source}[{partition}]"
        out.write(f"position     {where}: next offset {offset}\n")
    if checkpoint.stats:
        s = checkpoint.stats
        out.write(f"mistakes     {s['mistakes']} prequential, over {s['learned']} learned\n")
        if s["invalid"]:
            out.write(f"invalid      {s['invalid']}\n")
    if checkpoint.join is not None:  # --join-key
        join = checkpoint.join
        out.write(f"waiting      {len(join['events'])} events, {len(join['outcomes'])} outcomes "
                  "(--join-key)\n")  # fmt: skip
    if isinstance(model, Preprocessed):  # --scale / --hash-bits
        for line in model.describe(args.top):
            out.write(line + "\n")
    weights = model.weights
    bias = model.bias
    rows = []
    if weights and isinstance(next(iter(weights.values())), dict):
        for c, wc in weights.items():
            rows += [(abs(v), f"{c!r}", k, v) for k, v in wc.items()]
        out.write(f"bias         {bias}\n")
    else:
        rows = [(abs(v), "", k, v) for k, v in weights.items()]
        out.write(f"bias         {bias!r}\n")
    rows.sort(key=lambda r: r[0], reverse=True)
    out.write(f"largest weights ({min(args.top, len(rows))} of {len(rows)}):\n")
    for _, c, k, v in rows[: args.top]:
        out.write(f"  {c + ' ' if c else ''}{k!s:<30} {v: .6g}\n")
    return 0
