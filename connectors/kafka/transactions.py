"""Kafka transactions for shared-model mode: one transactional producer per worker writes the
outputs, the model-topic records and the consumed offsets of a step, all or nothing
(Kafka Streams' ``exactly_once_v2``).

:class:`TransactionalOutput` is the client-neutral interface the engine uses;
:class:`TransactionsBase` holds what every client does alike; each client adapter
(:mod:`connectors.kafka.kafka_python`, :mod:`connectors.kafka.librdkafka`) adds its producer's
calls. :class:`~connectors.kafka.topic_sink.TransactionalSink` writes into the current
transaction.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from connectors.base import Closing
from connectors.errors import ConnectorError
from connectors.kafka.common import TopicPartitionKey, check_offsets
from connectors.kafka.transactional_output import (
    GroupMember,
    PartitionCounter,
    TransactionalOutput,
)

__all__ = [
    "CALL_TIMEOUT_S",
    "MAX_MESSAGE_BYTES",
    "TRANSACTION_TIMEOUT_MS",
    "GroupMember",
    "PartitionCounter",
    "TransactionFailed",
    "TransactionalOutput",
    "TransactionsBase",
]

logger = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 16 * 1024 * 1024  # a published model is one message
#: how long one transactional call may wait for the broker (kafka-python's own methods wait
#: without a limit: a commit caught by a broker restart could hang there for good)
CALL_TIMEOUT_S = 30.0
#: how long a starting producer asks again when the broker does not answer its initialisation
#: in time (a broker starting or loading its transaction log, a starved or stalled machine), as
#: a commit rides out a broker outage (the shared-model coordinator's ``outage_limit``)
START_PATIENCE_S = 240.0
TRANSACTION_TIMEOUT_MS = 10_000  # a dead worker's open transaction stops blocking readers soon


class TransactionFailed(ConnectorError):
    """A transaction could not be committed. ``retriable``: the broker could not be reached,
    rather than another producer or group member taking over; :meth:`TransactionsBase.retry`
    may then commit it later. ``in_doubt``: its commit was sent but not answered in time, so
    it may have landed (it is neither aborted nor sent again: the retry waits for that same
    commit); else it was aborted and nothing of it is visible."""

    def __init__(self, message: str, *, retriable: bool, in_doubt: bool = False) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.in_doubt = in_doubt


class TransactionsBase(Closing):
    """What every client's :class:`TransactionalOutput` does alike: one transaction open from
    the first send after a commit, commits and aborts under a lock (sends come from the engine
    and its rebalance helper), an abort that fails drops the producer.

    Parameters
    ----------
    bootstrap_servers
        ``"host:port"`` or a list of them.
    transactional_id
        Stable per worker: a restarted worker with the same id fences its former self and
        aborts the transaction it left open.
    client_options
        Further settings of the client's producer, in its own names. Defaults: a transaction
        timeout of 10 s (a dead worker's open transaction stops blocking readers soon), linger
        5 ms, messages up to 16 MiB (a published model is one).

    A client implements :meth:`_configure` (its settings), :meth:`_create` (the producer,
    ``init_transactions`` done), :meth:`_begin`, :meth:`_send`, :meth:`_commit`,
    :meth:`_abort` and :meth:`_close`; its errors (:meth:`_client_errors`) become
    ConnectorErrors.
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        transactional_id: str,
        *,
        client_options: dict[str, Any] | None = None,
    ) -> None:
        if not isinstance(transactional_id, str) or not transactional_id:
            raise ConnectorError(f"transactional_id must be a non-empty str: {transactional_id!r}")
        self.transactional_id = transactional_id
        self._config = self._configure(bootstrap_servers, client_options)
        self._producer: Any = None
        self._open_txn = False
        self._lock = threading.Lock()
        # the open transaction's messages, to send again if its commit fails
        self._sent: list[tuple[str, bytes | None, bytes | None, Any, int | None]] = []
        self._deliveries: list[Any] = []  # per message, the client's delivery handle (or None)
        #: a commit was sent and not answered in time: it may have landed
        self.in_doubt = False
        #: set (by a client's error callback) when every broker went away
        self.lost_brokers = False
        self._ending = False  # set by a client's _end once the commit request is out
        #: how long one transactional call may wait for the broker (init, offsets, commit)
        self.call_timeout_s = CALL_TIMEOUT_S
        self.start_retry_pause_s = 1.0  # between two initialisations (see start)

    def start(self, patience_s: float = START_PATIENCE_S) -> None:
        """Create the producer and fence a former self (its open transaction is aborted).

        An initialisation the broker did not answer within :attr:`call_timeout_s` is asked
        again, from a new producer, for up to ``patience_s`` seconds (a soak beside two CPU
        hogs saw a worker give up after 30 s, 28 of them in stalls its test's sleeper met); a
        refusal (fenced, not authorised, a bad option) is raised at once.

        Raises
        ------
        ConnectorError
            If the producer cannot be started.
        """
        deadline = time.monotonic() + patience_s
        while True:
            try:
                with self._lock:
                    self._ready()
                return
            except ConnectorError as exc:
                cause = exc.__cause__
                unanswered = (cause is not None and not self._fenced(cause)
                              and self._unanswered(cause))  # fmt: skip
                if not unanswered or time.monotonic() >= deadline:
                    raise
                logger.warning("the broker did not answer the transactional producer %r in time "
                               "(%r): asking again", self.transactional_id, cause)  # fmt: skip
            time.sleep(self.start_retry_pause_s)

    def _ready(self) -> Any:
        if self._producer is None:
            try:
                self._producer = self._create()
            except self._client_errors() + (ValueError, TypeError) as exc:
                raise ConnectorError(
                    f"cannot start the transactional producer {self.transactional_id!r}: {exc!r}"
                ) from exc
            logger.info("transactional producer %r ready", self.transactional_id)
        if not self._open_txn:
            self._begin(self._producer)
            self._open_txn = True
        return self._producer

    def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
    ) -> None:
        """Queue one message in the current transaction (``value`` ``None``: a tombstone, which
        deletes ``key`` from a compacted topic; ``partition`` ``None``: the client's
        partitioner chooses)."""
        with self._lock:
            producer = self._ready()
            message = (topic, None if value is None else bytes(value), key, headers, partition)
            self._sent.append(message)
            try:
                self._deliveries.append(self._send(producer, *message))
            except (ValueError, TypeError) as exc:
                raise ConnectorError(f"cannot send to Kafka topic {topic!r}: {exc!r}") from exc
            except self._client_errors() as exc:
                if self._fenced(exc) or self.in_doubt:
                    raise ConnectorError(f"cannot send to Kafka topic {topic!r}: {exc!r}") from exc
                self._send_again(exc)

    def _send_again(self, failure: BaseException) -> None:
        """The client dropped the open transaction (kafka-python, after bumping its epoch on
        an error the broker restart caused, refuses sends "in state READY"): nothing of it is
        committed, so a new producer takes all of its messages again."""
        logger.warning("transactional producer %r dropped the open transaction (%r): sending "
                       "its %d messages again from a new producer", self.transactional_id,
                       failure, len(self._sent))  # fmt: skip
        self._abort_quietly(keep=True)
        self._drop_producer()
        try:
            producer = self._ready()
            self._deliveries = [self._send(producer, *message) for message in self._sent]
        except self._client_errors() + (ConnectorError,) as exc:
            raise ConnectorError(f"cannot send to Kafka again: {exc!r}") from exc

    def commit(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None:
        """Add ``offsets`` (next offset per input partition) for the group of
        ``group_metadata`` to the transaction and commit it.

        Raises
        ------
        ConnectorError
            If the commit failed (the transaction is aborted: nothing of it is visible).
        """
        check_offsets(offsets, "commit")
        with self._lock:
            if self.lost_brokers and not self.in_doubt:
                # the client saw every broker go: what it cached of the coordinators may be
                # stale, so this transaction goes through a new producer (as after a failure)
                self.lost_brokers = False
                logger.info("transactional producer %r lost the brokers: committing through a "
                            "new producer", self.transactional_id)  # fmt: skip
                self._recommit(offsets, group_metadata)
                return
            self._commit_sent(self._ready(), offsets, group_metadata, "failed")

    def retry(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None:
        """Commit again the transaction whose :meth:`commit` failed, after a broker outage:

        * in doubt (its commit was sent, unanswered): wait for that same commit, on the same
          producer (Kafka's EndTxn is idempotent); never send its messages again, since they
          may have landed. If that producer cannot finish it, the outcome stays unknown: the
          failure is not retriable (the worker exits; its restart reads what was committed);
        * else (aborted: nothing of it is visible): every message again, in a new transaction
          of a new producer, with ``offsets``.

        Raises
        ------
        TransactionFailed
            As :meth:`commit` does.
        """
        with self._lock:
            if self.in_doubt:
                self._finish_in_doubt()
                return
            self._recommit(offsets, group_metadata)

    def _recommit(self, offsets: dict[TopicPartitionKey, int], group_metadata: Any) -> None:
        """Abort the open transaction, then send its messages again, in a new transaction of a
        new producer, and commit that."""
        self._abort_quietly(keep=True)
        self._drop_producer()
        try:
            producer = self._ready()
            self._deliveries = [self._send(producer, *message) for message in self._sent]
        except ConnectorError as exc:
            raise TransactionFailed(str(exc), retriable=True) from exc
        except self._client_errors() as exc:
            self._abort_quietly(keep=True)
            raise TransactionFailed(str(exc), retriable=not self._fenced(exc)) from exc
        self._commit_sent(producer, offsets, group_metadata, "failed again")

    def _finish_in_doubt(self) -> None:
        try:
            self._resume_commit(self._producer)
        except self._client_errors() as exc:
            if not self._fenced(exc) and self._unanswered(exc):
                raise TransactionFailed(
                    f"the commit of {self.transactional_id!r} is still unanswered: {exc!r}",
                    retriable=True, in_doubt=True,
                ) from exc  # fmt: skip
            self.in_doubt = False
            self._drop_producer()
            raise TransactionFailed(
                f"the commit of {self.transactional_id!r} was sent but could not be finished, "
                f"so whether it landed is unknown ({exc!r}): not sending it again",
                retriable=False,
            ) from exc
        self.in_doubt = False
        self._open_txn = False
        pending = sum(self._pending(d) for d in self._deliveries)
        if pending:  # neither delivered nor failed when its commit was done: evidence
            logger.warning("%d messages of the transaction of %r that was in doubt were still "
                           "undelivered when its commit was done", pending,
                           self.transactional_id)  # fmt: skip
        lost = [m for m, d in zip(self._sent, self._deliveries) if self._undelivered(d)]
        self._sent, self._deliveries = [], []
        logger.info("the commit of %r that was in doubt is done", self.transactional_id)
        if lost:
            # the client let the commit through without them (kafka-python: batches that
            # expired while the broker was away): they are not in the log, so they go into
            # the next transaction, once
            logger.warning("%d messages of the transaction of %r were not delivered: sending "
                           "them in the next one", len(lost), self.transactional_id)  # fmt: skip
            producer = self._ready()
            for message in lost:
                self._sent.append(message)
                self._deliveries.append(self._send(producer, *message))

    def _drop_producer(self) -> None:
        if self._producer is not None:
            self._close_quietly(1.0)
        self._open_txn = False

    def _close_quietly(self, timeout_s: float) -> None:
        """Close the producer (what it still queues is flushed up to ``timeout_s``); a client
        error is logged, never raised: the producer is dropped either way."""
        try:
            self._close(self._producer, timeout_s)
        except self._client_errors() as exc:
            logger.warning("closing the transactional producer %r: %r", self.transactional_id,
                           exc)  # fmt: skip
        self._producer = None

    def _commit_sent(
        self, producer: Any, offsets: dict[TopicPartitionKey, int], group_metadata: Any, what: str
    ) -> None:
        """Commit the open transaction. On failure: in doubt (the commit was sent and not
        answered in time) keep it as it is; else abort it, keep its messages; and raise."""
        self._ending = False
        try:
            self._send_offsets(producer, offsets, group_metadata)
            self._end(producer)
        except self._client_errors() as exc:
            fenced = self._fenced(exc)
            if not fenced and self._ending and self._commit_unanswered(exc):
                self.in_doubt = True
                raise TransactionFailed(
                    f"the commit of {self.transactional_id!r} {what}: {exc!r}; it may have "
                    "landed: waiting for it, never sending it again",
                    retriable=True, in_doubt=True,
                ) from exc  # fmt: skip
            self._abort_quietly(keep=True)
            raise TransactionFailed(
                f"transaction of {self.transactional_id!r} {what}: {exc!r}", retriable=not fenced
            ) from exc
        self._open_txn = False
        self._sent, self._deliveries = [], []

    def abort(self) -> None:
        """Drop the open transaction, if any."""
        with self._lock:
            self._abort_quietly()

    def _abort_quietly(self, keep: bool = False) -> None:
        if not keep:
            self._sent, self._deliveries = [], []
        if self._producer is not None and self._open_txn:
            try:
                self._abort(self._producer)
            except self._client_errors() as exc:
                logger.warning("aborting the transaction of %r failed: %r",
                               self.transactional_id, exc)  # fmt: skip
                self._close_quietly(5.0)
        self._open_txn = False

    def close(self) -> None:
        """Abort what is uncommitted and close the producer; harmless twice."""
        with self._lock:
            self._abort_quietly()
            if self._producer is not None:
                self._close_quietly(10.0)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(transactional_id={self.transactional_id!r})"

    # -- the client ----------------------------------------------------------------------------
    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The producer's settings: the client's defaults, ``client_options``, and the
        servers and ``self.transactional_id``."""
        raise NotImplementedError

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _fenced(self, exc: BaseException) -> bool:
        """Whether ``exc`` says another producer or group member took over (retrying cannot
        help), rather than that the broker could not be reached."""
        raise NotImplementedError

    def _create(self) -> Any:
        raise NotImplementedError

    def _begin(self, producer: Any) -> None:
        raise NotImplementedError

    def _send(
        self, producer: Any, topic: str, value: bytes | None, key: bytes | None,
        headers: list[tuple[str, bytes]] | None, partition: int | None = None,
    ) -> Any:  # fmt: skip
        """Queue one message (to ``partition``, or where the partitioner says); its delivery
        handle (``None`` when the client's commit itself fails on an undelivered message)."""
        raise NotImplementedError

    def _send_offsets(
        self, producer: Any, offsets: dict[TopicPartitionKey, int], group_metadata: Any
    ) -> None:
        """Add the consumed offsets to the open transaction (when any)."""
        raise NotImplementedError

    def _end(self, producer: Any) -> None:
        """Commit the open transaction; set ``_ending`` once the request is out."""
        raise NotImplementedError

    def _resume_commit(self, producer: Any) -> None:
        """Wait for the commit in doubt to finish, on the producer that sent it."""
        raise NotImplementedError

    def _unanswered(self, exc: BaseException) -> bool:
        """Whether ``exc`` says a call timed out (the broker may still act on it)."""
        raise NotImplementedError

    def _commit_unanswered(self, exc: BaseException) -> bool:
        """Whether ``exc``, raised once the commit request was out, leaves the commit in doubt:
        its call timed out (:meth:`_unanswered`), or the client gave up on its request
        unanswered in a way that leaves the producer unusable (kafka-python)."""
        return self._unanswered(exc)

    def _undelivered(self, delivery: Any) -> bool:
        """Whether a message whose ``_send`` returned ``delivery`` is known not delivered."""
        return False

    def _pending(self, delivery: Any) -> bool:
        """Whether a message whose ``_send`` returned ``delivery`` is neither delivered nor
        failed yet."""
        return False

    def _abort(self, producer: Any) -> None:
        raise NotImplementedError

    def _close(self, producer: Any, timeout_s: float) -> None:
        raise NotImplementedError
