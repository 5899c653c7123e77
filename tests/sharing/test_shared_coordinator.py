"""The shared-model coordinator in one process, over an in-memory model log and in-memory
transactions that keep Kafka's rule (a transaction's messages and offsets become visible
together at commit, or never): exact counts and exactly-once outputs across a crash and a
partition moving, mixing versions. The same paths run against the real broker in
tests/kafka/test_shared_model.py."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from connectors import Position, Record, Source
from connectors.kafka_transactions import TransactionalSink
from stream_perceptron import Perceptron
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.engine.shared_model import ModelView, SharedModelCoordinator
from stream_perceptron.formats import make_parser

MODEL_TOPIC, TOPIC = "model", "events"


class Cluster:
    """What Kafka keeps: committed messages per topic, committed offsets of the group."""

    def __init__(self) -> None:
        self.topics: dict[str, list[tuple[bytes | None, bytes, list]]] = {}
        self.offsets: dict[tuple[str, int | None], int] = {}


class MemoryLog:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.read = cluster, 0

    def ensure(self) -> None:
        self.cluster.topics.setdefault(MODEL_TOPIC, [])

    def read_new(self, timeout_s: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
        log = self.cluster.topics.get(MODEL_TOPIC, [])
        new, self.read = log[self.read :], len(log)
        return [(k, v) for k, v, _ in new]

    def close(self) -> None:
        pass


class MemoryTransactions:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.pending: list[tuple[str, bytes | None, bytes, list]] = []

    def start(self) -> None:
        pass

    def send(self, topic, value, key=None, headers=None) -> None:
        self.pending.append((topic, key, value, headers or []))

    def commit(self, offsets, group_metadata) -> None:
        assert group_metadata == "group" or not offsets
        for topic, key, value, headers in self.pending:
            self.cluster.topics.setdefault(topic, []).append((key, value, headers))
        self.cluster.offsets.update(offsets)
        self.pending = []

    def abort(self) -> None:
        self.pending = []

    def close(self) -> None:
        self.pending = []


class Killed(Exception):
    pass


class PartitionSource(Source):
    """The records of some partitions, from the group's committed offsets, like a consumer
    that was assigned them; raises Killed after ``kill_after`` batches."""

    def __init__(self, cluster, data, partitions, coordinator, kill_after=None) -> None:
        self.cluster, self.data, self.partitions = cluster, data, partitions
        self.coordinator, self.kill_after = coordinator, kill_after

    def group_metadata(self) -> str:
        return "group"

    def batches(self) -> Iterator[list[Record]]:
        keys = [(TOPIC, p) for p in self.partitions]
        wanted = self.coordinator.assigned(keys)
        starts = {k: max(wanted.get(k, 0), self.cluster.offsets.get(k, 0)) for k in keys}
        for n, offset in enumerate(range(0, max(map(len, self.data.values())), 10)):
            if self.kill_after is not None and n == self.kill_after:
                raise Killed
            batch = []
            for topic, p in keys:
                for o in range(max(offset, starts[(topic, p)]), offset + 10):
                    if o < len(self.data[p]):
                        batch.append(Record(self.data[p][o], Position(TOPIC, o, p)))
            if batch:
                yield batch
        self.coordinator.revoked(keys)

    def close(self) -> None:
        pass


def _data(partitions: int, per_partition: int) -> dict[int, list[bytes]]:
    out = {}
    for p in range(partitions):
        rows = []
        for i in range(per_partition):
            x = ((i * 7 + p * 3) % 11 - 5) / 5.0
            z = ((i * 5 + p) % 13 - 6) / 6.0
            rows.append(json.dumps({"x": x, "z": z, "y": int(x + 0.5 * z > 0)}).encode())
        out[p] = rows
    return out


def _worker(cluster, name, **kwargs) -> tuple[Engine, SharedModelCoordinator]:
    transactions = MemoryTransactions(cluster)
    coordinator = SharedModelCoordinator(
        MemoryLog(cluster), transactions, MODEL_TOPIC, name, every=50, interval=None, **kwargs
    )
    outputs = Outputs(predictions=TransactionalSink(
        transactions, "predictions",
        headers=lambda: [("model_version", str(coordinator.version).encode())],
    ))  # fmt: skip
    engine = Engine(Perceptron(averaged=True), make_parser("jsonl"), outputs,
                    coordinator=coordinator, dense=False)  # fmt: skip
    coordinator.install(engine)
    coordinator.start()
    return engine, coordinator


def _predicted(cluster) -> list[tuple[int, int]]:
    return sorted(
        (p["partition"], p["offset"])
        for p in (json.loads(v) for _, v, _ in cluster.topics.get("predictions", []))
    )


def test_a_crash_and_a_moved_partition_lose_and_repeat_nothing() -> None:
    cluster, data = Cluster(), _data(4, 200)
    a, ca = _worker(cluster, "a", mix_every=60)
    b, cb = _worker(cluster, "b", mix_every=60)
    b.run(PartitionSource(cluster, data, [2, 3], cb))
    # a learns partitions 0 and 1, and dies (kill -9: no final commit) in the middle
    ca.finish = lambda: None  # type: ignore[method-assign]
    with pytest.raises(Killed):
        a.run(PartitionSource(cluster, data, [0, 1], ca, kill_after=7))
    assert ca.commits > 0  # some was committed before,
    assert ca.output.pending  # and some was not: the open transaction dies with the worker
    # partition 1 goes to b, partition 0 to a restarted a
    a2, ca2 = _worker(cluster, "a", mix_every=60)
    a2.run(PartitionSource(cluster, data, [0], ca2))
    b2, cb2 = _worker(cluster, "b", mix_every=60)
    b2.run(PartitionSource(cluster, data, [1], cb2))
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    assert {p: (s.next_offset, s.n_seen) for (_, p), s in view.partitions.items()} == {
        p: (200, 200) for p in range(4)
    }
    assert view.counts() == (800, view.counts()[1])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == 800
    # every record predicted exactly once among the committed outputs
    assert _predicted(cluster) == sorted((p, o) for p in range(4) for o in range(200))
    # the restarted worker started from a mixture and predicted with a version > 0
    assert ca2.version > 0
    versions = [int(dict(h)["model_version"]) for _, v, h in cluster.topics["predictions"]]
    assert max(versions) >= 2


def test_each_publication_is_mixed_in_once() -> None:
    cluster, data = Cluster(), _data(2, 100)
    a, ca = _worker(cluster, "a", mix_every=1000)
    b, cb = _worker(cluster, "b", mix_every=1000)
    a.run(PartitionSource(cluster, data, [0], ca))
    b.run(PartitionSource(cluster, data, [1], cb))
    assert cb.mix() is True and cb.version == 1  # b takes in a's publication
    assert cb.mix() is False  # nothing new since: no second mix of the same publication
    assert cb.divergence > 0
    cb.save()
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    assert view.mixture is not None and view.mixture.version == 1
    assert view.mixture.state["n_seen"] == 200
