"""The client-neutral half of a Kafka group source: arguments, the iteration loop, closing, and
the books (what is assigned, read, committed, where each partition ends).

:class:`GroupSource` is shared by :class:`~connectors.kafka_source.KafkaSource` (kafka-python)
and :class:`~connectors.rdkafka_source.RdKafkaSource` (confluent-kafka); a client adds how to
open, poll, commit and close its consumer, and how it handles an assignment.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from operator import attrgetter
from typing import Any

from connectors.base import Closing
from connectors.errors import ConnectorError
from connectors.kafka_common import SourceState, TopicPartitionKey, check_offsets
from connectors.message_block import MessageBlock
from connectors.record import LINE_TOO_LONG, Record

__all__ = ["GroupSource", "PollUnit"]

#: What a poll hands on: a partition's run of one-record messages as a block, or records.
PollUnit = MessageBlock | list[Record]

_value_of = attrgetter("value")

logger = logging.getLogger("connectors.kafka_source")  # the sources' own log


class GroupSource(SourceState, Closing):
    """What a Kafka group source does whatever its client (a base class; see
    :class:`~connectors.kafka_source.KafkaSource` for the parameters).

    A client subclass implements ``_open()`` (create and subscribe the consumer),
    ``_poll(consumer)`` (one poll's units, ``[]`` for none: its records as one list, or with
    ``_as_blocks`` set its partitions' runs of one-record messages as
    :class:`~connectors.MessageBlock` s), ``_at_end(consumer, refresh=)``,
    ``_commit_offsets(todo)``, ``_group_metadata(consumer)`` and ``_close_client(consumer)``.
    """

    _consumer: Any
    _config: dict[str, Any]

    #: ``max_poll_records`` unless given: the most messages one poll returns.
    MAX_POLL_RECORDS = 2000

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
        hold_at_end: Callable[[], bool] | None = None,
        poll_timeout_ms: int = 500,
        max_poll_records: int | None = None,
        split_lines: bool = True,
        client_options: dict[str, Any] | None = None,
        commit_timeout_ms: int = 5000,
        assignment_timeout_s: float = 60.0,
        max_line_bytes: int | None = None,
    ) -> None:
        """Check the arguments and set the state every client shares; the client's settings
        come from ``_configure``. ``max_line_bytes``: a longer message (or line of one) comes
        as a record with ``error="line_too_long"`` holding its first bytes, as a line source
        gives one (``None``: no limit)."""
        max_poll_records = self.MAX_POLL_RECORDS if max_poll_records is None else max_poll_records
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
        self.topics = list(topics)
        self.group_id = group_id
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._on_idle = on_idle
        self._exit_at_end = exit_at_end
        self._hold_at_end = hold_at_end
        self._poll_timeout_ms = poll_timeout_ms
        self._max_poll_records = max_poll_records
        self._split_lines = split_lines
        self._max_line_bytes = max_line_bytes
        self._commit_timeout_ms = commit_timeout_ms
        self._assignment_timeout_s = float(assignment_timeout_s)
        self.rebalances = 0
        self._consumer = None
        self._lock = threading.Lock()  # guards the state below (read by metrics threads)
        self._assigned = []
        self._positions = {}
        self._ends = {}  # for lag(), refreshed
        self._stop_at = {}  # for exit_at_end, noted at assignment
        self._committed = {}  # by this source
        self._floor = {}  # never commit at or below
        self._callback_error = None
        self._had_partitions = False
        self._joined = False  # an assignment (maybe empty) came from the group
        self._lost_since = None
        self._last_assignment = set()
        self._ends_refreshed = 0.0
        self._poll_lock = threading.Lock()  # held by the iterating thread while it polls
        self._close_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._as_blocks = False  # message_blocks() is iterated, not batches()
        self._poll_count = max_poll_records  # messages asked of the next poll
        self._config = self._configure(bootstrap_servers, client_options)

    # -- state for metrics ---------------------------------------------------------------------
    @property
    def assignment(self) -> list[TopicPartitionKey]:
        """Partitions currently assigned (and announced to ``on_assign``), sorted."""
        with self._lock:
            return list(self._assigned)

    def lag(self) -> dict[TopicPartitionKey, int]:
        """Messages not yet read, per assigned partition (end offset - position).

        Returns
        -------
        dict
            ``{(topic, partition): lag}``; uses cached end offsets, no network call.
        """
        with self._lock:
            return {
                tp: max(0, self._ends[tp] - self._positions[tp])
                for tp in self._assigned
                if tp in self._ends and tp in self._positions
            }

    def committed_offsets(self) -> dict[TopicPartitionKey, int]:
        """Offsets last committed successfully by this source, per partition."""
        with self._lock:
            return dict(self._committed)

    # -- Source --------------------------------------------------------------------------------
    def batches(self) -> Iterator[list[Record]]:
        """Return an iterator over batches: the messages of one poll each.

        Returns
        -------
        Iterator of list of Record
            Non-empty batches, in the order the client returns messages
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
        self._start()
        return self._iterate()  # type: ignore[return-value]  # units are lists of records

    def message_blocks(self) -> Iterator[PollUnit]:
        """Iterate as :meth:`batches` does (instead of it), with each partition's run of
        one-record messages in a poll as one :class:`~connectors.MessageBlock`, made without a
        record per message; a poll holding a message of several lines comes as records.

        Raises
        ------
        ConnectorError
            As :meth:`batches`.
        """
        self._start()
        self._as_blocks = True
        return self._iterate()

    def _start(self) -> None:
        if self._closed:
            raise ConnectorError(f"Kafka source {self.topics!r} is closed")
        if self._started:
            raise ConnectorError(f"batches() of Kafka source {self.topics!r} can be iterated once")
        self._started = True

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
        check_offsets(next_offsets, "commit")
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
        if self._consumer is None:
            logger.warning("cannot commit %s: the consumer is closed", todo)
            return False
        if not self._commit_offsets(todo):
            return False
        with self._lock:
            for tp, offset in todo.items():
                self._committed[tp] = max(offset, self._committed.get(tp, -1))
                self._floor[tp] = max(offset, self._floor.get(tp, -1))
        logger.debug("committed %s for group %r", todo, self.group_id)
        return True

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
        return self._group_metadata(consumer)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(topics={self.topics!r}, group_id={self.group_id!r})"

    # -- what a client implements --------------------------------------------------------------
    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The client's settings: its defaults, ``client_options``, and what the source sets."""
        raise NotImplementedError

    def _open(self) -> Any:
        raise NotImplementedError

    def _poll(self, consumer: Any) -> list[PollUnit]:
        raise NotImplementedError

    def _at_end(self, consumer: Any, *, refresh: bool) -> bool:
        raise NotImplementedError

    def _commit_offsets(self, todo: dict[TopicPartitionKey, int]) -> bool:
        raise NotImplementedError

    def _group_metadata(self, consumer: Any) -> Any:
        """The client's snapshot of ``consumer``'s group membership."""
        raise NotImplementedError

    def _close_client(self, consumer: Any) -> None:
        """Close ``consumer`` (logging, not raising, what the client reports)."""
        raise NotImplementedError

    # -- closing -------------------------------------------------------------------------------
    def _close_consumer(self) -> None:
        if not self._close_lock.acquire(blocking=False):
            return  # being closed (this may be on_revoke calling close())
        try:
            consumer = self._consumer
            if consumer is None:
                return
            try:
                self._close_client(consumer)
            finally:
                self._consumer = None
                with self._lock:
                    self._assigned = []
                logger.info("closed the Kafka consumer of %s", self.topics)
        finally:
            self._close_lock.release()
        self._raise_callback_error()

    # -- the loop ------------------------------------------------------------------------------
    def _iterate(self) -> Iterator[PollUnit]:
        consumer = self._open()
        if self._exit_at_end:  # "to the end" of a topic that is not there: say so, at once
            existing = self._topic_names(consumer)
            missing = [t for t in self.topics if t not in existing]
            if missing:
                raise ConnectorError(
                    f"the topic {', '.join(map(repr, missing))} does not exist, so it has no end "
                    "to read to (--exit-at-end): check the name, or create the topic first"
                )
        deadline = time.monotonic() + self._assignment_timeout_s
        while True:
            with self._poll_lock:
                if self._closed:
                    break
                units = self._poll(consumer)
            if self._closed:
                break
            if units:
                yield from map(self._held_to_limit, units)
            elif self._on_idle is not None:
                self._on_idle()
            if self._exit_at_end:
                if self._at_end(consumer, refresh=not units):
                    if self._hold_at_end is not None and self._hold_at_end():
                        self._poll_timeout_ms = min(self._poll_timeout_ms, self.HOLD_POLL_MS)
                        continue
                    logger.info("end of %s reached for group %r", self.topics, self.group_id)
                    return
                if not self._had_partitions:
                    deadline = self._wait_for_partitions(deadline)
        self._close_consumer()

    #: How long a poll waits while ``hold_at_end`` keeps a member at its end (``on_idle`` is
    #: called this often).
    HOLD_POLL_MS = 20

    #: How long the brokers have to list their topics (``--exit-at-end`` checks the names).
    METADATA_TIMEOUT_S = 20.0

    def _topic_names(self, consumer: Any) -> set[str]:
        """The topics the cluster has (a :class:`ConnectorError` when it cannot say in
        ``METADATA_TIMEOUT_S``); without asking, so that none is created."""
        raise NotImplementedError

    def _held_to_limit(self, unit: PollUnit) -> PollUnit:
        """``unit`` with every value longer than ``max_line_bytes`` cut to it and marked
        ``line_too_long`` (a block holding one comes as records)."""
        limit = self._max_line_bytes
        if limit is None:
            return unit
        if isinstance(unit, MessageBlock):
            if max(map(len, unit.values), default=0) <= limit:
                return unit
            records = unit.records()
        else:
            if max(map(len, map(_value_of, unit)), default=0) <= limit:
                return unit
            records = unit
        too_long = [i for i, r in enumerate(records) if len(r.value) > limit]
        logger.debug("%d messages longer than %d bytes: line_too_long", len(too_long), limit)
        held = list(records)
        for i in too_long:
            r = held[i]
            held[i] = Record(r.value[:limit], r.position, r.key, error=LINE_TOO_LONG)
        return held

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

    # -- the books -----------------------------------------------------------------------------
    def _note_batch(self, messages: int, records: int) -> None:
        """Ask the next poll for about ``max_poll_records`` records, however many lines the
        messages have (a poll of many-line messages could hold a whole topic)."""
        if records:
            wanted = self._max_poll_records * messages // records
            self._poll_count = max(1, min(self._max_poll_records, wanted))

    def _note_read(self, positions: dict[TopicPartitionKey, int]) -> None:
        """Positions (next offsets) reached by a poll; they only move forward."""
        with self._lock:
            for tp, offset in positions.items():
                if tp in self._positions:
                    self._positions[tp] = max(offset, self._positions[tp])

    def _starts(
        self,
        keys: list[TopicPartitionKey],
        committed: dict[TopicPartitionKey, int | None],
    ) -> tuple[dict[TopicPartitionKey, int], dict[TopicPartitionKey, int]]:
        """Ask ``on_assign`` for the checkpoint of newly assigned ``keys``; return it and where
        each partition starts: the larger of checkpoint and committed offset (a partition with
        neither is left out: the client's offset reset applies)."""
        wanted = check_offsets(self._on_assign(list(keys)) if self._on_assign else {}, "on_assign")
        starts: dict[TopicPartitionKey, int] = {}
        for key in keys:
            known = [o for o in (wanted.get(key), committed.get(key)) if o is not None]
            if known:
                starts[key] = max(known)
        return wanted, starts

    def _note_assigned(
        self,
        keys: list[TopicPartitionKey],
        positions: dict[TopicPartitionKey, int],
        ends: dict[TopicPartitionKey, int],
        committed: dict[TopicPartitionKey, int | None],
        wanted: dict[TopicPartitionKey, int],
    ) -> None:
        """Record an assignment once the client has sought each partition to its start."""
        with self._lock:
            self._assigned = sorted(set(self._assigned) | set(keys))
            for key in keys:
                self._positions[key] = positions[key]
                self._ends[key] = self._stop_at[key] = ends[key]
                done = committed.get(key)
                if done is not None:
                    self._floor[key] = max(done, self._floor.get(key, -1))
            self._had_partitions = True
        self._count_change(keys)
        logger.info(
            "group %r assigned %s: starting at %s (checkpoint %s, committed %s), end %s",
            self.group_id,
            keys,
            [positions[key] for key in keys],
            [wanted.get(key) for key in keys],
            [committed.get(key) for key in keys],
            [ends[key] for key in keys],
        )

    def _count_change(self, added: list[TopicPartitionKey]) -> None:
        with self._lock:
            current = set(self._assigned) | set(added)
            if current != self._last_assignment:
                self._last_assignment = current
                self.rebalances += 1

    def _revoke(self, partitions: list[TopicPartitionKey]) -> None:
        """Give up ``partitions``: ``on_revoke`` for those announced to ``on_assign``, then
        forget them."""
        with self._lock:
            announced = set(self._assigned)
        keys = sorted(k for k in partitions if k in announced)
        if not keys:
            return
        logger.info("group %r gives up %s", self.group_id, keys)
        try:
            if self._on_revoke is not None:
                self._on_revoke(list(keys))
        finally:
            with self._lock:
                self._assigned = [k for k in self._assigned if k not in keys]
                for key in keys:
                    self._positions.pop(key, None)
                    self._ends.pop(key, None)
                    self._stop_at.pop(key, None)

    def _pending(self, current: list[TopicPartitionKey]) -> list[TopicPartitionKey] | None:
        """Of the client's ``current`` assignment (sorted), the partitions not yet read up to
        the end they had when assigned; ``None`` while nothing is assigned or an assignment is
        being handled."""
        with self._lock:
            if not current or current != self._assigned:
                return None
            return [tp for tp in current if self._positions[tp] < self._stop_at[tp]]

    def _note_ends(self, highwaters: dict[TopicPartitionKey, int | None]) -> None:
        """End offsets seen by the client since the last refresh (for :meth:`lag`)."""
        with self._lock:
            for tp in self._assigned:
                end = highwaters.get(tp)
                if end is not None:
                    self._ends[tp] = end

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error
