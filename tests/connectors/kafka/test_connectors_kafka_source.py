"""KafkaSource against a real broker: records, positions, commits, resume, callbacks."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest
from connectors_kafka_testutil import (
    FAST_GROUP,
    Learner,
    collect,
    collect_batches,
    make_source,
    triples,
    wait_for,
)
from kafka_broker import free_port

from connectors import ConnectorError, KafkaSource, RdKafkaSource, Source
from connectors.kafka.common import split_message
from connectors.kafka.transactions import PartitionCounter

# kafka-python 3.0 loads its protocol schemas with a deprecated importlib.resources API.
pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")


def group_offsets(bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    """Offsets committed for ``group``, read with an admin client."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        offsets = admin.list_group_offsets({group: None})[group]
    finally:
        admin.close()
    return {(tp.topic, tp.partition): meta.offset for tp, meta in offsets.items()}


def source_for(
    client: str, bootstrap: str, topic: str, group: str, **kwargs: object
) -> KafkaSource | RdKafkaSource:
    kwargs.setdefault("exit_at_end", True)
    kwargs.setdefault("client_options", FAST_GROUP)
    return make_source(client, bootstrap, [topic], group, **kwargs)


def test_reads_every_message_once_in_offset_order(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic(3)
    values = [b"m%d" % i for i in range(60)]
    keys = [b"k%d" % (i % 7) for i in range(59)] + [None]
    sent = produce(topic, values, keys)
    source = source_for(kafka_client, kafka_bootstrap, topic, group_id, max_poll_records=7)
    assert isinstance(source, Source)
    with source:
        batches = collect_batches(source)
        lag, assignment = source.lag(), source.assignment
    assert all(len(batch) <= 7 for batch in batches)
    records = [r for batch in batches for r in batch]
    assert len(records) == 60
    got = {(r.position.partition, r.position.offset): (r.value, r.key) for r in records}
    assert got == {pos: (v, k) for pos, v, k in zip(sent, values, keys)}
    for partition in range(3):
        offsets = [r.position.offset for r in records if r.position.partition == partition]
        assert offsets == list(range(len(offsets)))
    assert {r.position.source for r in records} == {topic}
    assert {r.error for r in records} == {None}
    assert assignment == [(topic, 0), (topic, 1), (topic, 2)]
    assert lag == {(topic, 0): 0, (topic, 1): 0, (topic, 2): 0}
    assert source.rebalances == 1


def test_lag_counts_unread_messages(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"%d" % i for i in range(30)])
    with source_for(kafka_client, kafka_bootstrap, topic, group_id, max_poll_records=7) as source:
        batches = source.batches()
        first = next(batches)
        assert len(first) <= 7
        assert source.lag() == {(topic, 0): 30 - len(first)}
        rest = [r for batch in batches for r in batch]
        assert source.lag() == {(topic, 0): 0}
    assert len(first) + len(rest) == 30


def test_multi_line_messages_become_records_sharing_the_position(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    values = [b"a\nb\n", b"single", b"x\r\n\r\ny", b"", b"\n", b"end\r", b"c\n\n"]
    produce(topic, values, [b"key"] * len(values))
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        records = collect(source)
    assert [(r.position.offset, r.value) for r in records] == [
        (0, b"a"),
        (0, b"b"),
        (1, b"single"),
        (2, b"x"),
        (2, b""),
        (2, b"y"),
        (3, b""),
        (4, b""),
        (5, b"end"),
        (6, b"c"),
        (6, b""),
    ]
    assert {r.key for r in records} == {b"key"}
    assert records[0].position is records[1].position

    with source_for(
        kafka_client, kafka_bootstrap, topic, group_id + "-raw", split_lines=False
    ) as source:
        assert [r.value for r in collect(source)] == values


def test_split_message() -> None:
    assert split_message(b"a\nb") == [b"a", b"b"]
    assert split_message(b"a\r\nb\r\n") == [b"a", b"b"]
    assert split_message(b"\n\n") == [b"", b""]
    assert split_message(b"a\rb") == [b"a\rb"]


def test_empty_topic_ends_at_once(
    kafka_bootstrap: str, make_topic: Callable[..., str], group_id: str, kafka_client: str
) -> None:
    topic = make_topic(2)
    started = time.monotonic()
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        assert collect(source) == []
        assert source.assignment == [(topic, 0), (topic, 1)]
        assert source.lag() == {(topic, 0): 0, (topic, 1): 0}
    assert time.monotonic() - started < 20


def test_commit_then_a_new_source_resumes_after_the_committed_offsets(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic(2)
    produce(topic, [b"p0-%d" % i for i in range(10)], partition=0)
    produce(topic, [b"p1-%d" % i for i in range(4)], partition=1)
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        assert len(collect(source)) == 14
        assert source.committed_offsets() == {}
        assert source.commit({(topic, 0): 6, (topic, 1): 4})
        assert source.committed_offsets() == {(topic, 0): 6, (topic, 1): 4}
    assert group_offsets(kafka_bootstrap, group_id) == {(topic, 0): 6, (topic, 1): 4}

    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        records = collect(source)
    assert triples(records) == [(0, i, b"p0-%d" % i) for i in range(6, 10)]


def test_commits_never_go_back_and_skip_unassigned_partitions(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"%d" % i for i in range(10)])
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        assert source.commit({(topic, 0): 3})  # nothing assigned yet: nothing to do
        collect(source)
        assert source.commit({(topic, 0): 6})
        assert source.commit({(topic, 0): 4})
        assert source.commit({("elsewhere", 0): 2})
        assert group_offsets(kafka_bootstrap, group_id) == {(topic, 0): 6}
        assert source.committed_offsets() == {(topic, 0): 6}
        assert source.commit({(topic, 0): 8})
        assert source.committed_offsets() == {(topic, 0): 8}
        with pytest.raises(ConnectorError):
            source.commit({(topic, 0): -1})
    assert group_offsets(kafka_bootstrap, group_id) == {(topic, 0): 8}

    with source_for(
        kafka_client, kafka_bootstrap, topic, group_id
    ) as source:  # committed 8 is the floor
        collect(source)
        assert source.commit({(topic, 0): 7})
        assert source.committed_offsets() == {}
    assert group_offsets(kafka_bootstrap, group_id) == {(topic, 0): 8}


@pytest.mark.parametrize(("checkpoint", "first"), [(8, 8), (2, 5), (5, 5), (None, 5)])
def test_start_is_the_larger_of_checkpoint_and_committed_offset(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produce,
    group_id: str,
    kafka_client: str,
    checkpoint: int | None,
    first: int,
) -> None:
    topic = make_topic()
    produce(topic, [b"%d" % i for i in range(10)])
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        collect(source)
        assert source.commit({(topic, 0): 5})
    calls = []

    def on_assign(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        calls.append(partitions)
        return {} if checkpoint is None else {(topic, 0): checkpoint}

    with source_for(kafka_client, kafka_bootstrap, topic, group_id, on_assign=on_assign) as source:
        offsets = [r.position.offset for r in collect(source)]
    assert offsets == list(range(first, 10))
    assert calls == [[(topic, 0)]]


def test_checkpoint_applies_without_committed_offset(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"%d" % i for i in range(10)])
    with source_for(
        kafka_client, kafka_bootstrap, topic, group_id, on_assign=lambda ps: {(topic, 0): 3}
    ) as source:
        assert [r.position.offset for r in collect(source)] == list(range(3, 10))


def test_on_revoke_runs_at_close_and_can_commit(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic(2)
    produce(topic, [b"%d" % i for i in range(20)])
    learner = Learner()
    source = source_for(
        kafka_client,
        kafka_bootstrap,
        topic,
        group_id,
        on_assign=learner.on_assign,
        on_revoke=learner.on_revoke,
    )
    learner.source = source
    with source:
        for batch in collect_batches(source):
            learner.handle(batch)
        assert learner.revoked == []
    assert learner.assigned == [[(topic, 0), (topic, 1)]]
    assert learner.revoked == [[(topic, 0), (topic, 1)]]
    assert learner.commits == [True]
    if kafka_client == "kafka-python":  # librdkafka calls them in the thread that polls/closes
        assert "MainThread" not in learner.threads
    assert group_offsets(kafka_bootstrap, group_id) == learner.next_offsets
    assert sum(learner.next_offsets.values()) == 20


def test_callback_errors_propagate_unchanged(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"x"])

    def on_assign(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        raise ValueError("checkpoint unreadable")

    with source_for(kafka_client, kafka_bootstrap, topic, group_id, on_assign=on_assign) as source:
        with pytest.raises(ValueError, match="checkpoint unreadable"):
            collect(source)

    def bad_offsets(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        return {(topic, 0): -4}

    with source_for(
        kafka_client, kafka_bootstrap, topic, group_id, on_assign=bad_offsets
    ) as source:
        with pytest.raises(ConnectorError, match="on_assign"):
            collect(source)


def test_a_stop_during_an_assignment_is_not_an_error(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str
) -> None:
    """The source is closed (SIGTERM) while kafka-python's assignment callback runs, and the
    callback's broker calls fail because the client is closing (kafka-python: "NetworkSelector
    closed!", seen in CI). The assignment had nothing left to do: the iteration ends cleanly.
    An assignment that fails with the source open still raises
    (test_callback_errors_propagate_unchanged)."""
    topic = make_topic()
    produce(topic, [b"x"])

    def on_assign(partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        source.close()  # as the signal handler does: the iterating thread closes the consumer
        raise RuntimeError("NetworkSelector closed!")

    source = source_for("kafka-python", kafka_bootstrap, topic, group_id, on_assign=on_assign)
    assert collect(source) == []


def test_close_from_another_thread_stops_a_waiting_iteration(
    kafka_bootstrap: str, make_topic: Callable[..., str], group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    learner = Learner()
    source = source_for(
        kafka_client,
        kafka_bootstrap,
        topic,
        group_id,
        exit_at_end=False,
        on_assign=learner.on_assign,
        on_revoke=learner.on_revoke,
    )
    learner.source = source

    def close_when_assigned() -> None:
        deadline = time.monotonic() + 30
        while not source.rebalances and time.monotonic() < deadline:
            time.sleep(0.05)
        source.close()

    closer = threading.Thread(target=close_when_assigned)
    closer.start()
    started = time.monotonic()
    assert collect(source) == []
    closer.join()
    assert time.monotonic() - started < 30
    assert learner.revoked == [[(topic, 0)]]
    assert source.assignment == []
    with pytest.raises(ConnectorError, match="closed"):
        source.batches()


def test_exit_at_end_passes_transaction_markers(
    kafka_bootstrap: str, make_topic: Callable[..., str], group_id: str, kafka_client: str
) -> None:
    from kafka.producer import KafkaProducer

    topic = make_topic()
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, transactional_id=group_id)
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(5):
            producer.send(topic, b"t%d" % i)
        producer.commit_transaction()
    finally:
        producer.close()
    started = time.monotonic()
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        assert [r.value for r in collect(source)] == [b"t%d" % i for i in range(5)]
    assert time.monotonic() - started < 30


def test_unreachable_broker_raises_connector_error() -> None:
    source = KafkaSource(
        f"127.0.0.1:{free_port()}",
        ["t"],
        "g",
        client_options={"bootstrap_timeout_ms": 1000},
    )
    with source, pytest.raises(ConnectorError, match="cannot create a Kafka consumer"):
        next(source.batches())


@pytest.mark.parametrize(
    ("args", "kwargs", "match"),
    [
        (("h:1", "topic", "g"), {}, "topics"),
        (("h:1", [], "g"), {}, "topics"),
        (("h:1", ["t"], ""), {}, "group_id"),
        (("h:1", ["t"], "g"), {"max_poll_records": 0}, "max_poll_records"),
        (("h:1", ["t"], "g"), {"poll_timeout_ms": -1}, "poll_timeout_ms"),
        (("h:1", ["t"], "g"), {"client_options": {"group_id": "x"}}, "group_id"),
        (("h:1", ["t"], "g"), {"client_options": {"enable_auto_commit": True}}, "enable_auto"),
        (("h:1", ["t"], "g"), {"client_options": [("a", 1)]}, "dict"),
    ],
)
def test_invalid_arguments(args: tuple, kwargs: dict, match: str) -> None:
    with pytest.raises(ConnectorError, match=match):
        KafkaSource(*args, **kwargs)


def test_batches_only_once() -> None:
    source = KafkaSource(f"127.0.0.1:{free_port()}", ["t"], "g")
    source.batches()
    with pytest.raises(ConnectorError, match="once"):
        source.batches()
    source.close()
    source.close()


def test_a_tombstone_becomes_one_empty_record(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"a", None, b"b"], [b"k1", b"k2", b"k3"])
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        records = collect(source)
    assert [(r.position.offset, r.key, r.value) for r in records] == [
        (0, b"k1", b"a"),
        (1, b"k2", b""),
        (2, b"k3", b"b"),
    ]


def test_a_rebalance_longer_than_a_poll_still_assigns_the_partitions(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, kafka_client: str
) -> None:
    """Polls of 1 ms on fresh topics: the first join often comes before the consumer's
    metadata lists the topic (an empty assignment), and the rebalance that follows takes
    longer than a poll. kafka-python 3.0.12 then dropped that join (8 of 10 consumers never
    got their partition in a reproduction); the source keeps it going."""
    for _ in range(4):
        topic = make_topic()
        produce(topic, [b"x", b"y"])
        source = source_for(
            kafka_client, kafka_bootstrap, topic, f"group-{topic}", poll_timeout_ms=1,
            exit_at_end=False,  # (--exit-at-end's own waits for partitions hid the loss)
        )

        def close_when_read(source=source, topic=topic) -> None:
            wait_for(lambda: source.lag() == {(topic, 0): 0}, "the messages to be read", 30)
            source.close()

        threading.Thread(target=close_when_read, daemon=True).start()
        assert [r.value for r in collect(source, timeout=30)] == [b"x", b"y"]


def test_close_called_inside_on_revoke_returns(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"x"])
    revoked = []

    def on_revoke(partitions: list[tuple[str, int]]) -> None:
        revoked.append(partitions)
        source.close()  # e.g. an engine shutting down from its callback

    source = source_for(
        kafka_client, kafka_bootstrap, topic, group_id, exit_at_end=False, on_revoke=on_revoke
    )

    def close_when_read() -> None:
        wait_for(lambda: source.lag() == {(topic, 0): 0}, "the message to be read")
        source.close()  # from another thread while polling: the iterating thread closes

    threading.Thread(target=close_when_read, daemon=True).start()
    assert [r.value for r in collect(source, timeout=30)] == [b"x"]
    assert revoked == [[(topic, 0)]]
    assert source.assignment == []


def test_on_idle_is_called_after_an_empty_poll_that_follows_the_batches(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic()
    produce(topic, [b"%d" % i for i in range(20)])
    events: list[object] = []

    def on_idle() -> None:
        events.append("idle")
        if sum(e for e in events if isinstance(e, int)) == 20:
            source.close()  # drained: the timed work is done, stop

    source = source_for(
        kafka_client,
        kafka_bootstrap,
        topic,
        group_id,
        exit_at_end=False,
        max_poll_records=5,
        on_idle=on_idle,
    )
    with source:
        for batch in source.batches():
            events.append(len(batch))
    sizes = [e for e in events if isinstance(e, int)]
    assert sum(sizes) == 20 and all(0 < size <= 5 for size in sizes)
    # The topic drained, the next poll found nothing: an idle call came after the last batch.
    assert events[-1] == "idle"


def _collect_units(source: KafkaSource | RdKafkaSource, timeout: float = 60) -> list:
    units: list = []
    done = threading.Event()

    def run() -> None:
        try:
            units.extend(source.message_blocks())
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    if not done.wait(timeout):
        source.close()
        pytest.fail(f"message_blocks() of {source!r} did not end within {timeout:g} s")
    return units


def test_message_blocks_are_the_records_of_batches_as_columns(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    from connectors import MessageBlock, MessageBlockSource

    topic = make_topic(3)
    values = [b"m%d" % i for i in range(60)]
    values[7], values[31] = None, b""  # a tombstone, an empty value
    keys = [b"k%d" % i for i in range(59)] + [None]
    sent = produce(topic, values, keys)
    with source_for(kafka_client, kafka_bootstrap, topic, group_id, max_poll_records=9) as source:
        assert isinstance(source, MessageBlockSource)
        units = _collect_units(source)
        lag = source.lag()  # 0: the blocks moved each partition's position to its end
    assert units and all(isinstance(u, MessageBlock) and u.count > 0 for u in units)
    got = {}
    for block in units:
        assert block.topic == topic and block.count <= 9
        assert block.offsets == sorted(block.offsets) and block.end == block.offsets[-1] + 1
        assert len(block.values) == len(block.keys) == block.count
        for record in block.records():  # the records batches() would give
            assert (record.position.source, record.position.partition) == (topic, block.partition)
            assert record.error is None
            got[(record.position.partition, record.position.offset)] = (record.value, record.key)
    expected = {pos: (v if v is not None else b"", k) for pos, v, k in zip(sent, values, keys)}
    assert got == expected
    for partition in range(3):
        offsets = [o for b in units if b.partition == partition for o in b.offsets]
        assert offsets == list(range(len(offsets)))
    assert lag == {(topic, 0): 0, (topic, 1): 0, (topic, 2): 0}


@pytest.mark.parametrize(
    ("values", "as_block"),
    [
        ([b"a", b"b\nc", b"", b"d\n\ne"], True),  # lines split in bulk
        ([b"a", b"b\nc", b"x\r\ny", b"d\n"], False),  # a \r, a final newline: records
    ],
)
def test_message_blocks_split_multi_line_messages_as_batches_do(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produce,
    group_id: str,
    kafka_client: str,
    values: list[bytes],
    as_block: bool,
) -> None:
    from connectors import MessageBlock

    topic = make_topic()
    keys = [b"k%d" % i for i in range(len(values))]
    produce(topic, values, keys)
    with source_for(kafka_client, kafka_bootstrap, topic, group_id) as source:
        units = _collect_units(source)
    with source_for(kafka_client, kafka_bootstrap, topic, group_id + "-batches") as source:
        expected = collect(source)
    records = []
    for unit in units:
        records += unit.records() if isinstance(unit, MessageBlock) else unit
    assert records == expected
    assert [(r.position.offset, r.key) for r in records][:3] == [(0, b"k0"), (1, b"k1"), (1, b"k1")]
    assert all(isinstance(unit, MessageBlock) for unit in units) == as_block


def test_a_listener_is_told_the_partition_counts_at_the_assignment(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    """What a shared-model worker needs from its first commit: how many partitions the input
    has, not only its own (``SharedCadence._partitions``), from the metadata the client
    already holds (no listing of the cluster's topics)."""
    topic = make_topic(6)
    produce(topic, [b"x"], partition=4)
    told: list[tuple[dict[str, int], list]] = []
    source = source_for(kafka_client, kafka_bootstrap, topic, group_id, exit_at_end=False)
    assert isinstance(source, PartitionCounter)
    source.tell_partition_counts(lambda counts: told.append((counts, source.assignment)))
    with source:
        batch = next(iter(source.batches()))
    assert [r.value for r in batch] == [b"x"]
    # once, before the assignment is taken up (on_assign's checkpoint comes after it)
    assert told == [({topic: 6}, [])]
