"""Several KafkaSource instances in one consumer group."""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable

import pytest
from connectors_kafka_testutil import FAST_GROUP, Member, collect, make_source, wait_for

from connectors import ConnectorError

pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")


def test_two_sources_share_the_partitions_and_read_each_message_once(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic(4)
    for partition in range(4):
        produce(topic, [b"first-%d-%d" % (partition, i) for i in range(10)], partition=partition)
    a = Member(kafka_bootstrap, topic, group_id, "member-a", kafka_client)
    try:
        wait_for(lambda: len(a.source.assignment) == 4, "the first member's assignment")
        b = Member(kafka_bootstrap, topic, group_id, "member-b", kafka_client)
        try:
            wait_for(
                lambda: len(a.source.assignment) == len(b.source.assignment) == 2,
                "the partitions to be shared",
            )
            a_parts, b_parts = a.source.assignment, b.source.assignment
            for partition in range(4):
                produce(
                    topic,
                    [b"second-%d-%d" % (partition, i) for i in range(10)],
                    partition=partition,
                )
            wait_for(
                lambda: len(a.learner.records) + len(b.learner.records) >= 80, "all 80 records"
            )
            time.sleep(1)  # room for duplicates to show up
        finally:
            b.stop()
    finally:
        a.stop()

    assert set(a_parts).isdisjoint(b_parts)
    assert sorted(a_parts + b_parts) == [(topic, p) for p in range(4)]
    seen = Counter(
        (r.position.partition, r.position.offset) for r in a.learner.records + b.learner.records
    )
    assert seen == Counter({(p, o): 1 for p in range(4) for o in range(20)})
    b_second = [r for r in b.learner.records if r.value.startswith(b"second")]
    assert len(b_second) == 20
    assert {(topic, r.position.partition) for r in b_second} == set(b_parts)
    assert a.source.rebalances >= 2
    assert b.source.rebalances >= 1
    assert [(topic, p) for p in range(4)] in a.learner.revoked  # gave all up when b came
    assert all(a.learner.commits) and all(b.learner.commits)


def test_exit_at_end_fails_when_no_partition_comes(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    topic = make_topic(1)
    produce(topic, [b"x"])
    holder = Member(
        kafka_bootstrap, topic, group_id, "a-holder", kafka_client
    )  # sorts first: range keeps it
    try:
        wait_for(lambda: bool(holder.source.assignment), "the holder's assignment")
        idle = make_source(
            kafka_client,
            kafka_bootstrap,
            [topic],
            group_id,
            exit_at_end=True,
            assignment_timeout_s=4,
            client_options={**FAST_GROUP, "client_id": "b-idle"},
        )
        with idle, pytest.raises(ConnectorError, match="assigned no partitions .* for 4 s"):
            collect(idle)
        assert idle.assignment == []
    finally:
        holder.stop()
    assert [r.value for r in holder.learner.records] == [b"x"]


_HOLDER = """
import sys, time
from connectors import KafkaSource
source = KafkaSource(sys.argv[1], [sys.argv[2]], sys.argv[3],
                     client_options={"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000})
for batch in source.batches():
    print("holding", flush=True)
    time.sleep(3600)
"""


def test_exit_at_end_waits_out_a_rebalance_held_up_by_a_dead_member(
    kafka_bootstrap: str,
    make_topic: Callable[..., str],
    produce,
    group_id: str,
    caplog: pytest.LogCaptureFixture,
    kafka_client: str,
) -> None:
    """A member killed with -9 keeps its partitions until its session times out (6 s): a new
    member waits for the rebalance (with warnings every assignment_timeout_s, 1 s here)
    instead of giving up, then reads everything."""
    import signal
    import subprocess
    import sys

    caplog.set_level(logging.WARNING, logger="connectors.kafka")
    topic = make_topic(1)
    produce(topic, [b"%d" % i for i in range(20)])
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, kafka_bootstrap, topic, group_id],
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"holding\n"
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)
        source = make_source(
            kafka_client,
            kafka_bootstrap,
            [topic],
            group_id,
            exit_at_end=True,
            assignment_timeout_s=1,
            client_options=FAST_GROUP,
        )
        with source:
            records = collect(source, timeout=90)
    finally:
        holder.kill()
    assert [r.value for r in records] == [b"%d" % i for i in range(20)]
    waits = [r for r in caplog.records if "still waiting for group" in r.getMessage()]
    assert waits, "the wait for the rebalance was not reported"


def test_exit_at_end_stays_while_hold_at_end_says_so(
    kafka_bootstrap: str, make_topic: Callable[..., str], produce, group_id: str, kafka_client: str
) -> None:
    """A member read to its end stays while ``hold_at_end`` returns True: it keeps polling
    (records that come meanwhile are read too) and calls ``on_idle`` every ``HOLD_POLL_MS``,
    not every ``poll_timeout_ms``; once the predicate says no, the iteration ends."""
    topic = make_topic(1)
    produce(topic, [b"%d" % i for i in range(3)])
    idles: list[float] = []
    asked: list[float] = []

    def hold() -> bool:
        if not asked:  # first at the end: more records come while the member stays
            produce(topic, [b"3", b"4"])
        asked.append(time.monotonic())
        return sum(t > asked[0] for t in idles) < 25  # 25 polls while held

    source = make_source(
        kafka_client, kafka_bootstrap, [topic], group_id, exit_at_end=True,
        hold_at_end=hold, on_idle=lambda: idles.append(time.monotonic()),
        poll_timeout_ms=500, client_options=FAST_GROUP,
    )  # fmt: skip
    with source:
        records = collect(source, timeout=60)
    assert [r.value for r in records] == [b"0", b"1", b"2", b"3", b"4"]
    held = [t for t in idles if t > asked[0]]
    assert len(held) >= 25 and len(asked) >= 25
    # 25 polls of HOLD_POLL_MS (20 ms) while held; polls of 500 ms would take 12.5 s
    assert held[-1] - held[0] < 5.0, held[-1] - held[0]
