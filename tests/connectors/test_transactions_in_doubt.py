"""TransactionsBase's commit in doubt, with a scripted client (the real-broker test is in
tests/connectors/kafka/test_connectors_kafka_shared.py): waited for, never re-sent; a
message the client let the commit through without is sent once, in the next transaction."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.kafka.transactions import TransactionFailed, TransactionsBase


class Timeout(Exception):
    pass


class Scripted(TransactionsBase):
    """Commits time out ``timeouts`` times; deliveries listed in ``lost`` fail."""

    def __init__(self, timeouts: int, lost: set[bytes], refusals: int = 0) -> None:
        super().__init__("h:9", "t")
        self.timeouts, self.lost, self.refusals = timeouts, lost, refusals
        self.pending: set[bytes] = set()  # deliveries neither done nor failed
        self.log: list[tuple] = []
        self.committed: list[list[bytes]] = []
        self.open: list[bytes] = []

    def _configure(self, bootstrap_servers, client_options) -> dict[str, Any]:
        return {}

    def _client_errors(self):
        return (Timeout,)

    def _fenced(self, exc) -> bool:
        return False

    def _unanswered(self, exc) -> bool:
        return isinstance(exc, Timeout)

    def _create(self) -> object:
        self.log.append(("create",))
        return object()

    def _begin(self, producer) -> None:
        self.open = []

    def _send(self, producer, topic, value, key, headers, partition=None) -> Any:
        if self.refusals:  # the client dropped the transaction: "cannot send in state READY"
            self.refusals -= 1
            self.open = []
            raise Timeout("Cannot call send in state READY")
        self.log.append(("send", value))
        if value in self.lost:
            return ("lost", value)
        if value in self.pending:
            self.open.append(value)
            return ("pending", value)
        self.open.append(value)
        return ("delivered", value)

    def _undelivered(self, delivery) -> bool:
        return delivery[0] == "lost"

    def _pending(self, delivery) -> bool:
        return delivery[0] == "pending"

    def _send_offsets(self, producer, offsets, group_metadata) -> None:
        pass

    def _end(self, producer) -> None:
        self._ending = True
        self._resume_commit(producer)

    def _resume_commit(self, producer) -> None:
        if self.timeouts:
            self.timeouts -= 1
            raise Timeout("no answer yet")
        self.committed.append(self.open)
        self.lost = set()  # what goes out again is delivered

    def _abort(self, producer) -> None:
        self.log.append(("abort",))

    def _close(self, producer, timeout_s) -> None:
        pass


def test_a_commit_in_doubt_is_waited_for_and_never_sent_again() -> None:
    out = Scripted(timeouts=2, lost=set())
    for v in (b"a", b"b"):
        out.send("t", v)
    with pytest.raises(TransactionFailed) as failed:
        out.commit({}, None)
    assert failed.value.in_doubt and failed.value.retriable
    with pytest.raises(TransactionFailed):
        out.retry({}, None)  # still unanswered
    out.retry({}, None)
    assert out.committed == [[b"a", b"b"]]
    assert [e for e in out.log if e[0] != "send"] == [("create",)]  # no abort, no new producer
    assert [e[1] for e in out.log if e[0] == "send"] == [b"a", b"b"]  # each sent once


def test_messages_the_commit_went_through_without_go_into_the_next_transaction() -> None:
    out = Scripted(timeouts=1, lost={b"b"})
    for v in (b"a", b"b", b"c"):
        out.send("t", v)
    with pytest.raises(TransactionFailed):
        out.commit({}, None)
    out.retry({}, None)
    assert out.committed == [[b"a", b"c"]]
    out.commit({}, None)
    assert out.committed == [[b"a", b"c"], [b"b"]]  # once, in the next one


def test_a_transaction_the_client_dropped_is_sent_again_from_a_new_producer() -> None:
    out = Scripted(timeouts=0, lost=set())
    out.send("t", b"a")
    out.refusals = 1  # kafka-python after an epoch bump: the open transaction is gone
    out.send("t", b"b")
    out.commit({}, None)
    assert out.committed == [[b"a", b"b"]]
    assert [e[0] for e in out.log].count("create") == 2


def test_messages_still_pending_when_a_commit_in_doubt_is_done_are_reported(caplog) -> None:
    out = Scripted(timeouts=1, lost=set())
    out.pending = {b"b"}
    for v in (b"a", b"b"):
        out.send("t", v)
    with pytest.raises(TransactionFailed):
        out.commit({}, None)
    with caplog.at_level("WARNING", logger="connectors.kafka.transactions"):
        out.retry({}, None)
    assert "1 messages of the transaction of 't' that was in doubt were still undelivered" in (
        caplog.text
    )


class SlowStart(Scripted):
    """Its first ``unanswered`` initialisations time out; ``refused`` ones are refusals."""

    def __init__(self, unanswered: int, refused: int = 0) -> None:
        super().__init__(timeouts=0, lost=set())
        self.unanswered, self.refused = unanswered, refused
        self.start_retry_pause_s = 0.0

    def _create(self) -> object:
        self.log.append(("create",))
        if self.refused:
            self.refused -= 1
            raise ValueError("not authorised")
        if self.unanswered:
            self.unanswered -= 1
            raise Timeout("init_transactions: timed out")
        return object()


def test_a_start_the_broker_does_not_answer_in_time_is_asked_again(caplog) -> None:
    out = SlowStart(unanswered=3)
    with caplog.at_level("WARNING", logger="connectors.kafka.transactions"):
        out.start()
    assert out.log.count(("create",)) == 4  # three unanswered, then ready
    assert caplog.text.count("did not answer the transactional producer 't' in time") == 3
    out.send("t", b"a")
    out.commit({}, None)
    assert out.committed == [[b"a"]]


def test_a_start_gives_up_after_its_patience_and_at_once_on_a_refusal() -> None:
    from connectors.errors import ConnectorError

    out = SlowStart(unanswered=100)
    with pytest.raises(ConnectorError, match="cannot start the transactional producer"):
        out.start(patience_s=0.0)
    assert out.log.count(("create",)) == 1
    refused = SlowStart(unanswered=0, refused=1)
    with pytest.raises(ConnectorError, match="not authorised"):
        refused.start()
    assert refused.log.count(("create",)) == 1


def test_a_librdkafka_producer_whose_flush_fails_inside_the_client_is_dropped(caplog) -> None:
    """confluent-kafka's flush of a fenced producer once raised ``SystemError`` from its C
    code (the soak of session 35): closing the producer logs it and drops the producer, and
    the worker goes on to its own error line instead of a traceback."""
    pytest.importorskip("confluent_kafka")
    from connectors.kafka.librdkafka_producer import RdKafkaTransactions

    class FailingFlush:
        def flush(self, timeout: float) -> int:
            raise SystemError(
                "<built-in function isinstance> returned a result with an exception set"
            )

    out = RdKafkaTransactions("127.0.0.1:9", "t")
    out._producer = FailingFlush()
    with caplog.at_level("WARNING", logger="connectors.kafka.librdkafka_producer"):
        out._close_quietly(1.0)
    assert out._producer is None
    assert "the client failed: SystemError" in caplog.text
