"""Row 9: shared-model mode, 1, 2 and 3 workers draining one 6-partition topic.

The JSON-lines records of a hidden hyperplane (10 % of the labels flipped) are produced once to
a fresh 6-partition topic, one record per message. Each timed run starts N ``run --source kafka
--model-topic ... --exit-at-end`` processes at once (a fresh group and model topic per run) and
ends when the last one exits: start-up, group join, restores, learning, mixing and the final
transactions are all in the wall time. The pulled model's held-out accuracy is compared with one
sequential averaged perceptron over the same records. 11d-11f: 2 workers mixing every 1k, 10k and
100k examples (the mixing overhead). 11g-11i: the same runs' CPU-seconds per record, summed over
the workers (goal: sharing costs at most 10 % more CPU per record than one worker), with each
worker's start-up taken out: the CPU of one worker that starts, joins a group, reads its model
topic and exits at the end of an empty topic (the interpreter, the imports, the clients), measured
in every round beside the other runs. Start-up is paid once per worker, not per record (it is
some 0.3 CPU-s a worker, about 0.2 us a record of the row's 1.44M), so it is reported apart.
11j-11k: 1 and 2 workers mixing every 10k with ``--commit-in-background`` (the worker learns
on while its transaction commits; off by default until these rows say it is faster), against
11a's one worker committing inline.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
import uuid
from pathlib import Path

import numpy as np

from benchmarks.common import Context, Measure, Result, count, interleaved, median
from benchmarks.procs import cli_command
from benchmarks.rows_kafka import ENV, _delete_topics, kafka_skip_reason

__all__ = ["row_shared_model"]

PARTITIONS = 6
WORKERS = (1, 2, 3)
MIX_EVERY = (1_000, 10_000, 100_000)
BACKGROUND = (1, 2)  # 11j-11k: workers with --commit-in-background


def _data(n: int, seed: int, features: int = 10, noise: float = 0.1
          ) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """``n`` examples of a hidden hyperplane (the same for every seed) in ``features``
    Gaussian features, a share ``noise`` of the labels flipped."""
    rng = np.random.default_rng(seed)
    w = np.random.default_rng(7).normal(size=features)
    X = rng.normal(size=(n, features))
    y = (X @ w > 0).astype(int)
    flip = rng.random(n) < noise
    return X, np.where(flip, 1 - y, y)


def _produce(bootstrap: str, topic: str, X: np.ndarray, y: np.ndarray) -> None:
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20, acks=1)
    for i, (row, label) in enumerate(zip(X, y)):
        value = {f"f{j}": round(float(v), 5) for j, v in enumerate(row)}
        value["y"] = int(label)
        producer.send(topic, json.dumps(value).encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()


def _broker_cpu() -> float | None:
    """CPU seconds used so far by a local Kafka broker process (None: none found here)."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if b"kafka.Kafka" not in (entry / "cmdline").read_bytes():
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


CPU: dict[str, list[tuple[float, float | None]]] = {}  # run -> (workers' CPU s, broker CPU s)


def _startup(bootstrap: str) -> float:
    """One worker's fixed CPU: it starts, joins a group, reads its (new) model topic and exits at
    the end of an empty topic; the CPU seconds, kept in ``CPU["startup"]``."""
    run = uuid.uuid4().hex[:8]
    topic, model_topic = f"bench-empty-{run}", f"bench-model-{run}"
    _produce(bootstrap, topic, np.empty((0, 10)), np.empty(0))
    cmd = [
        *cli_command(), "run", "--source", "kafka", "--bootstrap-servers", bootstrap,
        "--topic", topic, "--group", f"bench-group-{run}", "--format", "jsonl", "--averaged",
        "--exit-at-end", "--metrics-port", "-1", "--model-topic", model_topic,
        "--mix-every", "10000", "-q",
    ]  # fmt: skip
    cpu0 = _children_cpu()
    started = time.perf_counter()
    subprocess.run(cmd, stderr=subprocess.DEVNULL, check=True, timeout=600)
    CPU.setdefault("startup", []).append((_children_cpu() - cpu0, None))
    _delete_topics(bootstrap, [topic, model_topic])
    return time.perf_counter() - started


def _drain(
    bootstrap: str, topic: str, workers: int, mix_every: int, pulled: Path, *extra: str
) -> float:
    run = uuid.uuid4().hex[:8]
    model_topic, group = f"bench-model-{run}", f"bench-group-{run}"
    cmd = [
        *cli_command(), "run", "--source", "kafka", "--bootstrap-servers", bootstrap,
        "--topic", topic, "--group", group, "--format", "jsonl", "--averaged",
        "--exit-at-end", "--metrics-port", "-1", "--model-topic", model_topic,
        "--mix-every", str(mix_every), "-q", *extra,
    ]  # fmt: skip
    cpu0, broker0 = _children_cpu(), _broker_cpu()
    started = time.perf_counter()
    # dynamic membership (no --instance-id): a worker that ends leaves the group at once; a
    # static member is waited for until its session times out (45 s), so a worker whose
    # partitions another read to their end before it joined would wait that long to end
    procs = [subprocess.Popen(cmd, stderr=subprocess.DEVNULL) for _ in range(workers)]
    codes = [p.wait(timeout=1800) for p in procs]
    wall = time.perf_counter() - started
    broker1 = _broker_cpu()
    broker = None if broker0 is None or broker1 is None else broker1 - broker0
    key = f"{workers}-{mix_every}" + ("-background" if extra else "")
    CPU.setdefault(key, []).append((_children_cpu() - cpu0, broker))
    if codes != [0] * workers:
        raise RuntimeError(f"a worker failed: exit codes {codes}")
    subprocess.run(
        [*cli_command(), "pull-model", "--bootstrap-servers", bootstrap, "--model-topic",
         model_topic, "--output", str(pulled), "--force", "-q"],
        check=True,
    )  # fmt: skip
    _delete_topics(bootstrap, [model_topic])
    return wall


def _accuracy(model: object, X: np.ndarray, y: np.ndarray) -> float:
    names = [f"f{j}" for j in range(X.shape[1])]
    hits = sum(model.predict_one(dict(zip(names, row))) == label  # type: ignore[attr-defined]
               for row, label in zip(X.tolist(), y.tolist()))  # fmt: skip
    return hits / len(y)


def row_shared_model(ctx: Context) -> list[Result]:
    names = ["11a", "11b", "11c", "11d", "11e", "11f", "11j", "11k"]
    titles = [f"shared model, {w} worker{'s' if w > 1 else ''}, mix every 10k" for w in WORKERS]
    titles += [f"shared model, 2 workers, mix every {count(m)}" for m in MIX_EVERY]
    titles += [f"shared model, {w} worker{'s' if w > 1 else ''}, mix every 10k, "
               "`--commit-in-background`" for w in BACKGROUND]  # fmt: skip
    reason = kafka_skip_reason()
    if reason is not None:
        return [Result(r, t, Measure("ours", missing=reason)) for r, t in zip(names, titles)]
    from stream_perceptron import Perceptron
    from stream_perceptron.learners import StreamClassifier

    bootstrap = os.environ[ENV]
    n = ctx.sizes.shared
    X, y = _data(n, seed=1)
    Xh, yh = _data(20_000, seed=2)
    topic = f"stream-perceptron-bench-shared-{uuid.uuid4().hex[:8]}"
    pulled = ctx.workdir / "pulled.json"
    accuracies: dict[str, list[float]] = {}

    def drain(key: str, workers: int, mix_every: int, *extra: str):  # type: ignore[no-untyped-def]
        def go() -> float:
            wall = _drain(bootstrap, topic, workers, mix_every, pulled, *extra)
            model = StreamClassifier.from_state(json.loads(pulled.read_text())["model"])
            if model.n_seen != n:
                raise RuntimeError(f"pulled n_seen {model.n_seen}, not {n}")
            accuracies.setdefault(key, []).append(_accuracy(model, Xh, yh))
            return wall

        return go

    try:
        _produce(bootstrap, topic, X, y)
        runs = {f"w{w}": drain(f"w{w}", w, 10_000) for w in WORKERS}
        runs.update({f"m{m}": drain(f"m{m}", 2, m) for m in MIX_EVERY})
        runs.update({f"b{w}": drain(f"b{w}", w, 10_000, "--commit-in-background")
                     for w in BACKGROUND})  # fmt: skip
        runs["startup"] = lambda: _startup(bootstrap)
        got = interleaved(ctx.repeats, runs)
    finally:
        _delete_topics(bootstrap, [topic])
    sequential = Perceptron(averaged=True)
    names_x = [f"f{j}" for j in range(X.shape[1])]
    for row, label in zip(X.tolist(), y.tolist()):
        sequential.learn_one(dict(zip(names_x, row)), label)
    seq_acc = _accuracy(sequential, Xh, yh)
    one = n / median(got["w1"])
    results = []
    keys = [*(f"w{w}" for w in WORKERS), *(f"m{m}" for m in MIX_EVERY),
            *(f"b{w}" for w in BACKGROUND)]  # fmt: skip
    for r, t, key in zip(names, titles, keys):
        rate = n / median(got[key])
        acc = median(accuracies[key])
        goal = ">= 1.7x one worker" if key in ("w2", "b2") else ""
        results.append(
            Result(
                r,
                f"{t}; {count(n)} records, 6 partitions, `--averaged`",
                Measure("ours", rate, "records/s"),
                Measure("1 worker", one, "records/s"),
                rate / one,
                ratio_text="x 1 worker",
                goal=goal,
                met=(rate / one >= 1.7) if key in ("w2", "b2") else None,
                notes=[
                    f"held-out accuracy {acc:.4f} vs one sequential model {seq_acc:.4f} "
                    f"(gap {100 * (seq_acc - acc):+.2f} points); pulled n_seen exact; wall "
                    f"times {', '.join(f'{w:.1f}' for w in got[key])} s; {_cpu_note(key)}"
                ],
            )
        )
    results += _cpu_rows(n)
    return results


def _cpu_per_record(workers: int, n: int, startup: float = 0.0) -> float | None:
    """Median CPU seconds per record, the workers' summed, of the runs of ``workers`` workers
    mixing every 10k, less ``startup`` CPU seconds per worker."""
    runs = CPU.get(f"{workers}-10000", [])
    return median([(ours - workers * startup) / n for ours, _ in runs]) if runs else None


def _cpu_rows(n: int) -> list[Result]:
    """11g-11i: what sharing costs in CPU, not wall time (2 cores: 3 workers queue for them,
    so their wall time says little): CPU-seconds per record summed over the workers, against
    one worker's; goal: at most 10 % more."""
    startups = CPU.get("startup", [])
    startup = median([cpu for cpu, _ in startups]) if startups else 0.0
    one = _cpu_per_record(1, n, startup)
    whole_one = _cpu_per_record(1, n)
    results = []
    for row, workers in zip(("11g", "11h", "11i"), WORKERS):
        mine = _cpu_per_record(workers, n, startup)
        whole = _cpu_per_record(workers, n)
        title = (f"shared model, CPU per record, {workers} worker{'s' if workers > 1 else ''}, "
                 f"mix every 10k; {count(n)} records, each worker's start-up apart")  # fmt: skip
        if mine is None or one is None or whole is None or whole_one is None or not startups:
            results.append(Result(row, title, Measure("ours", missing="no CPU figure")))
            continue
        ratio = mine / one
        results.append(
            Result(
                row, title,
                Measure("ours", mine * 1e6, "CPU-us/record"),
                Measure("1 worker", one * 1e6, "CPU-us/record"),
                ratio, ratio_text="x 1 worker",
                goal="<= 1.10x one worker" if workers > 1 else "",
                met=(ratio <= 1.10) if workers > 1 else None,
                notes=["the workers' user + system CPU (group join, restores, learning, "
                       "mixing, transactions), median of the runs, less one start-up per "
                       f"worker ({startup:.2f} CPU-s: the median of {len(startups)} runs of a "
                       "worker on an empty topic); with the start-ups: "
                       f"{whole * 1e6:.1f} CPU-us/record, {whole / whole_one:.2f}x one "
                       "worker's; the broker's apart, in 11a-11c"],
            )
        )  # fmt: skip
    return results


def _cpu_note(key: str) -> str:
    """Where the CPU went in the last run of ``key``: workers, broker, of what 2 cores give."""
    workers, mix = (int(key[1:]), 10_000) if key[0] in "wb" else (2, int(key[1:]))
    runs = CPU.get(f"{workers}-{mix}" + ("-background" if key[0] == "b" else ""), [])
    if not runs:
        return ""
    ours, broker = runs[-1]
    shown = "broker not local" if broker is None else f"broker {broker:.1f} CPU-s"
    return f"last run: workers {ours:.1f} CPU-s, {shown}, {os.cpu_count()} cores"
