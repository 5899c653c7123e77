"""The shared-model coordinator in one process, over an in-memory model log and in-memory
transactions that keep Kafka's rule (a transaction's messages and offsets become visible
together at commit, or never): exact counts and exactly-once outputs across a crash and a
partition moving, mixing versions. The same paths run against the real broker in
tests/kafka/test_shared_model.py."""

from __future__ import annotations

import json
import random
import sys
import time
from collections.abc import Iterator

import pytest

from connectors import Position, Record, Source
from connectors.kafka.background_commits import BackgroundCommits
from connectors.kafka.model_log import LogRecord
from connectors.kafka.topic_sink import TransactionalSink
from stream_perceptron import Perceptron
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.engine.blocks import BlockPath
from stream_perceptron.formats import make_parser
from stream_perceptron.sharing.coordinator import SharedModelCoordinator
from stream_perceptron.sharing.view import ModelView

MODEL_TOPIC, TOPIC = "model", "events"


class Cluster:
    """What Kafka keeps: committed messages per topic, committed offsets of the group."""

    def __init__(self) -> None:
        self.topics: dict[str, list[tuple[bytes | None, bytes, list]]] = {}
        self.offsets: dict[tuple[str, int | None], int] = {}


class MemoryLog:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster, self.read = cluster, 0
        #: the reader sees nothing from this index on (another producer's transaction, committed
        #: but not yet marked in the log); None: all of it
        self.hidden_from: int | None = None

    def ensure(self) -> None:
        self.cluster.topics.setdefault(MODEL_TOPIC, [])

    def read_new(self, timeout_s: float = 30.0) -> list[tuple[bytes | None, bytes | None]]:
        log = self.cluster.topics.get(MODEL_TOPIC, [])
        end = len(log) if self.hidden_from is None else min(len(log), self.hidden_from)
        new, self.read = log[self.read : end], max(self.read, end)
        return [LogRecord(k, v, h) for k, v, h in new]  # (key, value), headers beside

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


@pytest.fixture(autouse=True, params=["commits-inline", "commits-in-background"])
def commit_mode(request, monkeypatch) -> str:
    """Every test twice: the engine waiting for each commit, and committing in the background
    (connectors.kafka.background_commits: the engine learns on while a transaction commits)."""
    monkeypatch.setattr(sys.modules[__name__], "BACKGROUND", request.param != "commits-inline")
    return request.param


#: the workers' transactions committed in the background (set by the commit_mode fixture)
BACKGROUND = False


def _out(transactions):
    return BackgroundCommits(transactions) if BACKGROUND else transactions


def _uncommitted(coordinator) -> int:
    """Messages sent and not committed: in the open transaction, or held for the next."""
    out = coordinator.output
    if isinstance(out, BackgroundCommits):
        return len(out.output.pending) + out.held
    return len(out.pending)


def _worker(
    cluster, name, learner=None, signer=None, dense=False, **kwargs
) -> tuple[Engine, SharedModelCoordinator]:
    transactions = _out(MemoryTransactions(cluster))
    coordinator = SharedModelCoordinator(
        MemoryLog(cluster), transactions, MODEL_TOPIC, name, every=50, interval=None, **kwargs
    )
    coordinator.view.signer = signer  # --model-topic-key-file
    coordinator.peek_s = None  # the leader's timed looks between commits: off (deterministic)
    outputs = Outputs(predictions=TransactionalSink(
        transactions, "predictions",
        headers=lambda: [("model_version", str(coordinator.version).encode())],
    ))  # fmt: skip
    engine = Engine(learner or Perceptron(averaged=True), make_parser("jsonl"), outputs,
                    coordinator=coordinator, dense=dense)  # fmt: skip
    coordinator.start()
    return engine, coordinator


def _predicted(cluster) -> list[tuple[int, int]]:
    return sorted(
        (p["partition"], p["offset"])
        for p in (json.loads(v) for _, v, _ in cluster.topics.get("predictions", []))
    )


def _crash_and_move(dense: bool) -> Cluster:
    cluster, data = Cluster(), _data(4, 200)
    a, ca = _worker(cluster, "a", mix_every=60, dense=dense)
    b, cb = _worker(cluster, "b", mix_every=60, dense=dense)
    b.run(PartitionSource(cluster, data, [2, 3], cb))
    # a learns partitions 0 and 1, and dies (kill -9: no final commit) in the middle
    ca.finish = lambda: None  # type: ignore[method-assign]
    with pytest.raises(Killed):
        a.run(PartitionSource(cluster, data, [0, 1], ca, kill_after=7))
    assert ca.commits > 0  # some was committed before,
    assert _uncommitted(ca)  # and some was not: the open transaction dies with the worker
    # partition 1 goes to b, partition 0 to a restarted a
    a2, ca2 = _worker(cluster, "a", mix_every=60, dense=dense)
    a2.run(PartitionSource(cluster, data, [0], ca2))
    b2, cb2 = _worker(cluster, "b", mix_every=60, dense=dense)
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
    return cluster


def test_a_crash_and_a_moved_partition_lose_and_repeat_nothing() -> None:
    _crash_and_move(dense=False)


def test_the_block_path_shares_the_same_model_as_the_per_record_path(monkeypatch) -> None:
    """Shared-model mode on the engine's block path (a batch's records of a partition learned
    in one call): the same commits, increments, mixtures, outputs and offsets, byte for byte."""
    taken = []
    original = BlockPath.learn

    def spy(self, run):
        taken.append(original(self, run))
        return taken[-1]

    monkeypatch.setattr(BlockPath, "learn", spy)
    whole = _crash_and_move(dense=True)
    assert True in taken  # the block path learned
    per_record = _crash_and_move(dense=False)
    assert _without_clock(whole) == _without_clock(per_record)
    assert len(whole.topics[MODEL_TOPIC]) > 10 and len(whole.topics["predictions"]) == 800
    assert whole.offsets == per_record.offsets


def _without_clock(cluster: Cluster) -> dict[str, list]:
    """The cluster's messages, each model record's ``published_at`` and ``mixed_at`` (the wall
    clock) left out."""

    def value(v: bytes | None) -> object:
        if v is None:
            return None
        record = json.loads(v)
        if isinstance(record, dict):
            record.pop("published_at", None)
            record.pop("mixed_at", None)
        return record

    return {t: [(k, value(v), h) for k, v, h in msgs] for t, msgs in cluster.topics.items()}


def test_each_increment_is_folded_in_once() -> None:
    cluster, data = Cluster(), _data(2, 100)
    a, ca = _worker(cluster, "a", mix_every=1000)  # will own partition 0: the leader
    b, cb = _worker(cluster, "b", mix_every=1000)
    b.run(PartitionSource(cluster, data, [1], cb))
    a.run(PartitionSource(cluster, data, [0], ca))
    assert ca.version == 0 and cb.version == 0  # no mix was due
    ca.assigned([(TOPIC, 0)])  # owns partition 0 again (its counts restored)
    ca.mix_interval = 0.0  # a mix is due now
    ca.save()  # folds b's increments and its own into mixture 1, in its transaction
    assert ca.version == 0  # its model moves onto it once read back: its next commit reads
    ca.save()  # reads mixture 1 back and moves onto it; nothing new: no second fold
    assert ca.version == 1 and ca.divergence > 0
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    assert view.mixture is not None and view.mixture.version == 1
    assert view.mixture.state["n_seen"] == 200
    assert view.increments == {"a": {}, "b": {}}  # every increment deleted once held
    assert cb.mix() is True and cb.version == 1  # b moves onto it
    assert Perceptron.from_state(view.mixture.state).weights == pytest.approx(b.learner.weights)


class _Stepper:
    """One worker driven a batch at a time (the engine's loop body), so a test can interleave
    several in one process and kill one between any two batches."""

    def __init__(self, cluster: Cluster, name: str, partitions: list[int], **kwargs) -> None:
        self.cluster = cluster
        self.engine, self.coordinator = _worker(cluster, name, **kwargs)
        self.coordinator.bind(_Group())
        self.positions: dict[int, int] = {}
        self.assign(partitions)

    def assign(self, partitions: list[int]) -> None:
        keys = [(TOPIC, p) for p in partitions]
        wanted = self.coordinator.assigned(keys)
        self.positions = {
            p: max(wanted.get((TOPIC, p), 0), self.cluster.offsets.get((TOPIC, p), 0))
            for p in partitions
        }

    def revoke(self) -> None:
        self.coordinator.revoked([(TOPIC, p) for p in self.positions])
        self.positions = {}

    def step(self, data: dict[int, list[bytes]], available: dict[int, int], rng) -> None:
        batch = []
        for p, start in self.positions.items():
            end = min(start + rng.randint(1, 60), available[p])
            batch += [Record(data[p][o], Position(TOPIC, o, p)) for o in range(start, end)]
            self.positions[p] = end
        if batch:
            with self.engine.lock:
                self.engine._process_unit(batch)
        self.coordinator.after_batch(self.engine.stats.records)

    def done(self, data: dict[int, list[bytes]]) -> bool:
        return all(o == len(data[p]) for p, o in self.positions.items())


class _Group:
    def group_metadata(self) -> str:
        return "group"


def _noisy(n: int, seed: int) -> list[tuple[dict, int]]:
    """5 features, a hidden hyperplane, 10 % of the labels flipped."""
    rng = random.Random(seed)
    w = [1.0, -2.0, 0.5, 1.5, -1.0]
    out = []
    for _ in range(n):
        x = [rng.gauss(0, 1) for _ in w]
        y = int(sum(a * b for a, b in zip(x, w)) > 0)
        out.append(({f"f{j}": v for j, v in enumerate(x)}, 1 - y if rng.random() < 0.1 else y))
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_interleaved_workers_with_kills_and_moves_learn_as_well_as_one_model(seed) -> None:
    """Three workers take turns a batch at a time in a random order while records arrive; two
    are killed (the open transaction lost) and restarted, their partitions held by the others
    in between. The pulled averaged model is within 1 point of one sequential averaged
    perceptron on held-out data (the mixture's running average was once bent by the other
    workers' bases: 5-10 points behind), and every count is exact."""
    rng = random.Random(seed)
    n, parts = 24_000, 6
    stream = _noisy(n, seed=11)
    data: dict[int, list[bytes]] = {p: [] for p in range(parts)}
    for i, (x, y) in enumerate(stream):
        data[i % parts].append(json.dumps({**x, "y": y}).encode())
    cluster = Cluster()
    names = ["w0", "w1", "w2"]
    home = {name: [2 * i, 2 * i + 1] for i, name in enumerate(names)}
    opts = {"mix_every": 800}
    workers = {name: _Stepper(cluster, name, home[name], **opts) for name in names}
    available = dict.fromkeys(range(parts), 0)
    kills = sorted(rng.sample(range(100, 600), 2))
    step = 0

    def arrive() -> None:
        for p in range(parts):
            available[p] = min(len(data[p]), available[p] + rng.randint(0, 12))

    while not all(available[p] == len(data[p]) for p in range(parts)) or not all(
        w.done(data) for w in workers.values()
    ):
        step += 1
        arrive()
        if kills and step >= kills[0]:
            kills.pop(0)
            victim = rng.choice(names)
            del workers[victim]  # kill -9: nothing more of it reaches the cluster
            others = [name for name in names if name != victim]
            for name in others:  # a rebalance: the others hold every partition a while
                workers[name].revoke()
            for i, name in enumerate(others):
                workers[name].assign(list(range(i, parts, 2)))
            for _ in range(rng.randint(20, 100)):
                arrive()
                workers[rng.choice(others)].step(data, available, rng)
            for name in others:  # eager rebalancing: every revocation before any assignment
                workers[name].revoke()
            for name in others:
                workers[name].assign(home[name])
            workers[victim] = _Stepper(cluster, victim, home[victim], **opts)
        workers[rng.choice(names)].step(data, available, rng)
    for w in workers.values():
        w.coordinator.finish()
    for w in workers.values():  # no record of theirs refused, the leader's own read back late
        w.coordinator.mix()
        assert not w.coordinator.view.rejected, w.coordinator.view.rejected
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    assert not view.rejected
    assert {p: s.n_seen for (_, p), s in view.partitions.items()} == {
        p: len(data[p]) for p in range(parts)
    }
    current = view.current()
    assert current is not None and current[0]["n_seen"] == n
    pulled = Perceptron.from_state(current[0])
    sequential = Perceptron(averaged=True)
    for x, y in stream:
        sequential.learn_one(x, y)
    held_out = [(x, y) for x, y in _noisy(4000, seed=99)]

    def accuracy(model: Perceptron) -> float:
        return sum(model.predict_one(x) == y for x, y in held_out) / len(held_out)

    assert accuracy(sequential) - accuracy(pulled) <= 0.01, (accuracy(pulled), accuracy(sequential))


def test_a_restart_keeps_what_no_mixture_holds_yet() -> None:
    """A worker commits increments no mixture holds yet and is killed: restarted, its model is
    the newest mixture plus those increments, exactly the model it had committed."""
    cluster, data = Cluster(), _data(2, 300)
    rng = random.Random(5)
    available = {0: 300, 1: 300}
    leader = _Stepper(cluster, "lead", [0], mix_every=100)
    worker = _Stepper(cluster, "w", [1], mix_every=100)
    for _ in range(4):
        leader.step(data, available, rng)
        worker.step(data, available, rng)
    leader.coordinator.save()  # a mixture holds some of w's increments
    for _ in range(3):
        worker.step(data, available, rng)
    worker.coordinator.save()  # more that no mixture holds
    committed_model = worker.engine.learner.get_state()
    assert worker.coordinator._pending  # increments no mixture holds
    for _ in range(2):
        worker.step(data, available, rng)  # learned, never committed: lost with the kill
    restarted = _Stepper(cluster, "w", [1], mix_every=100)
    again = restarted.engine.learner
    assert again.weights == pytest.approx(Perceptron.from_state(committed_model).weights)
    assert again.n_seen == committed_model["n_seen"]
    assert again.average_weights == pytest.approx(
        Perceptron.from_state(committed_model).average_weights
    )


def test_increments_are_decoded_only_when_read_and_a_bad_one_is_counted() -> None:
    from stream_perceptron.sharing import Increment, PartitionState

    good = Increment("w", 2, 0, {"n": 1, "classes": []}, {"learner": "Perceptron"})
    view = ModelView()
    learned = PartitionState(TOPIC, 0, 1, 1, 0, "w")  # the example the increment learned
    view.ingest([(learned.key.encode(), learned.encode())])
    view.ingest([(b"increment:w:1", b"not json"), (good.key.encode(), good.encode()),
                 (b"increment:w:3", good.encode())])  # fmt: skip
    assert view.bad_records == 0  # nothing decoded yet
    assert view.steps("w") == [good]  # 1 does not parse, 3 is not the increment its key names
    assert view.bad_records == 2 and set(view.increments["w"]) == {2}
    view.ingest([(good.key.encode(), None)])  # a tombstone: a mixture holds it
    assert view.steps("w") == []


class _FlakyTransactions(MemoryTransactions):
    """Commits fail (retriably, as when the broker is away) ``failures`` times; a retry sends
    the failed transaction's messages again, as the real one does."""

    def __init__(self, cluster: Cluster, failures: int, retriable: bool = True) -> None:
        super().__init__(cluster)
        self.failures, self.retriable, self.attempts = failures, retriable, 0

    def commit(self, offsets, group_metadata) -> None:
        from connectors.kafka.transactions import TransactionFailed

        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise TransactionFailed("the broker is away", retriable=self.retriable)
        super().commit(offsets, group_metadata)

    def retry(self, offsets, group_metadata) -> None:
        self.commit(offsets, group_metadata)


def _flaky_worker(cluster, failures, retriable=True):
    transactions = _FlakyTransactions(cluster, failures, retriable)
    return (*_worker_over(cluster, transactions, mix_every=60), transactions)


def _worker_over(cluster, transactions, **kwargs) -> tuple[Engine, SharedModelCoordinator]:
    """Worker "a" committing through ``transactions`` (a scripted kind)."""
    transactions = _out(transactions)
    coordinator = SharedModelCoordinator(
        MemoryLog(cluster), transactions, MODEL_TOPIC, "a", every=50, interval=None, **kwargs
    )
    outputs = Outputs(predictions=TransactionalSink(transactions, "predictions"))
    engine = Engine(Perceptron(averaged=True), make_parser("jsonl"), outputs,
                    coordinator=coordinator, dense=False)  # fmt: skip
    coordinator.start()
    return engine, coordinator


def test_a_commit_that_fails_while_the_broker_is_away_is_committed_again(monkeypatch) -> None:
    import stream_perceptron.sharing.coordinator as shared_model

    monkeypatch.setattr(shared_model.time, "sleep", lambda s: None)
    cluster, data = Cluster(), _data(2, 200)
    engine, coordinator, transactions = _flaky_worker(cluster, failures=3)
    engine.run(PartitionSource(cluster, data, [0, 1], coordinator))
    assert coordinator.outages == 1 and transactions.attempts > coordinator.commits
    assert _predicted(cluster) == sorted((p, o) for p in range(2) for o in range(200))
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == 400


def test_a_fenced_commit_is_not_retried() -> None:
    from connectors.kafka.transactions import TransactionFailed

    cluster, data = Cluster(), _data(1, 100)
    engine, coordinator, transactions = _flaky_worker(cluster, failures=9, retriable=False)
    with pytest.raises(TransactionFailed):
        engine.run(PartitionSource(cluster, data, [0], coordinator))
    # the failed commit only: no retry, and no commit on the way out, nothing committed
    assert transactions.attempts == 1 and coordinator.outages == 0
    assert "predictions" not in cluster.topics


class _AbortingTransactions(MemoryTransactions):
    """The ``fail_at``-th commit fails for good (fenced, or its outcome unknown) and, as on the
    broker, the transaction is aborted: none of its messages or offsets become visible."""

    def __init__(self, cluster: Cluster, fail_at: int) -> None:
        super().__init__(cluster)
        self.fail_at, self.attempts = fail_at, 0

    def commit(self, offsets, group_metadata) -> None:
        from connectors.kafka.transactions import TransactionFailed

        self.attempts += 1
        if self.attempts == self.fail_at:
            self.pending = []
            raise TransactionFailed("fenced: the transaction was aborted", retriable=False)
        super().commit(offsets, group_metadata)


def test_after_a_failed_transaction_nothing_more_is_committed_and_a_restart_is_exact() -> None:
    """A worker whose transaction failed for good stops committing: its last commit on the way
    out would carry the offsets of records whose increment and predictions went with the
    aborted transaction (issue 24's outage test lost 2,000 examples so). Restarted, it reads
    them again from its last commit that landed: every record learned and predicted once."""
    from connectors.kafka.transactions import TransactionFailed

    cluster, data = Cluster(), _data(2, 300)
    transactions = _AbortingTransactions(cluster, fail_at=3)
    engine, coordinator = _worker_over(cluster, transactions)
    with pytest.raises(TransactionFailed):
        engine.run(PartitionSource(cluster, data, [0, 1], coordinator))
    assert transactions.attempts == 3  # the failed one was the last
    committed_before = dict(cluster.offsets)
    assert committed_before and all(o < 300 for o in committed_before.values())
    engine, coordinator = _worker(cluster, "a")  # the orchestrator restarts it
    engine.run(PartitionSource(cluster, data, [0, 1], coordinator))
    assert _predicted(cluster) == sorted((p, o) for p in range(2) for o in range(300))
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == 600


def test_an_idle_leader_still_mixes_and_an_idle_worker_moves_onto_the_mixture() -> None:
    """The leader's partition has nothing new (the source is idle): the others' increments
    are still folded in, at the commit interval, and an idle worker takes the mixture."""
    cluster, data = Cluster(), _data(2, 300)
    rng = random.Random(3)
    leader = _Stepper(cluster, "lead", [0], mix_every=100)
    worker = _Stepper(cluster, "w", [1], mix_every=100)
    for coordinator in (leader.coordinator, worker.coordinator):
        coordinator.interval, coordinator.every = 0.0, None  # a commit is due at every poll
    leader.step(data, {0: 5, 1: 0}, rng)  # 5 records, then nothing new for the leader
    leader.step(data, {0: 5, 1: 0}, rng)
    assert leader.coordinator.version == 0  # mixture 0 written
    for _ in range(10):
        worker.step(data, {0: 5, 1: 300}, rng)  # only the worker's partition has records
    assert leader.engine.stats.records == 5 and leader.coordinator.version == 0
    leader.coordinator.idle()  # an empty poll of the leader's source: it mixes
    assert leader.coordinator.version == 0
    leader.coordinator.peek_s = 0.0
    leader.coordinator.idle()  # the next one reads mixture 1 back and moves onto it
    assert leader.coordinator.version == 1
    assert leader.engine.learner.n_seen == 305  # its 5 and the worker's 300, mixed
    assert worker.coordinator.version == 0
    worker.coordinator.idle()  # an empty poll of the worker's source: nothing new to commit
    assert worker.coordinator.version == 1 and worker.engine.learner.n_seen == 305


def test_with_several_input_topics_one_partition_elects_the_leader() -> None:
    cluster = Cluster()
    coordinator = SharedModelCoordinator(
        MemoryLog(cluster), MemoryTransactions(cluster), MODEL_TOPIC, "w", leader=("a", 0)
    )
    coordinator.owned = {("b", 0), ("a", 1)}
    assert not coordinator.is_leader  # b's partition 0 is not the leader's partition
    coordinator.owned.add(("a", 0))
    assert coordinator.is_leader


class _NeverAssigned(Source):
    """A worker stopped (SIGTERM) before the group gave it a partition: nothing is yielded and
    its consumer is already closed when the engine's final save asks for the membership."""

    def group_metadata(self) -> str:
        from connectors.errors import ConnectorError

        raise ConnectorError("the Kafka source of ['events'] has no open consumer")

    def batches(self) -> Iterator[list[Record]]:
        return iter(())

    def close(self) -> None:
        pass


def test_a_worker_stopped_before_its_first_assignment_ends_cleanly() -> None:
    """Its last commit carries no offsets, so it needs no group membership (a closed consumer
    has none): the run ends without an error, and nothing is committed for the group."""
    cluster = Cluster()
    engine, coordinator = _worker(cluster, "late")
    engine.run(_NeverAssigned())
    assert coordinator.commits >= 1 and cluster.offsets == {}


class _OneBigPoll(PartitionSource):
    """Every record of its partitions in one batch, as a fast client's poll hands them over."""

    def batches(self) -> Iterator[list[Record]]:
        keys = [(TOPIC, p) for p in self.partitions]
        self.coordinator.assigned(keys)
        yield [Record(self.data[p][o], Position(TOPIC, o, p))
               for p in self.partitions for o in range(len(self.data[p]))]  # fmt: skip
        self.coordinator.revoked(keys)


def test_a_large_poll_is_committed_in_slices_so_mixing_keeps_its_cadence() -> None:
    """600 records in one poll, a commit due every 50 and a mix every 60 examples: the engine
    hands the poll over in slices, so the worker commits and mixes on cadence (one commit
    and one mixture for the whole poll before)."""
    cluster, data = Cluster(), _data(2, 300)
    engine, coordinator = _worker(cluster, "a", mix_every=60)
    engine.run(_OneBigPoll(cluster, data, [0, 1], coordinator))
    assert coordinator.commits >= 600 // 50
    assert coordinator.version >= 600 // 60 // 2, coordinator.version
    assert _predicted(cluster) == sorted((p, o) for p in range(2) for o in range(300))


def test_slices_end_where_a_message_ends() -> None:
    from stream_perceptron.engine.loop import _slices

    # message offsets 0, 1, 1, 1, 2, 3, 3: the lines of a message share its position
    batch = [Record(b"{}", Position(TOPIC, o, 0)) for o in (0, 1, 1, 1, 2, 3, 3)]
    cuts = [[r.position.offset for r in part] for part in _slices(batch, 2)]
    assert cuts == [[0, 1, 1, 1], [2, 3, 3]]
    assert [len(p) for p in _slices(batch, 10)] == [7]
    assert sum(map(len, _slices(batch, 1))) == 7


def _sparse(partitions: int, per_partition: int, vocabulary: int) -> dict[int, list[bytes]]:
    """Records of 6 features each out of ``vocabulary`` names (one carries the label's
    signal), the kind of stream ``--hash-bits`` is for."""
    rng = random.Random(11)
    out = {}
    for p in range(partitions):
        rows = []
        for _ in range(per_partition):
            y = rng.random() < 0.5
            x = {f"tok{rng.randrange(vocabulary)}": 1.0 for _ in range(5)}
            x[f"signal{int(y)}{rng.randrange(3)}"] = 1.0
            rows.append(json.dumps({**x, "y": int(y)}).encode())
        out[p] = rows
    return out


@pytest.mark.parametrize("averaged", [False, True], ids=["plain", "averaged"])
def test_a_hashed_model_is_shared_with_increments_as_small_as_the_features_touched(
    averaged,
) -> None:
    """--hash-bits 20 in shared mode (a million buckets): the group mixes the hashed model,
    each increment holds only the buckets its mistakes touched (at most the features of the
    records it learned, not 2**20; averaged, its sums also name the buckets of its own
    increments no mixture holds yet), and pull-model gives the model back wrapped in the same
    hashing, so it predicts on the features' names."""
    from stream_perceptron import Preprocessed
    from stream_perceptron.sharing.pull import pull_model
    from stream_perceptron.sharing.records import Increment, decode

    cluster, data = Cluster(), _sparse(2, 400, vocabulary=1_000_000)
    rng = random.Random(2)
    workers = [
        _Stepper(cluster, name, [p], mix_every=100,
                 learner=Preprocessed(Perceptron(averaged=averaged), hash_bits=20))
        for name, p in (("lead", 0), ("w", 1))
    ]  # fmt: skip
    available = {0: 400, 1: 400}
    while not all(w.done(data) for w in workers):
        for w in workers:
            w.step(data, available, rng)
    for w in workers:
        w.coordinator.save()
    workers[0].coordinator.mix_interval = 0.0
    workers[0].coordinator.save()  # the last increments folded in
    increments = [
        r for r in (decode(v) for k, v, _ in cluster.topics[MODEL_TOPIC]
                    if v is not None and k.startswith(b"increment:"))
        if isinstance(r, Increment)
    ]  # fmt: skip
    assert len(increments) >= 10
    sizes = []
    for record in increments:
        (part,) = record.delta["classes"]
        sizes.append(len(part["weights"]))
        assert record.meta["hash_bits"] == 20
        assert len(part["acc"]) <= len(part["weights"])  # the accumulators move with them
        if averaged:  # its own increments pending: a few commits' worth
            assert len(part["sums"]) <= 3 * 6 * 50, len(part["sums"])
    # a commit every 50 records (or fewer): at most 6 features each, hashed (a window without
    # a mistake changed no weight)
    assert 0 < max(sizes) <= 6 * 50, sizes
    model, version, _, _ = pull_model(MemoryLog(cluster))
    assert version >= 2
    assert isinstance(model, Preprocessed) and model.hash_bits == 20
    assert model.n_seen == 800
    assert len(model.model.weights) < 6 * 800  # buckets, not a dense 2**20
    # it predicts on names, as the workers do: the signal features decide
    assert model.predict_one({"signal10": 1.0}) == 1
    assert model.predict_one({"signal00": 1.0}) == 0
    lead = workers[0].engine.learner
    assert isinstance(lead, Preprocessed) and lead.hash_bits == 20  # still hashing
    assert lead.model.weights == pytest.approx(model.model.weights)


def test_a_worker_hashing_otherwise_than_the_group_is_refused_even_when_adopting() -> None:
    from stream_perceptron import Preprocessed
    from stream_perceptron.sharing.states import SharedModelMismatch

    cluster, data = Cluster(), _sparse(1, 60, vocabulary=1000)
    lead = _Stepper(cluster, "lead", [0], mix_every=10,
                    learner=Preprocessed(Perceptron(), hash_bits=12))  # fmt: skip
    lead.step(data, {0: 60}, random.Random(0))
    lead.coordinator.save()
    for learner in (Preprocessed(Perceptron(), hash_bits=14), Perceptron()):
        with pytest.raises(SharedModelMismatch, match="hash_bits"):
            _worker(cluster, "other", learner=learner, adopt_settings=True)
    with pytest.raises(SharedModelMismatch, match="standardise"):
        _worker(Cluster(), "scaled", learner=Preprocessed(Perceptron(), scale="standard"))


def test_a_record_too_large_for_a_kafka_message_is_refused_with_what_to_do() -> None:
    """An increment or a mixture over the model topic's message size is refused before the
    broker would refuse it, saying what bounds it (the run ends; its open transaction is
    aborted, so nothing half-written is seen)."""
    from stream_perceptron.sharing.states import SharedModelTooLarge

    cluster, data = Cluster(), _sparse(1, 300, vocabulary=1_000_000)
    engine, coordinator = _worker(cluster, "a", mix_every=10**6)
    coordinator.max_record_bytes = 1024  # the first increment: 3 KB here
    with pytest.raises(SharedModelTooLarge, match="increment.*--checkpoint-every"):
        engine.run(PartitionSource(cluster, data, [0], coordinator))
    assert coordinator.commits == 0
    assert not [k for k, v, _ in cluster.topics.get(MODEL_TOPIC, [])
                if k.startswith(b"increment:")]  # fmt: skip
    with pytest.raises(SharedModelTooLarge, match="mixture.*--hash-bits"):
        coordinator._send("mixture", b"x" * 5000)


def test_the_leader_mixes_when_the_others_committed_enough_with_no_records_of_its_own() -> None:
    """The leader commits after its own records, so a leader whose partitions hold little of
    the stream would mix less often than --mix-every says: between its commits it looks at
    the model topic (at most every ``peek_s``) and commits, mixing, once the increments no
    mixture holds reach half of ``mix_every``, also when it is idle."""
    cluster, data = Cluster(), _data(2, 200)
    lead = _Stepper(cluster, "lead", [0], mix_every=100)
    other = _Stepper(cluster, "other", [1], mix_every=100)
    rng = random.Random(0)
    lead.step(data, {0: 1, 1: 0}, rng)  # the leader learns one record: mixture 0 is written
    lead.coordinator.save()
    while other.positions[1] < 60:
        other.step(data, {0: 1, 1: 60}, rng)
    other.coordinator.save()  # 60 examples no mixture holds: more than half of 100
    assert sum(i.examples for i in other.coordinator._pending) == 60
    version = lead.coordinator.version
    lead.coordinator.idle()  # looks are off (None): nothing happens
    assert lead.coordinator.version == version
    lead.coordinator.peek_s = 0.0
    lead.coordinator.idle()  # mixes
    lead.coordinator.idle()  # reads its mixture back and moves onto it
    assert lead.coordinator.version == version + 1
    other.coordinator.peek_s = 0.0
    commits = other.coordinator.commits
    other.coordinator.idle()  # only the leader looks
    assert other.coordinator.commits == commits


def test_the_leader_at_its_end_stays_while_the_others_commit(monkeypatch) -> None:
    """--exit-at-end: the leader, its partitions read to the end, stays (and mixes on) while
    another worker committed an increment within LINGER_S; a worker that does not mix never
    stays, and the leader ends once the others have been quiet for LINGER_S."""
    from stream_perceptron.sharing import cadence

    cluster, data = Cluster(), _data(2, 200)
    lead = _Stepper(cluster, "lead", [0], mix_every=100)
    other = _Stepper(cluster, "other", [1], mix_every=100)
    rng = random.Random(1)
    lead.step(data, {0: 1, 1: 0}, rng)
    lead.coordinator.save()
    assert not lead.coordinator.hold_at_end()  # nobody else has committed anything
    while other.positions[1] < 30:
        other.step(data, {0: 1, 1: 30}, rng)
    other.coordinator.save()
    lead.coordinator.peek_s = 0.0
    lead.coordinator.idle()  # reads the model topic: the other's increment is new
    assert lead.coordinator.hold_at_end()
    assert not other.coordinator.hold_at_end()  # only the mixer stays
    lead.coordinator.idle()  # nothing new: the time of the last one stands
    assert lead.coordinator.hold_at_end()
    other.revoke()  # the other leaves; its partition comes to the leader: nobody to wait for
    lead.assign([0, 1])
    assert not lead.coordinator.hold_at_end()
    lead.revoke()
    lead.assign([0])
    monkeypatch.setattr(cadence, "LINGER_S", 0.0)
    lead.coordinator.interval = None
    assert not lead.coordinator.hold_at_end()
    plain = _Stepper(cluster, "plain", [0])  # no --mix-every / --mix-interval: nothing to mix
    plain.coordinator.peek_s = 0.0
    plain.coordinator._others_at = time.monotonic()
    assert not plain.coordinator.hold_at_end()


def test_the_leaders_last_commit_mixes_what_is_fresh() -> None:
    """finish(): the leader's last commit mixes every increment it finds, also fewer examples
    than half of --mix-every, so the chain's head holds the whole run; another worker's last
    commit mixes nothing."""
    cluster, data = Cluster(), _data(2, 200)
    lead = _Stepper(cluster, "lead", [0], mix_every=1000)
    other = _Stepper(cluster, "other", [1], mix_every=1000)
    rng = random.Random(2)
    lead.step(data, {0: 1, 1: 0}, rng)
    lead.coordinator.save()  # mixture 0
    while other.positions[1] < 40:
        other.step(data, {0: 1, 1: 40}, rng)
    other.coordinator.finish()
    assert other.coordinator.version == 0  # not the mixer
    lead.coordinator.save()  # 41 examples fresh, under 500: no mix
    assert lead.coordinator.version == 0
    lead.coordinator.finish()
    assert lead.coordinator.version == 1
    assert lead.coordinator.view.mixture.state["n_seen"] == 41
    assert not lead.coordinator.view.fresh()


def _mixtures(cluster: Cluster) -> list[tuple[int, str]]:
    """``(version, worker)`` of the mixtures in the model topic, in log order."""
    return [
        (record["version"], record["worker"])
        for record in (json.loads(v) for k, v, _ in cluster.topics[MODEL_TOPIC]
                       if k == b"mixture" and v is not None)
    ]  # fmt: skip


@pytest.mark.parametrize("seed", [3, 4])
def test_two_leaders_writing_one_version_lose_no_example(seed) -> None:
    """Two workers that both mix (leaders around a rebalance), the second reading before the
    first one's mixture shows in the log: both write a mixture of one version. The first in
    the log is the chain's for every reader, the second's writer included; an increment is
    deleted only once a mixture read back as the head holds it, so the ones only the second
    mixture held are mixed next, and the model pulled at the end holds every example."""
    cluster, data = Cluster(), _data(2, 200)
    a = _Stepper(cluster, "a", [0], mix_every=40)
    b = _Stepper(cluster, "b", [1], mix_every=40, leader=(TOPIC, 1))
    rng, available = random.Random(seed), {0: 200, 1: 200}
    while a.positions[0] < 80:
        a.step(data, available, rng)
        b.step(data, available, rng)
    b.coordinator.log.hidden_from = len(cluster.topics[MODEL_TOPIC])  # b reads no further
    a.coordinator.mix_interval = b.coordinator.mix_interval = 0.0  # a mix due at each commit
    before = len(_mixtures(cluster))
    a.step(data, available, rng)
    a.coordinator.save()
    b.step(data, available, rng)
    b.coordinator.save()
    forked = _mixtures(cluster)[before:]
    assert [w for _, w in forked] == ["a", "b"] and forked[0][0] == forked[1][0], forked
    b.coordinator.log.hidden_from = None
    # commits with no mix due: the log's last mixture record (what compaction keeps) is b's
    # stale one, so the leaders write the head again; a compacted log holds every example
    a.coordinator.mix_interval = b.coordinator.mix_interval = None
    a.coordinator.mix_every = b.coordinator.mix_every = 10**9
    for worker in (a, b, a):
        worker.step(data, available, rng)
        worker.coordinator.save()
    assert _mixtures(cluster)[-1] == forked[0]  # a's, again
    last = {k: i for i, (k, _, _) in enumerate(cluster.topics[MODEL_TOPIC])}
    compacted = ModelView()
    compacted.ingest([cluster.topics[MODEL_TOPIC][i][:2] for i in sorted(last.values())])
    learned = a.positions[0] + b.positions[1]
    assert compacted.current()[0]["n_seen"] == compacted.examples() == learned
    a.coordinator.mix_every = b.coordinator.mix_every = 40
    while not (a.done(data) and b.done(data)):
        a.step(data, available, rng)
        b.step(data, available, rng)
    a.coordinator.finish()
    b.coordinator.finish()
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    current = view.current()
    assert current is not None and current[0]["n_seen"] == 400
    assert view.rejected["stale"] >= 1  # b's mixture of that version
    for worker in (a, b):  # both on the chain every reader takes
        worker.coordinator.mix()
        head = worker.coordinator.view.mixture
        assert (head.version, head.mixed_at) == (view.mixture.version, view.mixture.mixed_at)


def test_averaged_increments_after_moves_hold_only_the_keys_learned_since() -> None:
    """An averaged worker's increment lists the features its examples since the last one
    touched, also after it moved onto mixtures: the accumulators' open change is taken before
    the move's shift (shifting both sides and subtracting left rounding residues in every key
    the mixture moved: an increment of 2 examples listed 1,984 keys on the broker)."""
    from stream_perceptron import Preprocessed
    from stream_perceptron.sharing.records import Increment, decode

    rng = random.Random(5)
    w = [1.0, -2.0, 0.5, 1.5, -1.0]
    data: dict[int, list[bytes]] = {}
    for p in range(3):
        rows = []
        for _ in range(800):
            x = [rng.gauss(0, 1) for _ in w]
            y = int(sum(a * b for a, b in zip(w, x)) > 0) ^ (rng.random() < 0.05)
            tokens = {f"tok{rng.randrange(1_000_000)}": 1.0 for _ in range(5)}
            rows.append(json.dumps({**{f"f{j}": v for j, v in enumerate(x)}, **tokens,
                                    "y": y}).encode())  # fmt: skip
        data[p] = rows
    cluster = Cluster()
    workers = [
        _Stepper(cluster, name, [p], mix_every=300,
                 learner=Preprocessed(Perceptron(averaged=True), hash_bits=20))
        for p, name in enumerate(["lead", "b", "c"])
    ]  # fmt: skip
    while not all(w.done(data) for w in workers):
        for w in workers:
            w.step(data, {p: 800 for p in range(3)}, rng)
    for w in workers:
        w.coordinator.finish()
    increments = [
        r for r in (decode(v) for k, v, _ in cluster.topics[MODEL_TOPIC] if v is not None)
        if isinstance(r, Increment)
    ]
    assert sum(1 for i in increments if i.base_version > 2) >= 4  # made after moves
    worst = max(increments, key=lambda i: len(i.delta["classes"][0]["weights"]) / i.examples)
    (part,) = worst.delta["classes"]
    assert len(part["weights"]) <= 10 * worst.examples, (len(part["weights"]), worst.examples)


class _SlowTransactions(MemoryTransactions):
    """Commits that take 20 ms (the broker's round trips), noting how many records the
    engine had learned when each began and when it ended."""

    def __init__(self, cluster) -> None:
        super().__init__(cluster)
        self.records = lambda: 0
        self.spans: list[tuple[int, int]] = []

    def commit(self, offsets, group_metadata) -> None:
        begun = self.records()
        time.sleep(0.02)
        super().commit(offsets, group_metadata)
        self.spans.append((begun, self.records()))


def test_the_engine_learns_while_a_commit_is_in_flight() -> None:
    """Committing in the background, the engine learns the next records while a transaction
    commits (inline, never); either way every record is learned and predicted exactly once."""
    cluster, data = Cluster(), _data(2, 600)
    slow = _SlowTransactions(cluster)
    engine, coordinator = _worker_over(cluster, slow, mix_every=60)
    slow.records = lambda: coordinator._state.stats.records
    engine.run(PartitionSource(cluster, data, [0, 1], coordinator))
    meanwhile = sum(end - begun for begun, end in slow.spans)
    assert (meanwhile > 0) == BACKGROUND, slow.spans
    view = ModelView()
    view.ingest([(k, v) for k, v, _ in cluster.topics[MODEL_TOPIC]])
    assert {p: (s.next_offset, s.n_seen) for (_, p), s in view.partitions.items()} == {
        0: (600, 600), 1: (600, 600)
    }
    assert _predicted(cluster) == sorted((p, o) for p in range(2) for o in range(600))
    assert cluster.offsets == {(TOPIC, 0): 600, (TOPIC, 1): 600}
