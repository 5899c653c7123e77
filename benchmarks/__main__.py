"""``python -m benchmarks [--quick] [--only N[,N]] [--repeats K] [--seeds N] [--markdown PATH]``.

Exit status: 0 when every row ran (whether or not its goal is met), 1 when a row failed to
run, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import Context, Measure, Result, Sizes
from benchmarks.report import format_line, machine_info, markdown, update_results
from benchmarks.rows_delayed import row_delayed
from benchmarks.rows_drift import row_drift
from benchmarks.rows_kafka import ENV as KAFKA_ENV
from benchmarks.rows_kafka import row_kafka
from benchmarks.rows_kafka_events import RECORDS_ENV as KAFKA_RECORDS_ENV
from benchmarks.rows_kafka_events import row_kafka_events
from benchmarks.rows_learners import row_arrays, row_binary, row_multiclass
from benchmarks.rows_memory import row_memory, row_memory_hashed, row_memory_sparse
from benchmarks.rows_nonlinear import row_nonlinear
from benchmarks.rows_quality import row_quality
from benchmarks.rows_shapes import row_shapes
from benchmarks.rows_shared_model import row_shared_model
from benchmarks.rows_shared_quality import row_shared_quality
from benchmarks.rows_shared_timeline import row_shared_timeline
from benchmarks.rows_stdin import row_metrics, row_stdin, row_stdin_multiclass

ROWS: dict[int, tuple[str, Callable[[Context], list[Result]]]] = {
    1: ("binary perceptron, dict API, vs River", row_binary),
    2: ("multi-class perceptron, dict API, vs River one-vs-rest", row_multiclass),
    3: ("exact sequential learning on arrays, vs scikit-learn", row_arrays),
    4: (
        "stdin end to end (CSV, JSON lines, multi-class CSV), vs Vowpal Wabbit",
        lambda ctx: row_stdin(ctx) + row_stdin_multiclass(ctx),
    ),
    5: (
        "Kafka end to end; event streams: a prediction per event, per Kafka client",
        lambda ctx: row_kafka(ctx) + row_kafka_events(ctx),
    ),
    6: ("metrics overhead", row_metrics),
    7: ("memory: peak RSS after 1M and 10M records (CSV, sparse JSON)",
        lambda ctx: [*row_memory(ctx), *row_memory_sparse(ctx)]),
    9: ("learning quality: prequential accuracy vs River's linear models", row_quality),
    10: ("memory with --hash-bits 18: all-distinct feature names", row_memory_hashed),
    11: ("shared-model mode: 1, 2, 3 workers on a 6-partition topic; mixing overhead",
        row_shared_model),
    12: ("non-linear streams: random Fourier features vs River's ARF, k-NN, Hoeffding tree",
         row_nonlinear),
    13: ("abrupt drift: SEA and Hyperplane with 3 switches, the detectors' delays and false "
         "alarms, and the default detector's cost", row_drift),
    14: ("shared-model quality: pulled vs sequential, mixed vs no-mix, per client and cadence",
         row_shared_quality),
    15: ("record shapes on stdin (sparse, nested, categorical JSON, libsvm) vs Vowpal Wabbit",
         row_shapes),
    16: ("labels that come later (--join-key): the join on the block path vs labels inline "
         "and River; a million events waiting", row_delayed),
    17: ("shared-model timeline: where a worker's time goes, 1 and 2 workers (mix every 10k)",
         row_shared_timeline),
}


def _rows(text: str) -> list[int]:
    try:
        chosen = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected row numbers like 1,4") from None
    unknown = [n for n in chosen if n not in ROWS]
    if unknown or not chosen:
        raise argparse.ArgumentTypeError(f"rows are 1 to {len(ROWS)}, got {text!r}")
    return chosen


def _repeats(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("--repeats must be at least 1")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="stream-perceptron benchmarks: each figure with its anchor measured in the"
        " same run. Rows: " + "; ".join(f"{n} {name}" for n, (name, _) in ROWS.items()) + ".",
    )
    parser.add_argument(
        "--quick",
        type=_repeats,
        nargs="?",
        const=10,
        metavar="FACTOR",
        help="every size FACTOR times smaller (default 10): a smoke run (rows 4, 6 and 13c run"
        " --repeats rounds, not at least 5); the test suite uses 100",
    )
    parser.add_argument("--only", type=_rows, metavar="N[,N]", help="run only these rows")
    parser.add_argument(
        "--repeats", type=_repeats, default=3, metavar="K", help="repeats per figure (median)"
    )
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the results table")
    parser.add_argument(
        "--kafka-records",
        type=_repeats,
        metavar="N",
        default=int(os.environ.get(KAFKA_RECORDS_ENV, "0")) or None,
        help=f"records of the Kafka rows (default 1M, or ${KAFKA_RECORDS_ENV}): a quick smoke run",
    )
    parser.add_argument(
        "--seeds",
        type=_repeats,
        metavar="N",
        help="seeds per setting of row 14 (default 10; 160 broker runs of 15-25 s at 10)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser().parse_args(argv)
    sizes = Sizes().scaled_down(args.quick) if args.quick else Sizes()
    if args.kafka_records:
        sizes = dataclasses.replace(sizes, kafka=args.kafka_records)
    if args.seeds:
        sizes = dataclasses.replace(sizes, shared_seeds=args.seeds)
    chosen = args.only or list(ROWS)
    command = shlex.join(["python", "-m", "benchmarks", *argv])
    if os.environ.get(KAFKA_ENV):
        command = f"{KAFKA_ENV}={shlex.quote(os.environ[KAFKA_ENV])} {command}"
    info = machine_info()
    print(f"{command}  ({info['date']}; {info['machine']})", flush=True)
    started = time.perf_counter()
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="stream-perceptron-bench-") as tmp:
        ctx = Context(sizes=sizes, repeats=args.repeats, workdir=Path(tmp),
                      least_rounds=1 if args.quick else 5)  # fmt: skip
        for n in chosen:
            name, row = ROWS[n]
            row_started = time.perf_counter()
            try:
                got = row(ctx)
            except Exception as e:  # noqa: BLE001 (one broken row must not hide the others)
                traceback.print_exc()
                got = [Result(str(n), name, Measure("ours", missing=f"error: {e}"), error=True)]
            for result in got:
                print(format_line(result), flush=True)
            print(f"    (row {n}: {time.perf_counter() - row_started:.1f} s)", flush=True)
            results.extend(got)
    elapsed = time.perf_counter() - started
    table = markdown(results, info, command, sizes, elapsed)
    print()
    print(table)
    if args.markdown is not None:
        # the rows run now replace their latest measurement; the others stay (report.py)
        update_results(args.markdown, results, info, command)
        print(f"wrote {args.markdown} (the rows run now updated in its results.json)")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
