"""Shared-model mode's connectors on a real broker, with each client: the model topic
(:class:`ModelLog`) and the transactional producer (:class:`TransactionalOutput`)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from connectors import ConnectorError
from connectors.kafka.kafka_python import KafkaModelLog
from connectors.kafka.kafka_python_producer import KafkaTransactions
from connectors.kafka.librdkafka_model_log import RdKafkaModelLog
from connectors.kafka.librdkafka_producer import RdKafkaTransactions
from connectors.kafka.model_log import ModelLog
from connectors.kafka.transactions import TransactionalOutput

LOGS = {"kafka-python": KafkaModelLog, "confluent-kafka": RdKafkaModelLog}
TRANSACTIONS = {"kafka-python": KafkaTransactions, "confluent-kafka": RdKafkaTransactions}


def _topic_config(bootstrap: str, topic: str) -> tuple[int, dict[str, str]]:
    """Partitions and settings of ``topic``, read with kafka-python's admin client."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_topics([topic])
        described_configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)]
        )
    finally:
        admin.close()
    configs = {k: c["value"] for k, c in described_configs["topic"][topic].items()}
    return len(described["partitions"]), configs


def test_model_log_and_transactions(kafka_bootstrap, kafka_client):
    topic = f"test-model-{uuid.uuid4().hex[:12]}"
    log = LOGS[kafka_client](kafka_bootstrap, topic)
    txn_id = f"test-txn-{uuid.uuid4().hex[:12]}"
    out = TRANSACTIONS[kafka_client](kafka_bootstrap, txn_id)
    fencer = TRANSACTIONS[kafka_client](kafka_bootstrap, txn_id)
    assert isinstance(log, ModelLog) and isinstance(out, TransactionalOutput)
    try:
        log.ensure()
        log.ensure()  # there already: nothing to do
        partitions, configs = _topic_config(kafka_bootstrap, topic)
        assert (partitions, configs["cleanup.policy"], configs["segment.ms"]) == (
            1, "compact", "600000"
        )  # fmt: skip
        out.start()
        out.send(topic, b"v1", b"k1")
        out.commit({}, None)
        assert log.read_new() == [(b"k1", b"v1")]
        # aborted: never seen; open: hides what follows until it ends (up to stable_wait_s)
        out.send(topic, b"v2", b"k2")
        out.abort()
        out.send(topic, b"v3", b"k3", [("h", b"x")])
        time.sleep(1.0)  # delivered, not committed
        log.stable_wait_s = 1.5
        started = time.monotonic()
        assert log.read_new() == []
        assert time.monotonic() - started >= 1.5  # it waited for the open transaction
        out.commit({}, None)
        assert log.read_new() == [(b"k3", b"v3")]
        # a producer of the same id fences the former one and aborts its open transaction
        out.send(topic, b"v4", b"k4")
        time.sleep(1.0)
        fencer.start()
        started = time.monotonic()
        assert log.read_new() == []
        assert time.monotonic() - started < 1.5  # aborted: nothing open to wait for
        with pytest.raises(ConnectorError):
            out.commit({}, None)
        fencer.send(topic, b"v5", b"k5")
        fencer.commit({}, None)
        assert log.read_new() == [(b"k5", b"v5")]
    finally:
        out.close()
        fencer.close()
        log.close()
    # a new reader reads the whole log from the start
    again = LOGS[kafka_client](kafka_bootstrap, topic)
    try:
        assert again.read_new() == [(b"k1", b"v1"), (b"k3", b"v3"), (b"k5", b"v5")]
    finally:
        again.close()


def test_read_fetched_takes_what_is_committed_in_order_never_the_aborted_or_the_open(
    kafka_bootstrap, kafka_client
):
    """The reads around a commit (``read_fetched``: with confluent-kafka what the reader's own
    fetches brought in, no request to the broker) return committed records only, in the log's
    order, each once, and the records a commit made come in without any other read."""
    topic = f"test-model-{uuid.uuid4().hex[:12]}"
    log = LOGS[kafka_client](kafka_bootstrap, topic)
    out = TRANSACTIONS[kafka_client](kafka_bootstrap, f"test-txn-{uuid.uuid4().hex[:12]}")

    def fetched_until(n: int) -> list:
        got: list = []
        deadline = time.monotonic() + 10
        while len(got) < n and time.monotonic() < deadline:
            got += log.read_fetched()
            time.sleep(0.02)
        return got

    try:
        log.ensure()
        out.start()
        out.send(topic, b"v1", b"k1")
        out.commit({}, None)
        assert log.read_new() == [(b"k1", b"v1")]  # the reader is open, at the end
        out.send(topic, b"v2", b"k2")
        out.abort()
        out.send(topic, b"v3", b"k3")
        out.send(topic, b"v4", b"k4")
        time.sleep(1.0)  # delivered, not committed
        assert log.read_fetched() == []  # aborted and open: nothing
        out.commit({}, None)
        assert fetched_until(2) == [(b"k3", b"v3"), (b"k4", b"v4")]
        out.send(topic, None, b"k3")  # a tombstone
        out.commit({}, None)
        assert fetched_until(1) == [(b"k3", None)]
        time.sleep(0.3)
        assert log.read_fetched() == [] and log.read_new() == []  # nothing twice
    finally:
        out.close()
        log.close()


def test_a_read_waits_for_the_transactions_open_when_it_began_not_for_a_quiet_log(
    kafka_bootstrap, kafka_client
):
    """Two producers whose transactions overlap (a group's commits, back to back): the log
    never has none open, yet a read returns once those open when it began have ended, with
    every record committed before it. (A read that waited for a moment with none open took
    its whole ``stable_wait_s`` here, then read without what was still open: a new owner of a
    partition could restore it without its last commit.)"""
    topic = f"test-model-{uuid.uuid4().hex[:12]}"
    log = LOGS[kafka_client](kafka_bootstrap, topic)
    log.ensure()
    producers = [TRANSACTIONS[kafka_client](kafka_bootstrap, f"test-txn-{uuid.uuid4().hex[:12]}")
                 for _ in range(2)]  # fmt: skip
    stop, committed, errors = threading.Event(), [], []

    def commit_back_to_back(i: int) -> None:
        out, n = producers[i], 0
        try:
            out.start()
            time.sleep(0.2 * i)  # staggered: one transaction is always open
            while not stop.is_set():
                out.send(topic, b"v", f"{i}-{n}".encode())
                time.sleep(0.4)
                out.commit({}, None)
                committed.append(f"{i}-{n}".encode())
                n += 1
        except Exception as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    threads = [threading.Thread(target=commit_back_to_back, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    try:
        deadline = time.monotonic() + 60
        while len(committed) < 8 and not errors and time.monotonic() < deadline:
            time.sleep(0.1)
        before = list(committed)
        log.stable_wait_s = 20.0
        started = time.monotonic()
        read = {k for k, _ in log.read_new()}
        took = time.monotonic() - started
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=30)
        for out in producers:
            out.close()
        log.close()
    assert not errors, errors
    assert len(before) >= 8 and set(before) <= read, (before, read)
    assert took < 10.0, took


def test_a_model_topic_that_could_lose_the_model_is_refused(kafka_bootstrap, kafka_client):
    """An existing topic of several partitions or with retention, or a missing one when
    creating is not asked (``pull-model``), is refused; a proper one is used as it is."""
    from kafka.admin import KafkaAdminClient, NewTopic

    from connectors.kafka.model_log import ModelTopicError

    name = f"test-model-{uuid.uuid4().hex[:8]}"
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([
            NewTopic(f"{name}-delete", 1, 1, topic_configs={"cleanup.policy": "delete"}),
            NewTopic(f"{name}-both", 1, 1, topic_configs={"cleanup.policy": "compact,delete"}),
            NewTopic(f"{name}-three", 3, 1, topic_configs={"cleanup.policy": "compact"}),
            NewTopic(f"{name}-good", 1, 1, topic_configs={"cleanup.policy": "compact"}),
        ])  # fmt: skip
    finally:
        admin.close()
    for suffix, words in (("delete", "cleanup.policy=delete"),
                          ("both", "cleanup.policy=compact,delete"),
                          ("three", "3 partitions")):  # fmt: skip
        log = LOGS[kafka_client](kafka_bootstrap, f"{name}-{suffix}")
        try:
            with pytest.raises(ModelTopicError, match=words):
                log.ensure()
        finally:
            log.close()
    missing = LOGS[kafka_client](kafka_bootstrap, f"{name}-missing")
    try:
        with pytest.raises(ModelTopicError, match="there is no model topic"):
            missing.ensure(create=False)
    finally:
        missing.close()
    lister = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        assert f"{name}-missing" not in lister.list_topics()  # not created by the check
    finally:
        lister.close()
    good = LOGS[kafka_client](kafka_bootstrap, f"{name}-good")
    try:
        good.ensure(create=False)
        good.ensure()
    finally:
        good.close()


def test_a_failed_read_reopens_the_reader_where_it_stopped(kafka_bootstrap, kafka_client):
    """A read that fails drops the reader; the next one opens a new reader at the offset
    after the last record read: nothing read twice, nothing skipped."""
    topic = f"test-model-{uuid.uuid4().hex[:12]}"
    log = LOGS[kafka_client](kafka_bootstrap, topic)
    out = TRANSACTIONS[kafka_client](kafka_bootstrap, f"test-txn-{uuid.uuid4().hex[:12]}")
    try:
        log.ensure()
        out.start()
        for i in range(3):
            out.send(topic, b"v%d" % i, b"k%d" % i)
        out.commit({}, None)
        assert [k for k, _ in log.read_new()] == [b"k0", b"k1", b"k2"]
        first = log._consumer
        broken = log._stable_end

        def fail() -> int:
            raise log._client_errors()[0]("the partition is unknown (as after a restart)")

        log._stable_end = fail  # type: ignore[method-assign]
        with pytest.raises(ConnectorError, match="unknown"):
            log.read_new()
        assert log._consumer is None  # dropped
        log._stable_end = broken  # type: ignore[method-assign]
        out.send(topic, b"v3", b"k3")
        out.commit({}, None)
        assert log.read_new() == [(b"k3", b"v3")]
        assert log._consumer is not None and log._consumer is not first
    finally:
        out.close()
        log.close()


def test_a_commit_in_doubt_is_finished_never_sent_twice(kafka_bootstrap, kafka_client):
    """A commit sent but not answered in time (here: a time limit far below the broker's
    answer) may have landed: the retry waits for that same commit on the same producer,
    and every message is committed exactly once."""
    from connectors.kafka.transactions import TransactionFailed

    topic = f"test-doubt-{uuid.uuid4().hex[:12]}"
    log = LOGS[kafka_client](kafka_bootstrap, topic)
    out = TRANSACTIONS[kafka_client](kafka_bootstrap, f"test-txn-{uuid.uuid4().hex[:12]}")
    try:
        log.ensure()
        out.start()
        out.send(topic, b"warm", b"w")
        out.commit({}, None)
        sent: list[tuple[bytes, bytes]] = []
        failed = None
        # The commit goes out, its answer comes later than the time limit: usually. A test
        # process descheduled between sending the commit and reading the answer (a busy
        # machine: once in a fresh clone's make test) sees it answered, and the commit landed
        # whole; then try again with the next 200 messages.
        for attempt in range(20):
            batch = [(b"k%d-%d" % (attempt, i), b"v%d" % i) for i in range(200)]
            for key, value in batch:
                out.send(topic, value, key)
            sent += batch
            out.call_timeout_s = 0.0005
            try:
                out.commit({}, None)
            except TransactionFailed as exc:
                failed = exc
                break
            out.call_timeout_s = 30.0
        assert failed is not None, "20 commits answered within 0.5 ms"
        assert failed.in_doubt and failed.retriable and out.in_doubt
        out.call_timeout_s = 30.0
        time.sleep(1.0)  # the commit lands meanwhile
        out.retry({}, None)
        assert not out.in_doubt
        out.send(topic, b"after", b"a")  # the producer goes on
        out.commit({}, None)
    finally:
        out.close()
        log.close()
    reader = LOGS[kafka_client](kafka_bootstrap, topic)
    try:
        assert reader.read_new() == [(b"w", b"warm"), *sent, (b"a", b"after")]
    finally:
        reader.close()


def test_workers_that_start_together_all_get_the_new_model_topic(kafka_bootstrap, kafka_client):
    """Workers started at once race to create the model topic: the losers wait for its
    metadata instead of failing on a topic that exists but does not show yet (a three-worker
    page test found them exiting 1 with ``KeyError``)."""
    import threading

    for _ in range(4):
        topic = f"test-model-{uuid.uuid4().hex[:12]}"
        errors: list[BaseException] = []
        start = threading.Barrier(4)

        def ensure(topic: str = topic, errors: list = errors, start=start) -> None:
            log = LOGS[kafka_client](kafka_bootstrap, topic)
            try:
                start.wait()
                log.ensure()
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)
            finally:
                log.close()

        threads = [threading.Thread(target=ensure) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == [], errors
        assert _topic_config(kafka_bootstrap, topic)[0] == 1
