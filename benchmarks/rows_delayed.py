"""Row 16: labels that come later (``--join-key``, issue 44): the join's cost on the block path
and the memory of a million events waiting.

16a: ``cat FILE | stream-perceptron run --format jsonl --join-key id --label-wait 6000`` on
``delayed`` events of 20 features (``benchmarks.delayed_labels``' stream: each outcome
``{"id": ..., "y": ...}`` 0 to 5,000 records after its event; two records an event), against
the same events with their labels inline (one record each) on the block path, records/s (every
line read) of the whole command, medians of ``--repeats`` interleaved rounds; CPU seconds
(user + system of the command) beside. Also in the notes: the delayed file read without
``--join-key`` (the same bytes on the plain block path) and with the join record by record
(``--drift-detector adwin --on-drift reset``, which turns the block path off).
16b: the same join against River: a Python loop that parses each line (``json.loads``), keeps
each event's features and prediction in a dict under its key and, when its outcome comes,
``learn_one``\\ s River's ``Perceptron`` (the loop a River user writes; River's own
``progressive_val_score(delay=...)`` needs the label with the event), over the file's first
quarter.
16c: ``pending`` events of 20 features and no outcome kept by the engine (the block path, in
process): bytes a pending feature value takes, counted object by object over the store
(``sys.getsizeof`` of its dicts, entries, keys, values, clocks and shared parts), and the
command's peak RSS with all of them waiting against the same file with ``--max-pending 1``.
"""

from __future__ import annotations

import json
import random
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import Context, Measure, MiB, Result, count, interleaved, median
from benchmarks.delayed_labels import NAMES, write_files
from benchmarks.procs import Run, cli_command, run_command

__all__ = ["row_delayed", "pending_bytes"]

JOIN = ("--join-key", "id", "--label-wait", "6000")


def _timed(run: Callable[[], Run]) -> Callable[[], tuple[Run, float]]:
    """``run`` with the CPU seconds (user + system) of the command it waited for."""

    def go() -> tuple[Run, float]:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        done = run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        return done, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime

    return go


def _cli(path: Path, summary: Path, *flags: str) -> Callable[[], tuple[Run, float]]:
    cmd = [*cli_command(), "run", "--format", "jsonl", "--summary-json", str(summary), *flags]
    return _timed(lambda: run_command(cmd, input_path=path, summary_path=summary))


def river_join(path: Path, lines: int) -> tuple[float, float, int]:
    """River's loop over the first ``lines`` lines: ``(wall s, CPU s, pairs learned)``."""
    from river import linear_model

    model = linear_model.Perceptron()
    pending: dict[str, tuple[dict[str, float], Any]] = {}
    learned = 0
    with path.open("rb") as f:
        head = [f.readline() for _ in range(lines)]
    started, cpu = time.perf_counter(), time.process_time()
    for line in head:
        obj = json.loads(line)
        key = obj.pop("id")
        y = obj.pop("y", None)
        if y is None:
            pending[key] = (obj, model.predict_one(obj))
        else:
            event = pending.pop(key, None)
            if event is not None:
                model.learn_one(event[0], y)
                learned += 1
    return time.perf_counter() - started, time.process_time() - cpu, learned


def _files(ctx: Context, n: int) -> tuple[Path, Path]:
    key = ("delayed", n)
    if key not in ctx.files:
        directory = ctx.workdir / f"delayed-{n}"
        directory.mkdir(exist_ok=True)
        inline, delayed = write_files(directory, n, 44)
        ctx.files[key], ctx.files[("inline", n)] = delayed, inline
    return ctx.files[("inline", n)], ctx.files[key]


def row_delayed(ctx: Context) -> list[Result]:
    n = ctx.sizes.delayed
    inline, delayed = _files(ctx, n)
    summary = ctx.workdir / "summary-delayed.json"
    runs = {
        "inline": _cli(inline, summary),
        "join": _cli(delayed, summary, *JOIN),
        "no join": _cli(delayed, summary),
        "record path": _cli(delayed, summary, *JOIN, "--drift-detector", "adwin",
                            "--on-drift", "reset"),  # fmt: skip
    }
    interleaved(1, {"join": runs["join"]})  # a round not timed: the file read, the caches made
    got = interleaved(ctx.repeats, runs)
    lines = {"inline": n, "join": 2 * n, "no join": 2 * n, "record path": 2 * n}
    wall = {name: median([r.wall for r, _ in done]) for name, done in got.items()}
    cpu = {name: median([c for _, c in done]) for name, done in got.items()}
    rate = {name: lines[name] / wall[name] for name in got}
    join_summary = got["join"][-1][0].summary or {}
    river_lines = max(2, 2 * n // 4)
    river = [river_join(delayed, river_lines) for _ in range(ctx.repeats)]
    river_rate = river_lines / median([w for w, _, _ in river])
    ratio = rate["join"] / rate["inline"]
    notes = [
        f"wall s (median of {ctx.repeats}, interleaved): "
        + ", ".join(f"{name} {wall[name]:.3f}" for name in got),
        "CPU s (user+system, median): " + ", ".join(f"{name} {cpu[name]:.3f}" for name in got),
        "records/s: " + ", ".join(f"{name} {rate[name]:,.0f}" for name in got),
        f"CPU per record: join {cpu['join'] / (2 * n) * 1e6:.2f} us, inline "
        f"{cpu['inline'] / n * 1e6:.2f} us; examples/s: join {n / wall['join']:,.0f}, inline "
        f"{n / wall['inline']:,.0f}",
        f"join vs the same bytes without --join-key: {rate['join'] / rate['no join']:.2f}x; "
        f"vs the join record by record: {rate['join'] / rate['record path']:.2f}x",
        f"the join's summary: accuracy {join_summary.get('accuracy', 0):.4f}, served "
        f"{(join_summary.get('join') or {}).get('served_accuracy') or 0:.4f}, joined "
        f"{(join_summary.get('join') or {}).get('joined', 0):,}",
    ]
    results = [
        Result(
            "16a",
            f"--join-key on the block path: {count(n)} events of 20 features, each outcome 0-5,000"
            " records later (JSON lines on stdin, two records an event), vs the same events "
            "labelled inline (wall time of the whole command)",
            Measure("ours", rate["join"], "records/s"),
            Measure("labels inline, the block path", rate["inline"], "records/s"),
            ratio,
            ratio_text="x inline",
            goal=">= 0.7x inline (the join costs <= 30 %)",
            met=ratio >= 0.7,
            notes=notes,
        ),
        Result(
            "16b",
            f"the same join vs River: a Python loop (json.loads, a dict of pending events, "
            f"Perceptron predict_one at the event, learn_one at its outcome), the first "
            f"{count(river_lines)} lines",
            Measure("ours", rate["join"], "records/s"),
            Measure("River", river_rate, "records/s"),
            rate["join"] / river_rate,
            notes=[f"River CPU s (median) {median([c for _, c, _ in river]):.3f}, pairs "
                   f"learned {river[-1][2]:,}"],  # fmt: skip
        ),
    ]
    return results + row_pending(ctx)


# -- 16c: a million events waiting ---------------------------------------------------------------


def _pending_file(ctx: Context, n: int) -> Path:
    """``n`` events of 20 features, 6 decimals, no outcome."""
    key = ("pending", n)
    if key not in ctx.files:
        path = ctx.workdir / f"pending-{n}.jsonl"
        rng = random.Random(16)
        with path.open("w") as f:
            for i in range(n):
                values = ",".join(f'"{name}": {rng.gauss(0, 1):.6f}' for name in NAMES)
                f.write(f'{{"id": "event-{i:08d}", {values}}}\n')
        ctx.files[key] = path
    return ctx.files[key]


def pending_bytes(path: Path, n: int) -> tuple[float, int]:
    """Run the engine (block path, in process) over ``path`` keeping every event; the bytes
    its pending store takes, counted object by object, a feature value, and the events kept."""
    from connectors import LineSource
    from stream_perceptron import Perceptron
    from stream_perceptron.engine import Engine, Outputs
    from stream_perceptron.formats import make_parser
    from stream_perceptron.join import PendingJoin

    join = PendingJoin(n + 1, 1 << 62)
    engine = Engine(Perceptron(), make_parser("jsonl", "y", "id"), Outputs(), join=join)
    with path.open("rb") as f:
        engine.run(LineSource(f))
    events = join._events
    size = sys.getsizeof
    total = size(events)
    shared: dict[int, Any] = {}
    for key, event in events.items():
        total += size(key) + size(event) + size(event.values) + size(event.arrival)
        total += size(event.offset)
        for part in (event.origin, event.names, event.prediction):
            shared[id(part)] = part
    for part in shared.values():  # one each: the origin, the names, a block's predictions
        total += size(part)
        if isinstance(part, tuple):
            total += sum(size(p) for p in part)
        block = getattr(part, "block", None)
        if isinstance(block, list):  # the pointers counted by the list's own size
            total += size(block)
        elif block is not None:
            total += block.nbytes + size(block)
    values = sum(len(event.names) for event in events.values())
    return total / values, len(events)


def row_pending(ctx: Context) -> list[Result]:
    n = ctx.sizes.pending
    path = _pending_file(ctx, n)
    summary = ctx.workdir / "summary-pending.json"
    flags = ("--join-key", "id", "--label-wait", str(1 << 40))
    runs = {
        "all waiting": _cli(path, summary, *flags, "--max-pending", str(n)),
        "none waiting": _cli(path, summary, *flags, "--max-pending", "1"),
    }
    got = interleaved(1, runs)
    rss = {name: (done[0][0].summary or {}).get("peak_rss_bytes", 0) for name, done in got.items()}
    dropped = (got["none waiting"][0][0].summary or {}).get("join", {})
    per_value, events = pending_bytes(path, n)
    extra = rss["all waiting"] - rss["none waiting"]
    return [
        Result(
            "16c",
            f"memory of --join-key: {count(n)} events of 20 features waiting (JSON lines, no "
            "outcome), the block path",
            Measure("ours", per_value, "bytes a value"),
            goal="<= 32 bytes a pending feature value",
            met=per_value <= 32,
            notes=[
                f"{events:,} events kept in process, their store counted object by object",
                f"peak RSS of the command: {rss['all waiting'] / MiB:,.0f} MiB with all "
                f"{count(n)} waiting, {rss['none waiting'] / MiB:,.0f} MiB with --max-pending 1 "
                f"({dropped.get('expired', 'n/a'):,} expired): "
                f"{extra / (20 * n):.1f} bytes of RSS a waiting value",
                f"wall s: all waiting {got['all waiting'][0][0].wall:.2f}, none waiting "
                f"{got['none waiting'][0][0].wall:.2f}",
            ],
        )
    ]
