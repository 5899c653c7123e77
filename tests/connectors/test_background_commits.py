"""connectors.kafka.background_commits: a transaction committing in a thread while the next
one fills, over scripted transactions that keep Kafka's rule (a transaction's messages and
offsets become visible together at commit, or never)."""

from __future__ import annotations

import threading

import pytest

from connectors.kafka.background_commits import BackgroundCommits
from connectors.kafka.transactions import TransactionFailed


class Scripted:
    """One producer's transactions: ``log`` holds the committed ones (messages, offsets);
    a commit waits for ``gate`` when set, and fails as ``failures`` says (popped in order)."""

    def __init__(self) -> None:
        self.open: list[bytes | None] = []
        self.log: list[tuple[list[bytes | None], dict]] = []
        self.gate: threading.Event | None = None
        self.failures: list[TransactionFailed] = []
        self.committing = threading.Event()
        self.calls: list[str] = []

    def start(self) -> None:
        self.calls.append("start")

    def send(self, topic, value, key=None, headers=None, partition=None) -> None:
        self.open.append(value)

    def commit(self, offsets, group_metadata) -> None:
        self.committing.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.failures:  # aborted: nothing of it visible; kept for retry
            raise self.failures.pop(0)
        self.log.append((self.open, offsets))
        self.open = []

    def retry(self, offsets, group_metadata) -> None:
        self.calls.append("retry")
        self.commit(offsets, group_metadata)

    def abort(self) -> None:
        self.open = []

    def close(self) -> None:
        self.calls.append("close")
        self.open = []


def test_what_is_sent_while_a_commit_is_in_flight_goes_into_the_next_transaction() -> None:
    inner = Scripted()
    out = BackgroundCommits(inner)
    out.send("t", b"a1")
    out.send("t", b"a2")
    inner.gate = threading.Event()
    out.commit_in_background({("t", 0): 2}, "g")
    assert inner.committing.wait(5)
    out.send("t", b"b1")  # the engine goes on while the commit waits for the broker
    out.send("t", b"b2")
    assert out.committing and inner.log == [] and inner.open == [b"a1", b"a2"]
    inner.gate.set()
    out.land()
    assert inner.log == [([b"a1", b"a2"], {("t", 0): 2})]
    assert inner.open == [b"b1", b"b2"] and not out.committing
    out.send("t", b"c1")  # nothing in flight: straight into the open transaction
    out.commit({("t", 0): 5}, "g")
    assert inner.log[1] == ([b"b1", b"b2", b"c1"], {("t", 0): 5})


def test_a_second_commit_waits_for_the_one_in_flight() -> None:
    inner = Scripted()
    out = BackgroundCommits(inner)
    out.send("t", b"a")
    inner.gate = threading.Event()
    out.commit_in_background({("t", 0): 1}, "g")
    out.send("t", b"b")
    threading.Timer(0.2, inner.gate.set).start()
    out.commit_in_background({("t", 0): 2}, "g")  # lands the first, then hands over
    out.land()
    assert inner.log == [([b"a"], {("t", 0): 1}), ([b"b"], {("t", 0): 2})]
    assert out.waited_s >= 0.1


def test_a_failed_commit_is_raised_at_landing_and_what_was_held_waits_for_its_retry() -> None:
    inner = Scripted()
    out = BackgroundCommits(inner)
    out.send("t", b"a")
    inner.failures = [TransactionFailed("broker away", retriable=True)]
    out.commit_in_background({("t", 0): 1}, "g")
    out.send("t", b"b")  # held: never into the failed transaction's resend
    with pytest.raises(TransactionFailed, match="broker away"):
        out.land()
    out.send("t", b"c")  # still held: the failed one is not committed yet
    assert inner.open == [b"a"]
    with pytest.raises(TransactionFailed):  # landing again says so again
        out.land()
    out.retry({("t", 0): 1}, "g")
    assert inner.log == [([b"a"], {("t", 0): 1})] and inner.open == [b"b", b"c"]
    out.commit({("t", 0): 3}, "g")
    assert inner.log[1] == ([b"b", b"c"], {("t", 0): 3})


def test_close_waits_for_the_commit_in_flight_and_drops_what_was_held() -> None:
    inner = Scripted()
    out = BackgroundCommits(inner)
    out.send("t", b"a")
    inner.gate = threading.Event()
    out.commit_in_background({("t", 0): 1}, "g")
    out.send("t", b"b")
    threading.Timer(0.1, inner.gate.set).start()
    out.close()
    assert inner.log == [([b"a"], {("t", 0): 1})]  # it landed (as a kill -9 may let it)
    assert inner.calls[-1] == "close" and inner.open == []  # b was never sent


def test_a_fenced_commit_in_flight_is_raised_and_nothing_held_is_sent() -> None:
    inner = Scripted()
    out = BackgroundCommits(inner)
    out.send("t", b"a")
    inner.failures = [TransactionFailed("fenced", retriable=False)]
    out.commit_in_background({("t", 0): 1}, "g")
    out.send("t", b"b")
    with pytest.raises(TransactionFailed, match="fenced"):
        out.commit({("t", 0): 2}, "g")  # the next commit says it, commits nothing
    out.close()
    assert inner.log == [] and inner.open == []
