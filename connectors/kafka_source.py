"""Kafka source: consume topics as a member of a consumer group.

:class:`KafkaSource` yields each poll's messages as one batch of
:class:`~connectors.record.Record`, lets the caller choose where newly assigned
partitions start (its checkpoint) and commits offsets only when asked.

kafka-python (3.x) is imported lazily, so importing :mod:`connectors` stays fast.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from connectors import kafka_client
from connectors.base import Closing, PartitionedSource
from connectors.errors import ConnectorError
from connectors.kafka_common import (
    TopicPartitionKey,
    check_offsets,
    fatal_errors,
    merge_client_options,
    split_message,
)
from connectors.kafka_progress import ProgressTracking
from connectors.kafka_rebalance import RETRY_PAUSE_S, RebalanceHandling
from connectors.record import Position, Record

if TYPE_CHECKING:
    from kafka.consumer import KafkaConsumer

__all__ = ["KafkaSource", "TopicPartitionKey", "split_message"]

logger = logging.getLogger(__name__)


# Set by the source itself; a client option may not override them.
_RESERVED_CONSUMER_OPTIONS = frozenset(
    {
        "bootstrap_servers",
        "group_id",
        "enable_auto_commit",
        "max_poll_records",
        "key_deserializer",
        "value_deserializer",
    }
)


class KafkaSource(RebalanceHandling, ProgressTracking, Closing, PartitionedSource):
    """Consume Kafka topics in a consumer group, in batches of records.

    Parameters
    ----------
    bootstrap_servers
        ``"host:port"`` or a list of them.
    topics
        Topics to subscribe to.
    group_id
        Consumer group; partitions are shared among the group's members.
    on_assign
        Called with newly assigned partitions; returns the offsets the caller
        wants to resume from (its checkpoint), for any of them. Each partition
        starts at the larger of that offset and the group's committed offset;
        with neither, ``auto_offset_reset`` (``"earliest"``) applies.
    on_revoke
        Called with partitions about to be given up (rebalance, or
        :meth:`close`), while they can still be committed: checkpoint and call
        :meth:`commit` in it. Only partitions reported by ``on_assign`` are
        passed. Also called when the group membership was lost (the commit
        then fails).
    on_idle
        Called, from the iterating thread between two batches, after a poll
        that returned no message: time for timed work such as a checkpoint
        of what the last batches did.
    exit_at_end
        Stop iterating once the group is stable, partitions are assigned and
        each is read up to the end offset it had when it was assigned. An
        empty assignment never ends the iteration: a member with nothing to
        read waits for partitions.
    poll_timeout_ms
        Longest wait for messages in one poll.
    max_poll_records
        Most messages per poll, hence per batch.
    split_lines
        Make one record per line of a message (see :func:`split_message`),
        all with the message's position; otherwise one record per message.
    client_options
        Further kafka-python ``KafkaConsumer`` settings (``security_protocol``,
        ``sasl_mechanism``, ``ssl_cafile``, ``session_timeout_ms``...). The
        source sets ``reconnect_backoff_max_ms=5000`` (a returning broker is
        found within seconds) unless given here.
    commit_timeout_ms
        Longest wait of :meth:`commit` for the broker.
    assignment_timeout_s
        With ``exit_at_end``, how long an empty assignment is waited out before
        it is an error (a group still rebalancing is waited for without end,
        with a warning this often); also the longest time spent retrying the
        broker calls that handle an assignment.

    Attributes
    ----------
    rebalances : int
        Number of times the assignment changed (the first one included); a
        rebalance that gives back the same partitions does not count.

    Notes
    -----
    *Threads.* ``on_assign``, ``on_revoke`` and the broker calls that go with
    an assignment run in a short-lived helper thread, while the thread that
    called ``next()`` on :meth:`batches` (or :meth:`close`) waits inside
    kafka-python, so they never run concurrently with that thread's code.
    kafka-python runs its own network thread (heartbeats), so a slow callback
    does not cost the group membership. An exception raised by a callback is
    re-raised unchanged by :meth:`batches` (or :meth:`close`).

    *Broker outages.* Iteration goes on: polls return nothing while the
    broker is away (losing and finding the group coordinator is logged) and
    kafka-python reconnects by itself; a poll that raises a retriable error
    is logged and retried after a short pause. Errors that retrying cannot
    fix (authorization, configuration) raise
    :class:`~connectors.errors.ConnectorError`. :meth:`commit` returns
    ``False`` while the broker is away. If the group membership expired
    meanwhile, the partitions are revoked (``on_revoke``; its commit fails)
    and assigned again (``on_assign``), resuming at the checkpoint.

    *Lag.* :meth:`lag` uses end offsets read at assignment, then the high
    watermarks of fetch responses (refreshed every few seconds); it makes no
    network call and is safe to call from another thread.

    Examples
    --------
    No connection is made before :meth:`batches` is iterated:

    >>> source = KafkaSource("127.0.0.1:9", ["events"], "learners")
    >>> source.assignment, source.lag(), source.committed_offsets(), source.rebalances
    ([], {}, {}, 0)
    >>> source.close()
    """

    def __init__(
        self,
        bootstrap_servers: str | list[str],
        topics: list[str],
        group_id: str,
        *,
        on_assign: Callable[[list[TopicPartitionKey]], dict[TopicPartitionKey, int]] | None = None,
        on_revoke: Callable[[list[TopicPartitionKey]], None] | None = None,
        on_idle: Callable[[], None] | None = None,
        exit_at_end: bool = False,
        poll_timeout_ms: int = 500,
        max_poll_records: int = 2000,
        split_lines: bool = True,
        client_options: dict[str, Any] | None = None,
        commit_timeout_ms: int = 5000,
        assignment_timeout_s: float = 60.0,
    ) -> None:
        if isinstance(topics, str) or not topics or not all(isinstance(t, str) for t in topics):
            raise ConnectorError(f"topics must be a non-empty list of str, got {topics!r}")
        if not isinstance(group_id, str) or not group_id:
            raise ConnectorError(f"group_id must be a non-empty str, got {group_id!r}")
        for label, value, low in (
            ("poll_timeout_ms", poll_timeout_ms, 0),
            ("max_poll_records", max_poll_records, 1),
            ("commit_timeout_ms", commit_timeout_ms, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConnectorError(f"{label} must be an int >= {low}, got {value!r}")
        self._config = merge_client_options(
            {"auto_offset_reset": "earliest", "reconnect_backoff_max_ms": 5000},
            client_options,
            _RESERVED_CONSUMER_OPTIONS,
        )
        self._config.update(
            bootstrap_servers=bootstrap_servers,
            group_id=group_id,
            enable_auto_commit=False,
            max_poll_records=max_poll_records,
        )
        self.topics = list(topics)
        self.group_id = group_id
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_idle = on_idle
        self._exit_at_end = exit_at_end
        self._poll_timeout_ms = poll_timeout_ms
        self._max_poll_records = max_poll_records
        self._split_lines = split_lines
        self._commit_timeout_ms = commit_timeout_ms
        self._assignment_timeout_s = float(assignment_timeout_s)
        self.rebalances = 0
        self._consumer: KafkaConsumer | None = None
        self._lock = threading.Lock()  # guards the state below (read by metrics threads)
        self._assigned: list[TopicPartitionKey] = []
        self._positions: dict[TopicPartitionKey, int] = {}
        self._ends: dict[TopicPartitionKey, int] = {}  # for lag(), refreshed
        self._stop_at: dict[TopicPartitionKey, int] = {}  # for exit_at_end, noted at assignment
        self._committed: dict[TopicPartitionKey, int] = {}  # by this source
        self._floor: dict[TopicPartitionKey, int] = {}  # never commit at or below
        self._callback_error: BaseException | None = None
        self._had_partitions = False
        self._joined = False  # an assignment (maybe empty) came from the group
        self._lost_since: float | None = None
        self._last_assignment: set[TopicPartitionKey] = set()
        self._ends_refreshed = 0.0
        self._poll_lock = threading.Lock()  # held by the iterating thread while it polls
        self._close_lock = threading.Lock()
        self._started = False
        self._closed = False

    # -- state for metrics ---------------------------------------------------------------------
    @property
    def assignment(self) -> list[TopicPartitionKey]:
        """Partitions currently assigned (and announced to ``on_assign``), sorted."""
        with self._lock:
            return list(self._assigned)

    # -- Source --------------------------------------------------------------------------------
    def batches(self) -> Iterator[list[Record]]:
        """Return an iterator over batches: the messages of one poll each.

        Returns
        -------
        Iterator of list of Record
            Non-empty batches, in the order kafka-python returns messages
            (offset order within a partition); a batch never ends inside a
            message. Empty polls yield nothing. Ends only when
            ``exit_at_end`` applies or after :meth:`close`.

        Raises
        ------
        ConnectorError
            If called twice or after :meth:`close`; while iterating, if the
            consumer cannot be created, an error cannot be cured by retrying,
            or (``exit_at_end``) no assignment arrives in time. Exceptions of
            ``on_assign`` / ``on_revoke`` propagate unchanged.
        """
        if self._closed:
            raise ConnectorError(f"Kafka source {self.topics!r} is closed")
        if self._started:
            raise ConnectorError(f"batches() of Kafka source {self.topics!r} can be iterated once")
        self._started = True
        return self._iterate()

    def commit(self, next_offsets: dict[TopicPartitionKey, int]) -> bool:
        """Commit offsets (the next offset to read, per partition) synchronously.

        Only partitions currently assigned are committed, and only offsets
        above the last one committed (or found committed at assignment):
        offsets never go back.

        Parameters
        ----------
        next_offsets
            ``{(topic, partition): next offset}``.

        Returns
        -------
        bool
            ``True`` if committed (or nothing needed committing); ``False`` if
            the broker refused or could not be reached (a warning is logged;
            the next commit catches up).

        Raises
        ------
        ConnectorError
            If an offset is not an int >= 0.
        """
        from kafka.errors import KafkaError
        from kafka.structs import OffsetAndMetadata, TopicPartition

        check_offsets(next_offsets, "commit")
        consumer = self._consumer
        with self._lock:
            assigned = set(self._assigned)
            todo = {
                tp: offset
                for tp, offset in next_offsets.items()
                if tp in assigned and offset > self._floor.get(tp, -1)
            }
        ignored = set(next_offsets) - assigned
        if ignored:
            logger.debug("not committing unassigned partitions %s", sorted(ignored))
        if not todo:
            return True
        if consumer is None:
            logger.warning("cannot commit %s: the consumer is closed", todo)
            return False
        offsets = {TopicPartition(*tp): OffsetAndMetadata(o, "", -1) for tp, o in todo.items()}
        try:
            consumer.commit(offsets, timeout_ms=self._commit_timeout_ms)
        except KafkaError as exc:
            logger.warning("committing %s for group %r failed: %r", todo, self.group_id, exc)
            return False
        with self._lock:
            for tp, offset in todo.items():
                self._committed[tp] = max(offset, self._committed.get(tp, -1))
                self._floor[tp] = max(offset, self._floor.get(tp, -1))
        logger.debug("committed %s for group %r", todo, self.group_id)
        return True

    def group_metadata(self) -> Any:
        """The consumer's group membership, for offsets committed in a transaction (the broker
        fences a member of an older generation, KIP-447).

        Raises
        ------
        ConnectorError
            If the consumer is not open.
        """
        consumer = self._consumer
        if consumer is None:
            raise ConnectorError(f"the Kafka source of {self.topics!r} has no open consumer")
        return consumer.group_metadata()

    def close(self) -> None:
        """Close the consumer without committing; calling it again is harmless.

        ``on_revoke`` is called first for the assigned partitions, so the
        caller can commit. Called from another thread (or a signal handler)
        during a poll, it only stops the iteration; the iterating thread then
        closes the consumer when the poll returns.

        Raises
        ------
        Exception
            Whatever ``on_revoke`` raised.
        """
        self._closed = True
        if self._poll_lock.acquire(blocking=False):
            try:
                self._close_consumer()
            finally:
                self._poll_lock.release()

    def __repr__(self) -> str:
        return f"KafkaSource(topics={self.topics!r}, group_id={self.group_id!r})"

    # -- the loop ------------------------------------------------------------------------------
    def _iterate(self) -> Iterator[list[Record]]:
        consumer = self._open()
        deadline = time.monotonic() + self._assignment_timeout_s
        while True:
            with self._poll_lock:
                if self._closed:
                    break
                polled = self._poll(consumer)
            if self._closed:
                break
            if polled:
                yield self._records(polled)
            elif self._on_idle is not None:
                self._on_idle()
            if self._exit_at_end:
                if self._at_end(consumer, refresh=not polled):
                    logger.info("end of %s reached for group %r", self.topics, self.group_id)
                    return
                if not self._had_partitions:
                    deadline = self._wait_for_partitions(deadline)
        self._close_consumer()

    def _wait_for_partitions(self, deadline: float) -> float:
        """With ``exit_at_end``, before any partition came: while the group is still joining or
        rebalancing (members that died leave it only after their session timeout), wait on and
        say so every ``assignment_timeout_s``; once the group has settled on giving this member
        nothing for that long, there is nothing to do: an error. Returns the next deadline."""
        now = time.monotonic()
        if now <= deadline:
            return deadline
        if self._joined:
            raise ConnectorError(
                f"the group {self.group_id!r} assigned no partitions of {self.topics!r} to this "
                f"member for {self._assignment_timeout_s:g} s (more members than partitions?)"
            )
        logger.warning(
            "still waiting for group %r to assign partitions of %s: a rebalance is in progress "
            "(members that died leave the group after their session timeout)",
            self.group_id,
            self.topics,
        )
        return now + self._assignment_timeout_s

    def _open(self) -> KafkaConsumer:
        from kafka.consumer import KafkaConsumer
        from kafka.errors import KafkaError

        try:
            consumer = KafkaConsumer(**self._config)
        except (KafkaError, ValueError, TypeError) as exc:
            raise ConnectorError(
                f"cannot create a Kafka consumer for {self._config['bootstrap_servers']!r}: {exc!r}"
            ) from exc
        try:
            kafka_client.require_internals(consumer)
        except ConnectorError:
            consumer.close(autocommit=False, timeout_ms=self._commit_timeout_ms)
            raise
        consumer.subscribe(topics=self.topics, listener=self._listener(consumer))
        self._consumer = consumer
        logger.info("subscribed to %s as group %r", self.topics, self.group_id)
        return consumer

    def _poll(self, consumer: KafkaConsumer) -> dict[Any, list[Any]]:
        from kafka.errors import KafkaError

        try:
            polled = consumer.poll(
                timeout_ms=self._poll_timeout_ms, max_records=self._max_poll_records
            )
        except KafkaError as exc:
            self._raise_callback_error()
            if isinstance(exc, fatal_errors()):
                raise ConnectorError(f"consuming {self.topics!r} failed: {exc!r}") from exc
            logger.warning("polling %s failed, retrying: %r", self.topics, exc)
            time.sleep(RETRY_PAUSE_S)
            return {}
        self._raise_callback_error()
        self._refresh_ends(consumer)
        self._watch_coordinator(consumer)
        return polled

    def _records(self, polled: dict[Any, list[Any]]) -> list[Record]:
        records: list[Record] = []
        append = records.append
        split = self._split_lines
        positions: dict[TopicPartitionKey, int] = {}
        for tp, messages in polled.items():
            topic, partition = tp.topic, tp.partition
            for message in messages:
                position = Position(topic, message.offset, partition)
                key = message.key
                value = b"" if message.value is None else message.value
                if split and (b"\n" in value or value.endswith(b"\r")):
                    for line in split_message(value):
                        append(Record(line, position, key))
                else:
                    append(Record(value, position, key))
            if messages:
                positions[(topic, partition)] = messages[-1].offset + 1
        with self._lock:
            for tp, offset in positions.items():
                if tp in self._positions:
                    self._positions[tp] = max(offset, self._positions[tp])
        return records

    def _close_consumer(self) -> None:
        from kafka.errors import KafkaError

        if not self._close_lock.acquire(blocking=False):
            return  # being closed (this may be on_revoke calling close())
        try:
            consumer = self._consumer
            if consumer is None:
                return
            try:
                consumer.close(autocommit=False, timeout_ms=self._commit_timeout_ms)
            except KafkaError as exc:
                logger.warning("closing the Kafka consumer of %s failed: %r", self.topics, exc)
            finally:
                self._consumer = None
                with self._lock:
                    self._assigned = []
                logger.info("closed the Kafka consumer of %s", self.topics)
        finally:
            self._close_lock.release()
        self._raise_callback_error()

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error
