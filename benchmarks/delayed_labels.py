"""Labels that come later (``--join-key``, issue #44): what the pending store costs.

``python -m benchmarks.delayed_labels [--events 200000] [--pending 100000] [--repeats 3]``

1. Memory: ``--pending`` events of 20 features (JSON lines ``{"id": "event-00000001",
   "feature_0": 0.123..., ...}``, seeded floats) parsed by the engine's parser and kept by
   :class:`~stream_perceptron.join.PendingJoin`, each parsed record dropped, as the engine does;
   ``tracemalloc``'s traced bytes after the last one, less before the first, over the values
   kept. The CSV form of the same events is measured too (its names come from the header).
2. Rate: the whole command, ``stream-perceptron run --input FILE --format jsonl`` (the file on
   disk: start-up included), on ``--events`` events of 20 features labelled inline (one record
   each, the block path), and on the same events with ``--join-key id`` and each outcome
   (``{"id": ..., "y": ...}``) 0 to 5,000 records later (two records an event); the same
   inline file with ``--drift-detector adwin --on-drift reset`` (the record-by-record path,
   so the join's own cost is the difference from it). Wall seconds, medians of ``--repeats``
   rounds, the three interleaved within each round; records/s counts every line read.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from stream_perceptron.formats import make_parser
from stream_perceptron.join import PendingJoin

NAMES = [f"feature_{j}" for j in range(20)]


def _events(n: int, seed: int) -> list[tuple[str, dict[str, float], int]]:
    rng = random.Random(seed)
    w = [rng.gauss(0, 1) for _ in NAMES]
    out = []
    for i in range(n):
        x = {name: rng.gauss(0, 1) for name in NAMES}
        y = int(sum(a * b for a, b in zip(w, x.values())) > 0)
        out.append((f"event-{i:08d}", x, y))
    return out


def bytes_per_value(n: int, fmt: str, seed: int = 0) -> float:
    """Traced bytes a pending feature value takes: ``n`` events parsed and kept."""
    events = _events(n, seed)
    if fmt == "jsonl":
        lines = [json.dumps({"id": k, **x}).encode() for k, x, _ in events]
    else:
        lines = [",".join(["id", *NAMES, "y"]).encode()]
        lines += [",".join([k, *map(repr, x.values()), ""]).encode() for k, x, _ in events]
    parser = make_parser(fmt, "y", "id")
    join = PendingJoin(n + 1, 1 << 62)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for i, line in enumerate(lines):
        keyed = parser.parse_keyed(line)  # type: ignore[attr-defined]
        if keyed is not None:
            key, (x, _) = keyed
            join.add_event(key, x, 1, ("stdin", None), i + 1, i)  # two ints, as the engine's
    keyed = None
    used = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert join.events == n
    return used / (n * len(NAMES))


def write_files(directory: Path, n: int, seed: int) -> tuple[Path, Path]:
    """The inline file and the delayed one (events, outcomes 0-5,000 records later)."""
    events = _events(n, seed)
    rng = random.Random(seed + 1)
    inline, delayed = directory / "inline.jsonl", directory / "delayed.jsonl"
    with inline.open("w") as f:
        for key, x, y in events:
            f.write(json.dumps({"id": key, **x, "y": y}) + "\n")
    timed = []
    for i, (key, x, y) in enumerate(events):
        timed.append((2.0 * i, 0, json.dumps({"id": key, **x})))
        timed.append((2.0 * i + rng.uniform(0, 5000), 1, json.dumps({"id": key, "y": y})))
    timed.sort()
    with delayed.open("w") as f:
        f.writelines(line + "\n" for _, _, line in timed)
    return inline, delayed


def run_seconds(path: Path, *flags: str) -> tuple[float, dict]:
    with tempfile.NamedTemporaryFile(suffix=".json") as summary:
        cmd = [sys.executable, "-m", "stream_perceptron.cli", "run", "--input", str(path),
               "--format", "jsonl", "--summary-json", summary.name, "-q", *flags]  # fmt: skip
        started = time.perf_counter()
        subprocess.run(cmd, check=True)
        wall = time.perf_counter() - started
        return wall, json.loads(Path(summary.name).read_text())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--pending", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=44)
    args = parser.parse_args()
    for fmt in ("jsonl", "csv"):
        per_value = bytes_per_value(args.pending, fmt)
        print(f"memory: {args.pending:,} pending events x 20 features ({fmt}): "
              f"{per_value:.1f} bytes a value (goal <= 32)")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        inline, delayed = write_files(Path(tmp), args.events, args.seed)
        runs: dict[str, list[tuple[float, dict]]] = {"inline": [], "record": [], "join": []}
        for _ in range(args.repeats):
            runs["inline"].append(run_seconds(inline))
            runs["record"].append(
                run_seconds(inline, "--drift-detector", "adwin", "--on-drift", "reset")
            )
            runs["join"].append(run_seconds(delayed, "--join-key", "id", "--label-wait", "6000"))
        lines = {"inline": args.events, "record": args.events, "join": 2 * args.events}
        for name, label in (("inline", "labels inline, the block path"),
                            ("record", "labels inline, record by record (--on-drift reset)"),
                            ("join", "--join-key, outcomes 0-5,000 records later")):  # fmt: skip
            wall = statistics.median(w for w, _ in runs[name])
            summary = runs[name][-1][1]
            print(f"rate: {label}: {wall:.2f} s, {lines[name] / wall:,.0f} records/s, "
                  f"{args.events / wall:,.0f} examples/s (accuracy "
                  f"{summary['accuracy']:.4f}, {summary['learned']:,} learned)")  # fmt: skip


if __name__ == "__main__":
    main()
