"""``--join-key`` with ``--labels-topic`` in shared-model mode (issue 44): each worker joins the
partitions it owns, a store per partition task kept in a compacted changelog topic, and a task
that moves (a rebalance, a ``kill -9`` and restart) goes on from its last commit.

The stream is the stdin proof test's (``tests/engine/test_delayed_labels.py``) as two topics of
3 partitions keyed by the join key, written before the workers start (so each task's merge by
timestamp is the order of the stream). The reference of each task is the issue's join rule
(``Reference``) on that task's records alone, with the task's own clock: the predictions (one
per event, with the label of an event learned at once), the examples the group learned (the
model topic's partition records), and the tasks' clocks in the changelog must equal it, whatever
worker joined what and whatever was killed.
"""

from __future__ import annotations

import json
import random
import signal
import sys
import time
import zlib
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from shared_model_helpers import (
    committed,
    make_topics,
    name,
    read_committed,
    start_worker,
    worker_args,
)
from test_delayed_labels_kafka import write_topics

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from test_delayed_labels import COUNTERS, Reference, delayed_stream  # noqa: E402

from stream_perceptron.cli.run_checks import DEFAULT_MAX_PENDING  # noqa: E402

PARTITIONS = 3
WAIT = 400  # records of a task: some outcomes come too late (expired and unmatched)


def task_of(i: int, obj: dict[str, Any]) -> int:
    """The partition ``write_topics`` gives record ``i`` (its key's, or ``i``'s without one)."""
    if "id" not in obj:
        return i % PARTITIONS
    return zlib.crc32(str(obj["id"]).encode()) % PARTITIONS


def references(objs: list[dict[str, Any]]) -> tuple[dict[int, Reference], dict[int, int]]:
    """Each task's join by the rule, on its records alone; each task's record count."""
    refs = {p: Reference(DEFAULT_MAX_PENDING, WAIT) for p in range(PARTITIONS)}
    clocks = dict.fromkeys(range(PARTITIONS), 0)
    for i, obj in enumerate(objs):
        p = task_of(i, obj)
        refs[p].record(clocks[p], i, obj)
        clocks[p] += 1
    return refs, clocks


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        got = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
    finally:
        consumer.close()
    return {tp.partition: offset for tp, offset in got.items()}


def next_to_commit(logs: dict[str, Path], timeout: float = 90) -> str:
    """The first worker whose log says "committed" again from now on: one still learning
    (waiting on one chosen beforehand, the test once waited on a worker whose partitions had
    all moved to the other while it restarted, and which had nothing left to commit)."""
    sizes = {i: log.stat().st_size for i, log in logs.items()}
    deadline = time.monotonic() + timeout
    while True:
        for i, log in logs.items():
            if b"committed" in log.read_bytes()[sizes[i]:]:
                return i
        assert time.monotonic() < deadline, "no worker committed"
        time.sleep(0.05)


def done(bootstrap: str, group: str, topic: str) -> dict[int, int | None]:
    """The group's committed offsets of ``topic``'s partitions."""
    got = committed(bootstrap, group, topic)
    return {p: got.get(p) for p in range(PARTITIONS)}


def changelog_tasks(bootstrap: str, topic: str) -> dict[int, dict[str, Any]]:
    """Each partition's last task record in the changelog topic (read_committed)."""
    out = {}
    for message in read_committed(bootstrap, topic, PARTITIONS):
        if message.key == b"":
            out[message.partition] = json.loads(message.value)
    return out


def forge_task_record(bootstrap: str, changelog: str) -> None:
    """A changelog topic made as the workers make it, holding a task record of partition 0
    written without the group's key: taken, it would start that task's clock at 7."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(changelog, PARTITIONS, 1,
                                      topic_configs={"cleanup.policy": "compact"})])  # fmt: skip
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    try:
        forged = {"v": 1, "kind": "task", "records": 7, "time": None}
        producer.send(changelog, json.dumps(forged).encode(), key=b"", partition=0).get(30)
    finally:
        producer.close()


def group_learned(bootstrap: str, model_topic: str) -> dict[tuple[str, int], Any]:
    from connectors.kafka.kafka_python import KafkaModelLog
    from stream_perceptron.sharing.pull import read_view

    with closing(KafkaModelLog(bootstrap, model_topic)) as log:
        return dict(read_view(log).partitions)


@pytest.mark.parametrize("kills", [0, 2])
def test_workers_join_their_own_partitions_exactly_once(kafka_bootstrap, tmp_path, kafka_client,
                                                        kills):  # fmt: skip
    objs = delayed_stream(12_000, seed=23, max_late=1000)
    events, outcomes, where = write_topics(kafka_bootstrap, objs)
    refs, clocks = references(objs)
    assert min(sum(r.n[k] for r in refs.values())
               for k in ("expired", "unmatched_outcome", "duplicate_outcome")) > 5  # fmt: skip
    model_topic, group = name("model"), name("group")
    (predictions,) = make_topics(kafka_bootstrap, 3)
    changelog = f"{model_topic}-join"
    args = worker_args(kafka_bootstrap, events, group, model_topic, "--labels-topic", outcomes,
                       "--join-key", "id", "--label-wait", str(WAIT), "--predictions-topic",
                       predictions, "--checkpoint-every", "50", "--checkpoint-interval",
                       "0.5", "-v", client=kafka_client)  # fmt: skip
    if kills:  # with the group's key: a stranger's task record in the changelog is refused
        key_file = tmp_path / "group.key"
        key_file.write_bytes(b"0123456789abcdef0123456789abcdef-group\n")
        key_file.chmod(0o600)
        args += ["--model-topic-key-file", str(key_file)]
        forge_task_record(kafka_bootstrap, changelog)
    ids = ["w0", "w1"]
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    procs = {i: start_worker([*args, "--instance-id", i], logs[i]) for i in ids}
    rng = random.Random(kills)
    want = {t: ends(kafka_bootstrap, t) for t in (events, outcomes)}
    try:
        for _ in range(kills):  # mid-stream: the worker that commits next (it owns partitions)
            victim = next_to_commit(logs)
            time.sleep(rng.uniform(0.05, 0.4))
            # a kill after the last record tests nothing: the stream must be long enough
            assert {t: done(kafka_bootstrap, group, t) for t in want} != want, "stream over"
            procs[victim].kill()
            procs[victim].wait()
            procs[victim] = start_worker([*args, "--instance-id", victim], logs[victim])
        deadline = time.monotonic() + 150
        while (got := {t: done(kafka_bootstrap, group, t) for t in want}) != want:
            assert time.monotonic() < deadline, (got, want)
            assert all(p.poll() is None for p in procs.values()), "a worker exited"
            time.sleep(0.5)
        for p in procs.values():
            p.send_signal(signal.SIGTERM)
        assert [p.wait(timeout=60) for p in procs.values()] == [0, 0]
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
    # one prediction per event, as each task's reference predicts them, the labels of what
    # was learned at once with them
    got = [json.loads(m.value) for m in read_committed(kafka_bootstrap, predictions, 3)]
    seen = Counter((g["partition"], g["offset"]) for g in got)
    assert max(seen.values()) == 1, [k for k, c in seen.items() if c > 1][:10]
    by_line = {where[(g["partition"], g["offset"])]: g.get("label") for g in got}
    want_lines = {o: y for r in refs.values() for o, _p, y, _m in r.lines}
    assert by_line == want_lines
    # what the group learned: every joined pair once
    learned = group_learned(kafka_bootstrap, model_topic)
    assert sum(s.n_seen for s in learned.values()) == sum(r.n["learned"] for r in refs.values())
    # each task's clock in its changelog partition: its records, each read once
    tasks = changelog_tasks(kafka_bootstrap, changelog)
    assert {p: t["records"] for p, t in tasks.items()} == clocks
    # and its counts, carried over every kill: the group's totals exact. A served prediction
    # is the shared model's, not the reference's: the served mistakes are counted against
    # the predictions topic's line of each joined pair's event
    served = {where[(g["partition"], g["offset"])]: g["prediction"] for g in got}
    for p, ref in refs.items():
        task = tasks[p]["counts"]
        assert {k: task[k] for k in COUNTERS if k != "served_mistakes"} == {
            k: ref.n[k] for k in COUNTERS if k != "served_mistakes"}, f"task {p}"  # fmt: skip
        assert task["served_mistakes"] == sum(served[e] != y for e, y in ref.pairs), f"task {p}"
        assert (task["delay_buckets"], task["delay_sum"]) == (ref.buckets(), sum(ref.delays))
        assert task["records"] == ref.n["waiting"]  # the records the join kept waiting
    text = "".join(log.read_text() for log in logs.values())
    assert "restored the join of partition" in text
    if kills:
        assert "refused 1 records of the join changelog" in text and "'unsigned': 1" in text


def test_a_changelog_topic_not_co_partitioned_is_refused(kafka_bootstrap, tmp_path,
                                                         kafka_client):  # fmt: skip
    objs = delayed_stream(50, seed=3, max_late=20)
    events, outcomes, _where = write_topics(kafka_bootstrap, objs)
    model_topic, changelog = name("model"), name("changelog")
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(changelog, 2, 1,
                                      topic_configs={"cleanup.policy": "compact"})])  # fmt: skip
    finally:
        admin.close()
    args = worker_args(kafka_bootstrap, events, name("group"), model_topic, "--labels-topic",
                       outcomes, "--join-key", "id", "--join-changelog-topic", changelog,
                       client=kafka_client)  # fmt: skip
    log = tmp_path / "w.log"
    proc = start_worker(args, log)
    assert proc.wait(timeout=60) != 0
    text = log.read_text()
    assert f"the join changelog topic {changelog!r} has 2 partitions" in text, text[-2000:]
    assert "events topic's 3" in text
