"""Row 17: where a shared-model worker's time goes, 1 worker and then 2 (a mix every 10k).

Row 11's records (the hidden hyperplane, one JSON-lines record per message) are produced once
to a fresh 6-partition topic; each run starts N ``run --source kafka --model-topic ...
--exit-at-end --summary-json ...`` workers at once (a fresh group and model topic per run), as
row 11 does, and reads each worker's ``timeline`` from its summary (see
:mod:`stream_perceptron.sharing.timeline`): per phase the seconds and their share of the
worker's wall time, its records per second and CPU microseconds per record, beside the broker's
CPU seconds over the run (``/proc/<pid>/stat`` of the pid in ``$KAFKA_STATE_DIR/kafka.pid``).
The details say what a commit's increment and a move onto a mixture cost: the learner's state
taken (``get_state``), the diff, the translation, ``from_state`` and ``take_over``.

``python -m benchmarks --only 17 --repeats 1`` (the broker from ``kafka/kafka-up.sh``): the
run of median wall time of ``--repeats`` is shown.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from benchmarks.common import Context, Measure, Result, count
from benchmarks.procs import cli_command
from benchmarks.rows_kafka import ENV, _delete_topics, kafka_skip_reason
from benchmarks.rows_shared_model import _broker_cpu, _data, _produce
from stream_perceptron.sharing.timeline import PHASES

__all__ = ["format_timeline", "row_shared_timeline"]

WORKERS = (1, 2)
MIX_EVERY = 10_000


def broker_cpu() -> float | None:
    """CPU seconds (user + system) of the broker whose pid ``kafka/kafka-up.sh`` wrote in its
    state dir (``$KAFKA_STATE_DIR``, default the repository's ``.kafka``); else of a local
    ``kafka.Kafka`` process (row 11's way); None when neither is found."""
    state = Path(os.environ.get("KAFKA_STATE_DIR", Path(__file__).resolve().parents[1] / ".kafka"))
    try:
        pid = int((state / "kafka.pid").read_text().strip())
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError):
        return _broker_cpu()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _run(bootstrap: str, topic: str, workers: int, workdir: Path) -> dict[str, Any]:
    """N workers drain ``topic``: the wall time, the broker's CPU and each worker's summary."""
    run = uuid.uuid4().hex[:8]
    model_topic, group = f"bench-model-{run}", f"bench-group-{run}"
    paths = [workdir / f"timeline-{run}-{i}.json" for i in range(workers)]
    logs = [workdir / f"timeline-{run}-{i}.log" for i in range(workers)]
    cmds = [[
        *cli_command(), "run", "--source", "kafka", "--bootstrap-servers", bootstrap,
        "--topic", topic, "--group", group, "--format", "jsonl", "--averaged",
        "--exit-at-end", "--metrics-port", "-1", "--model-topic", model_topic,
        "--mix-every", str(MIX_EVERY), "-q", "--summary-json", str(path),
    ] for path in paths]  # fmt: skip
    broker0 = broker_cpu()
    started = time.perf_counter()
    procs = []
    for cmd, log in zip(cmds, logs):
        with log.open("wb") as err:
            procs.append(subprocess.Popen(cmd, stderr=err))
    codes = [p.wait(timeout=1800) for p in procs]
    wall = time.perf_counter() - started
    broker1 = broker_cpu()
    _delete_topics(bootstrap, [model_topic])
    if codes != [0] * workers:
        raise RuntimeError(f"a worker failed: exit codes {codes} (logs: {logs})")
    summaries = [json.loads(p.read_text()) for p in paths]
    broker = None if broker0 is None or broker1 is None else broker1 - broker0
    return {"wall": wall, "broker_cpu": broker, "workers": summaries}


def format_timeline(summary: dict[str, Any]) -> str:
    """One worker's timeline on one line: its role, wall, CPU, records, then each phase's
    seconds and share of its wall time, and what the lead of issue 45 costs per call."""
    t = summary["timeline"]
    wall, cpu = t["wall_seconds"], t["cpu_seconds"]
    n = summary["records_this_run"]
    phases = ", ".join(
        f"{p} {t['phases'][p]:.2f} s ({100 * t['phases'][p] / wall:.1f} %)" for p in PHASES
    )
    d, dc = t["details"], t["detail_calls"]

    def per(name: str) -> str:
        return f"{1e3 * d[name] / dc[name]:.2f} ms" if dc[name] else "n/a"

    return (
        f"{count(n)} records in {wall:.2f} s wall ({n / wall:,.0f} records/s), "
        f"{cpu:.2f} CPU-s ({1e6 * cpu / max(n, 1):.2f} CPU-us/record); {phases}, other "
        f"{t['other_seconds']:.2f} s ({100 * t['other_seconds'] / wall:.1f} %); "
        f"{t['calls']['learn']} batches learned, {t['calls']['read']} reads of the model topic "
        f"({1e3 * t['phases']['read'] / max(t['calls']['read'], 1):.2f} ms each), "
        f"{dc['commit']} commits ({per('commit')} each), {t['calls']['fold']} folds "
        f"({1e3 * t['phases']['fold'] / max(t['calls']['fold'], 1):.2f} ms each), "
        f"{dc['increment_get_state']} increments, {dc['move_adopt']} moves; per increment: "
        f"get_state {per('increment_get_state')}, diff+encode {per('increment_diff')}; per move: "
        f"get_state {per('move_get_state')}, translate {per('move_translate')}, from_state+"
        f"take_over {per('move_adopt')}"
    )


def row_shared_timeline(ctx: Context) -> list[Result]:
    names = [f"17{'ab'[i]}" for i in range(len(WORKERS))]
    titles = [
        f"shared-model timeline, {w} worker{'s' if w > 1 else ''}, mix every {count(MIX_EVERY)}"
        for w in WORKERS
    ]
    reason = kafka_skip_reason()
    if reason is not None:
        return [Result(r, t, Measure("ours", missing=reason)) for r, t in zip(names, titles)]
    bootstrap = os.environ[ENV]
    n = ctx.sizes.shared
    X, y = _data(n, seed=1)
    topic = f"stream-perceptron-bench-timeline-{uuid.uuid4().hex[:8]}"
    got: dict[int, list[dict[str, Any]]] = {w: [] for w in WORKERS}
    try:
        _produce(bootstrap, topic, X, y)
        for _ in range(ctx.repeats):
            for w in WORKERS:
                got[w].append(_run(bootstrap, topic, w, ctx.workdir))
    finally:
        _delete_topics(bootstrap, [topic])
    load = os.getloadavg()
    one = None
    results = []
    for r, t, w in zip(names, titles, WORKERS):
        runs = sorted(got[w], key=lambda x: x["wall"])
        run = runs[len(runs) // 2]
        rate = n / run["wall"]
        one = rate if one is None else one
        broker = run["broker_cpu"]
        walls = ", ".join(f"{x['wall']:.1f}" for x in runs)
        notes = [f"worker {i + 1}, {format_timeline(s)}" for i, s in enumerate(run["workers"])]
        notes.append(
            ("broker not found" if broker is None else
             f"broker {broker:.2f} CPU-s ({1e6 * broker / n:.2f} CPU-us/record)")
            + f"; the run of median wall of {len(runs)} ({walls} s); load average "
            f"{load[0]:.2f} after the row, {os.cpu_count()} cores"
        )  # fmt: skip
        results.append(Result(
            r, f"{t}; {count(n)} records, 6 partitions, `--averaged`",
            Measure("ours", rate, "records/s"), Measure("1 worker", one, "records/s"),
            rate / one, ratio_text="x 1 worker", notes=notes,
        ))  # fmt: skip
    return results
