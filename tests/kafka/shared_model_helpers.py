"""Helpers of the shared-model tests: data, topics, worker processes, reading the outputs."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from contextlib import closing
from pathlib import Path

import numpy as np
from cli_helpers import CLI, run_cli
from evidence import keep_topic
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka_writes import Message, write

from stream_perceptron.learners import StreamClassifier

PARTITIONS = 6


def name(kind: str) -> str:
    return f"test-sm-{kind}-{uuid.uuid4().hex[:10]}"


def examples(n: int, seed: int, noise: float = 0.0, margin: float = 0.0) -> list[tuple[dict, int]]:
    """Linearly separable in 5 features (with ``margin`` around the hyperplane left empty),
    then a fraction ``noise`` of the labels flipped."""
    rng = np.random.default_rng(seed)
    w = np.array([1.0, -2.0, 0.5, 1.5, -1.0])
    out: list[tuple[dict, int]] = []
    while len(out) < n:
        x = rng.normal(size=5)
        s = float(x @ w) / float(np.linalg.norm(w))
        if abs(s) < margin:
            continue
        y = int(s > 0)
        if rng.random() < noise:
            y = 1 - y
        out.append(({f"f{j}": float(v) for j, v in enumerate(x)}, y))
    return out


def with_tokens(data: list[tuple[dict, int]], vocabulary: int, per_record: int, seed: int):
    """``data`` with ``per_record`` indicator features out of ``vocabulary`` names added to
    each record (a long tail, as text or ids give: what ``--hash-bits`` is for)."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, vocabulary, size=(len(data), per_record))
    return [
        ({**x, **{f"tok{t}": 1.0 for t in row.tolist()}}, y) for (x, y), row in zip(data, tokens)
    ]


def sparse_examples(
    n: int, seed: int, noise: float = 0.0, vocabulary: int = 1000, per_record: int = 8
) -> list[tuple[dict, int]]:
    """A stream where mixing matters: each record holds ``per_record`` indicator features of
    ``vocabulary`` names, its label the sign of their hidden weights' sum (one concept for
    every seed, so held-out data from another seed is the same task), then a fraction
    ``noise`` of the labels flipped. A name comes back about ``n * per_record / vocabulary``
    times, so a worker that learns from its third of the stream alone has seen each one a
    third as often as the group: measured in one process, three averaged workers that never
    mix make 1.3x the mistakes of one sequential model on 60k records with 10 % noise, and
    3 that mix every 2,000 examples 1.05x (:func:`mixing_reference`)."""
    concept = np.random.default_rng(20_26).normal(size=vocabulary)
    rng = np.random.default_rng(seed)
    out: list[tuple[dict, int]] = []
    for _ in range(n):
        names = rng.choice(vocabulary, per_record, replace=False)
        y = int(concept[names].sum() > 0)
        if rng.random() < noise:
            y = 1 - y
        out.append(({f"t{k}": 1.0 for k in names.tolist()}, y))
    return out


def mistakes_of(data: list[tuple[dict, int]], **params) -> int:
    """Mistakes of one perceptron (``params``) predicting each example before learning it."""
    from stream_perceptron import Perceptron

    model, mistakes = Perceptron(**params), 0
    for x, y in data:
        mistakes += model.predict_one(x) != y
        model.learn_one(x, y)
    return mistakes


def mixing_reference(data: list[tuple[dict, int]], workers: int, **params) -> tuple[int, int]:
    """``(sequential, alone)``: the mistakes of one model learning ``data`` in order, and of
    ``workers`` models that never mix, each learning its share of the partitions alone
    (record i is in partition i % PARTITIONS, worker w holds a block of them). A group that
    mixes makes about the first; one that does not, about the second."""
    share = PARTITIONS // workers
    alone = sum(
        mistakes_of([e for i, e in enumerate(data) if (i % PARTITIONS) // share == w], **params)
        for w in range(workers)
    )
    return mistakes_of(data, **params), alone


def measured(text: str) -> None:
    """Print ``text``, and append it with the test's id to ``$STREAM_PERCEPTRON_TEST_MIXING_LOG``
    when set: a soak gathers the figures of its runs there."""
    print(text)
    path = os.environ.get("STREAM_PERCEPTRON_TEST_MIXING_LOG")
    if path:
        with open(path, "a") as f:
            f.write(f"{os.environ.get('PYTEST_CURRENT_TEST', '?').split(' ')[0]}: {text}\n")


def assert_mixed(mistakes: int, data: list[tuple[dict, int]], workers: int, **params) -> None:
    """The group's mistakes during the run (predicting each record before learning it, summed
    over the partitions) are those of workers that mix: under three quarters of the way from
    one sequential model's to those of ``workers`` models that never mix. ``pull-model``
    folds unmixed increments itself, so the pulled model cannot tell; the mistakes made while
    the stream ran can. Measured on the broker: 0.04-0.52 of the way with mixing (16 runs of
    the shared-model tests, the higher ones where the stream was there before the workers),
    0.96-1.03 with ``STREAM_PERCEPTRON_TEST_MIXING=off``."""
    sequential, alone = mixing_reference(data, workers, **params)
    said = (f"group mistakes {mistakes}; one sequential model {sequential}, {workers} never "
            f"mixing {alone}: {(mistakes - sequential) / max(1, alone - sequential):.2f} of the "
            "way to never mixing")  # fmt: skip
    measured(said)
    assert mistakes < sequential + 0.75 * (alone - sequential), (
        f"the group made {mistakes} mistakes: not under three quarters of the way from one "
        f"sequential model's {sequential} to {workers} unmixed models' {alone} (is mixing off?)"
    )


def make_topics(bootstrap: str, *partitions: int) -> list[str]:
    topics = [name("topic") for _ in partitions]
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics(
            [NewTopic(t, p, 1) for t, p in zip(topics, partitions, strict=True)]
        )
    finally:
        admin.close()
    return topics


def produce(bootstrap: str, topic: str, data: list[tuple[dict, int]], start: int = 0) -> None:
    """Record i goes to partition i % PARTITIONS."""
    write(bootstrap, topic, (Message(json.dumps({**x, "y": y}).encode(), partition=i % PARTITIONS)
                             for i, (x, y) in enumerate(data, start)), linger_ms=20)  # fmt: skip


#: The group session of workers in a test where no member stops or dies (the hostile-record,
#: signature and compaction tests): the failover tests' 6 s ends a member's session in a
#: 5.5 s broker stall, which the soak beside two CPU hogs (load up to 41) made: the controller
#: logged "Exceptionally slow controller event ... took 5511 ms" and "controller event queue
#: overloaded", its gc.log no pause, and three members were fenced at once (evidence-26)
STEADY_SESSION_MS = 30_000


def worker_args(
    bootstrap: str, topic: str, group: str, model_topic: str, *extra: str,
    client: str = "kafka-python", session_ms: int = 6000,
) -> list[str]:  # fmt: skip
    """A worker's command line; ``client`` is its ``--kafka-client`` (options in its naming);
    ``session_ms`` its group session (short: the failover tests wait for one to end)."""
    sep = "." if client == "confluent-kafka" else "_"
    keep_topic(bootstrap, model_topic)  # its records in the report if the test fails
    return [
        "run", "--source", "kafka", "--bootstrap-servers", bootstrap, "--topic", topic,
        "--group", group, "--format", "jsonl", "--metrics-port", "-1",
        "--model-topic", model_topic, "--kafka-client", client,
        "--kafka-option", f"session{sep}timeout{sep}ms={session_ms}",
        "--kafka-option", f"heartbeat{sep}interval{sep}ms=1000",
        *_mixing(extra),
    ]  # fmt: skip


#: ``STREAM_PERCEPTRON_TEST_MIXING=off``: the workers of every shared-model test mix only in
#: their last commit (``--mix-every`` of a billion), so that the quality tests can be seen
#: failing without mixing (the mutation check of issue #41); never set in ``make test``
MIXING_SWITCH = "STREAM_PERCEPTRON_TEST_MIXING"


def _mixing(extra: tuple[str, ...]) -> list[str]:
    flags = list(extra)
    if os.environ.get(MIXING_SWITCH) != "off":
        return flags
    if "--mix-every" in flags:
        flags[flags.index("--mix-every") + 1] = "1000000000"
        return flags
    return [*flags, "--mix-every", "1000000000"]


def streaming_workers(
    bootstrap: str, topic: str, predictions: str, client: str, mix_every: int = 2000,
    session_ms: int = 6000,
) -> tuple[list[str], str, str]:  # fmt: skip
    """``(args, model topic, group)`` of averaged workers that commit every 0.5 s, publish
    predictions and log their commits (``-v``): the failover tests' workers."""
    model_topic, group = name("model"), name("group")
    args = worker_args(
        bootstrap, topic, group, model_topic, "--averaged", "--mix-every", str(mix_every),
        "--checkpoint-interval", "0.5", "--predictions-topic", predictions, "-v", client=client,
        session_ms=session_ms,
    )  # fmt: skip
    return args, model_topic, group


def start_worker(args: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [*CLI, *args],
        stdout=subprocess.DEVNULL,
        stderr=log.open("ab"),
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )


def pull(
    bootstrap: str, model_topic: str, path: Path, client: str = "kafka-python"
) -> StreamClassifier:
    proc = run_cli(
        "pull-model", "--bootstrap-servers", bootstrap, "--model-topic", model_topic,
        "--output", str(path), "--kafka-client", client,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    return StreamClassifier.from_state(json.loads(path.read_text())["model"])


def accuracy(model: StreamClassifier, data: list[tuple[dict, int]]) -> float:
    return sum(model.predict_one(x) == y for x, y in data) / len(data)


def read_committed(bootstrap: str, topic: str, partitions: int, timeout: float = 90) -> list:
    """Every committed message of ``topic`` (read_committed), to its end: to the high
    watermark, not the last stable offset, so a transaction still open (a producer a worker
    abandoned, until the broker's transaction timeout aborts it) delays the read instead of
    hiding whatever was committed after it."""
    tps = [TopicPartition(topic, p) for p in range(partitions)]
    probe = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        ends = probe.end_offsets(tps)  # read_uncommitted: the high watermarks
    finally:
        probe.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, isolation_level="read_committed", enable_auto_commit=False
    )
    try:
        consumer.assign(tps)
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        out = []
        while any(consumer.position(tp) < ends[tp] for tp in tps):
            assert time.monotonic() < deadline, (
                f"{topic}: read_committed stuck at "
                f"{[consumer.position(tp) for tp in tps]} of {[ends[tp] for tp in tps]}"
            )
            for messages in consumer.poll(timeout_ms=500).values():
                out += messages
        return out
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group)
    try:
        return {p: consumer.committed(TopicPartition(topic, p)) for p in range(PARTITIONS)}
    finally:
        consumer.close()


def wait_for_leaders(bootstrap: str, topics: list[str], timeout: float = 240) -> None:
    """Wait until every partition of ``topics`` and of the broker's internal topics (the
    group's offsets, the transactions' log) has a leader. A broker restarted after a crash
    answers before it leads anything: the controller first expires its former registration
    (about 9 s, ``broker.session.timeout.ms``), then fences and unfences it, which took 65 s
    once beside the soak's load (34c). A test's own client writing or reading then fails on
    the broker's slowness, not the engine's (soak 34c: its producer gave up after 120 s, its
    offsets reader after 30), so a test waits for this before its clients go on.

    Raises
    ------
    AssertionError
        If some partition is still leaderless after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
            try:
                names = [*topics, *(t for t in admin.list_topics() if t.startswith("__"))]
                described = admin.describe_topics(names)
            finally:
                admin.close()
            waiting: object = [
                (t["name"], q["partition_index"]) for t in described for q in t["partitions"]
                if q["leader_id"] < 0 or q["error_code"]
            ] + [t["name"] for t in described if t["error_code"]]  # fmt: skip
        except KafkaError as exc:  # not answering yet
            waiting = exc
        if not waiting:
            return
        assert time.monotonic() < deadline, f"no leaders {timeout:g} s after the restart: {waiting}"
        time.sleep(0.5)


def partition_records(bootstrap: str, model_topic: str) -> dict:
    """The latest partition state of each input partition in the model topic."""
    from connectors.kafka.kafka_python import KafkaModelLog
    from stream_perceptron.sharing.pull import read_view

    with closing(KafkaModelLog(bootstrap, model_topic)) as log:
        view = read_view(log)
    return {p: s for (_, p), s in view.partitions.items()}


def prediction_positions(messages: list) -> list[tuple[str, int, int]]:
    return sorted(
        (p["topic"], p["partition"], p["offset"]) for p in (json.loads(m.value) for m in messages)
    )


def wait_for(log: Path, text: str, since: int = 0, timeout: float = 60) -> None:
    """Wait until ``text`` appears in ``log`` after its first ``since`` bytes."""
    deadline = time.monotonic() + timeout
    while text.encode() not in log.read_bytes()[since:]:
        assert time.monotonic() < deadline, f"{text!r} not in {log}: {log.read_text()[-2000:]}"
        time.sleep(0.1)
