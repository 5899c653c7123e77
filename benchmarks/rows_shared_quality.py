"""Row 14: what mixing buys, on the broker: the pulled model against one sequential model, and
the mistakes made during the run against workers that never mix.

Per seed, learner (plain, ``--averaged``), Kafka client and ``--mix-every`` (500, 2,000,
10,000), three workers start on a fresh 6-partition topic while the stream is produced (50
features, 2 % of the labels flipped, over about 8 s), so all of them learn side by side from
the start; once the group has committed every record they are stopped (SIGTERM) and
``pull-model`` takes the model.
Reported per setting, over the seeds: the pulled model's held-out accuracy minus one sequential
perceptron's over the same records (mean and worst; on 50,000 held-out examples scored against
the hyperplane itself, the goal's measure, and on 10,000 with 2 % of their labels flipped, as
the stream's, the measure of the rows before 2026-11-26), the mixtures made, and the mistakes made
during the run (the partition records' count, cluster-wide) against the no-mix control: the
same three workers with mixing off (``--mix-every`` and ``--mix-interval`` past the run), whose
model is folded once, by ``pull-model``. Goals (the issue's): plain mean gap >= -1 point and no
run below -3; averaged no run below -0.5; mixed runs make fewer mistakes than the control.

Seeds: ``Sizes.shared_seeds`` (10; ``--quick``: 1). Each run takes 15-25 s here.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import uuid
from contextlib import closing
from pathlib import Path

import numpy as np

from benchmarks.common import Context, Measure, Result, count
from benchmarks.procs import cli_command
from benchmarks.rows_kafka import ENV, _delete_topics, kafka_skip_reason
from benchmarks.rows_shared_model import _accuracy, _data

__all__ = ["row_shared_quality"]

PARTITIONS = 6
WORKERS = 3
LEARNERS = ("plain", "averaged")
CLIENTS = ("kafka-python", "confluent-kafka")
MIX_EVERY = (500, 2_000, 10_000)
NEVER = 10**12  # --mix-every of the no-mix control
PRODUCE_S = 8.0
#: the stream: a hyperplane in 50 features, 2 % of the labels flipped. Each worker's third of
#: it is not enough to learn the boundary, so what the others learned counts. On row 11's
#: stream (10 features, 10 % flipped) each worker's 10k examples nearly suffice: in process,
#: the plain perceptron's mistakes with mixing were within 1-2 % of the no-mix control's, in
#: both directions, while on this one every mixed setting made fewer (2 seeds each).
FEATURES, NOISE = 50, 0.02
CLEAN_HELD_OUT = 50_000


def _records(X: np.ndarray, y: np.ndarray) -> list[bytes]:
    return [
        json.dumps({**{f"f{j}": round(float(v), 5) for j, v in enumerate(row)}, "y": int(label)})
        .encode()
        for row, label in zip(X, y)
    ]


def _produce(bootstrap: str, topic: str, records: list[bytes], seconds: float) -> None:
    """``records`` in 20 slices over about ``seconds``, record i to partition i % 6."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    try:
        step = max(1, len(records) // 20)
        for start in range(0, len(records), step):
            for i in range(start, min(start + step, len(records))):
                producer.send(topic, records[i], partition=i % PARTITIONS)
            producer.flush()
            time.sleep(seconds / 20)
    finally:
        producer.close()


def _committed(bootstrap: str, group: str, topic: str) -> int:
    """The group's committed offsets on ``topic``, summed (records committed)."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group,
                             enable_auto_commit=False)  # fmt: skip
    try:
        return sum(consumer.committed(TopicPartition(topic, p)) or 0 for p in range(PARTITIONS))
    finally:
        consumer.close()


def _run(bootstrap: str, records: list[bytes], learner: str, client: str, mix_every: int,
         workdir: Path) -> tuple[dict, int, int, int]:  # fmt: skip
    """One run: ``(pulled model state, mixtures, examples, mistakes)``."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from connectors.kafka.kafka_python import KafkaModelLog
    from stream_perceptron.sharing.pull import read_view

    run = uuid.uuid4().hex[:8]
    topic, model_topic, group = f"bench-q-{run}", f"bench-q-model-{run}", f"bench-q-group-{run}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    mixing = (["--mix-every", str(mix_every)] if mix_every != NEVER
              else ["--mix-every", str(NEVER), "--mix-interval", "1000000"])  # fmt: skip
    cmd = [
        *cli_command(), "run", "--source", "kafka", "--bootstrap-servers", bootstrap,
        "--topic", topic, "--group", group, "--format", "jsonl", "--metrics-port", "-1",
        "--model-topic", model_topic, "--kafka-client", client, *mixing, "-q",
        *(["--averaged"] if learner == "averaged" else []),
    ]  # fmt: skip
    procs = [
        subprocess.Popen([*cmd, "--instance-id", f"w{i}"], stderr=subprocess.DEVNULL)
        for i in range(WORKERS)
    ]
    producing = threading.Thread(target=_produce, args=(bootstrap, topic, records, PRODUCE_S))
    try:
        producing.start()
        producing.join()
        deadline = time.monotonic() + 300
        while _committed(bootstrap, group, topic) < len(records):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the workers did not commit every record ({run})")
            time.sleep(0.5)
        for p in procs:
            p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=120) for p in procs]
        if codes != [0] * WORKERS:
            raise RuntimeError(f"a worker failed: exit codes {codes}")
        pulled = workdir / f"pulled-{run}.json"
        subprocess.run(
            [*cli_command(), "pull-model", "--bootstrap-servers", bootstrap, "--model-topic",
             model_topic, "--output", str(pulled), "-q"],
            check=True, timeout=120,
        )  # fmt: skip
        with closing(KafkaModelLog(bootstrap, model_topic)) as log:
            view = read_view(log)
        examples, mistakes = view.counts()
        version = view.mixture.version if view.mixture is not None else 0
        return json.loads(pulled.read_text())["model"], version, examples, mistakes
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
        _delete_topics(bootstrap, [topic, model_topic])


def row_shared_quality(ctx: Context) -> list[Result]:
    settings = [(lr, cl, m) for lr in LEARNERS for cl in CLIENTS for m in MIX_EVERY]
    names = [f"14{chr(ord('a') + i)}" for i in range(len(settings))]
    titles = [f"shared-model quality, {lr}, {cl}, mix every {count(m)}" for lr, cl, m in settings]
    reason = kafka_skip_reason()
    if reason is not None:
        return [Result(r, t, Measure("ours", missing=reason)) for r, t in zip(names, titles)]
    from stream_perceptron import Perceptron
    from stream_perceptron.learners import StreamClassifier

    bootstrap = os.environ[ENV]
    n, seeds = ctx.sizes.shared_quality, ctx.sizes.shared_seeds
    Xh, yh = _data(10_000, seed=999, features=FEATURES, noise=NOISE)
    #: scored against the hyperplane: the labels' noise and a small sample made most of what
    #: separated the averaged runs (the no-mix control's worst gap was as low as the mixed)
    Xc, yc = _data(CLEAN_HELD_OUT, seed=998, features=FEATURES, noise=0.0)
    gaps: dict[tuple, list[float]] = {}
    noisy_gaps: dict[tuple, list[float]] = {}
    mixtures: dict[tuple, list[int]] = {}
    mistakes: dict[tuple, list[int]] = {}
    for seed in range(seeds):
        X, y = _data(n, seed=seed, features=FEATURES, noise=NOISE)
        records = _records(X, y)
        names_x = [f"f{j}" for j in range(X.shape[1])]
        for learner in LEARNERS:
            sequential = Perceptron(averaged=learner == "averaged")
            for row, label in zip(X.tolist(), y.tolist()):
                sequential.learn_one(dict(zip(names_x, row)), label)
            seq_acc = _accuracy(sequential, Xc, yc)
            seq_noisy = _accuracy(sequential, Xh, yh)
            for client in CLIENTS:
                for mix in (*MIX_EVERY, NEVER):
                    state, version, examples, made = _run(
                        bootstrap, records, learner, client, mix, ctx.workdir
                    )
                    if examples != n or state["n_seen"] != n:
                        raise RuntimeError(f"learned {examples} / pulled {state['n_seen']} of {n}")
                    key = (learner, client, mix)
                    pulled = StreamClassifier.from_state(state)
                    gaps.setdefault(key, []).append(_accuracy(pulled, Xc, yc) - seq_acc)
                    noisy_gaps.setdefault(key, []).append(_accuracy(pulled, Xh, yh) - seq_noisy)
                    mixtures.setdefault(key, []).append(version)
                    mistakes.setdefault(key, []).append(made)
                    print(f"    seed {seed} {learner} {client} mix {mix}: gap "
                          f"{100 * gaps[key][-1]:+.2f} points (noisy labels "
                          f"{100 * noisy_gaps[key][-1]:+.2f}), {version} mixtures, {made} "
                          "mistakes", flush=True)  # fmt: skip
    results = []
    for row, title, (learner, client, mix) in zip(names, titles, settings):
        key, control = (learner, client, mix), (learner, client, NEVER)
        g = [100 * v for v in gaps[key]]
        mean, worst = sum(g) / len(g), min(g)
        noisy = [100 * v for v in noisy_gaps[key]]
        made, made_control = sum(mistakes[key]), sum(mistakes[control])
        if learner == "plain":
            goal, met = ">= -1 point mean, no run < -3; fewer mistakes than no-mix", (
                mean >= -1 and worst >= -3 and made < made_control
            )
        else:
            goal, met = "no run < -0.5 point; fewer mistakes than no-mix", (
                worst >= -0.5 and made < made_control
            )
        results.append(
            Result(
                row, f"{title}; {count(n)} records x {seeds} seed{'s' if seeds > 1 else ''}",
                Measure("ours", mean, "points"),
                Measure("no-mix mistakes", made_control / seeds, "per run"),
                made / made_control, ratio_text="x no-mix mistakes",
                goal=goal, met=met,
                notes=[f"pulled - sequential held-out accuracy: mean {mean:+.2f}, worst "
                       f"{worst:+.2f} points (noisy labels: mean {sum(noisy) / len(noisy):+.2f}, "
                       f"worst {min(noisy):+.2f}; control's worst "
                       f"{100 * min(gaps[control]):+.2f}); mixtures per run {mixtures[key]}; "
                       f"mistakes during the run {made / seeds:,.0f} per run (no-mix control "
                       f"{made_control / seeds:,.0f}, its gap mean "
                       f"{100 * sum(gaps[control]) / seeds:+.2f} points)"],
            )
        )  # fmt: skip
    return results
