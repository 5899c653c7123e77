"""A Kafka group source whatever its client: arguments, the iteration loop, what a poll hands
on, committing and closing (its books are :class:`~connectors.kafka.books.GroupBooks`).

A client adapter (:mod:`connectors.kafka.kafka_python`, :mod:`connectors.kafka.librdkafka`)
subclasses :class:`GroupSource` with its broker calls: the hooks listed there.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from connectors.base import Closing, PartitionedSource
from connectors.errors import ConnectorError
from connectors.kafka.books import RETRY_PAUSE_S, GroupBooks
from connectors.kafka.common import TopicPartitionKey, check_offsets
from connectors.kafka.poll_units import PollUnit, held_to_limit, units_of
from connectors.message_block import MessageBlock
from connectors.record import Record

__all__ = ["GroupSource", "PollUnit"]

logger = logging.getLogger(__name__)


class GroupSource(GroupBooks, Closing, PartitionedSource):
    """Consume Kafka topics as a member of a consumer group, in batches of records (a base
    class: a client adapter adds its broker calls).

    Parameters
    ----------
    bootstrap_servers
        ``"host:port"`` or a list of them.
    topics
        Topics to subscribe to.
    group_id
        Consumer group; partitions are shared among the group's members.
    on_assign
        Called with newly assigned partitions; returns the offsets the caller wants to resume
        from (its checkpoint), for any of them. Each partition starts at the larger of that
        offset and the group's committed offset; with neither, the client's offset reset
        (``earliest`` here) applies.
    on_revoke
        Called with partitions about to be given up (rebalance, or :meth:`close`), while they
        can still be committed: checkpoint and call :meth:`commit` in it. Only partitions
        reported by ``on_assign`` are passed. Also called when the group membership was lost
        (the commit then fails).
    on_idle
        Called, from the iterating thread between two batches, after a poll that returned no
        message: time for timed work such as a checkpoint of what the last batches did.
    exit_at_end
        Stop iterating once the group is stable, partitions are assigned and each is read up
        to the end offset it had when it was assigned. An empty assignment never ends the
        iteration: a member with nothing to read waits for partitions.
    hold_at_end
        With ``exit_at_end``, asked once this member's partitions are read to their end: while
        it returns True the member stays (polling every ``HOLD_POLL_MS``, calling ``on_idle``)
        instead of ending, for a member whose timed work others still depend on.
    poll_timeout_ms
        Longest wait for messages in one poll.
    max_poll_records
        Most messages per poll, hence per batch (``MAX_POLL_RECORDS`` unless given).
    split_lines
        Make one record per line of a message (see :func:`split_message`), all with the
        message's position; otherwise one record per message.
    client_options
        Further settings of the client's consumer (security, timeouts...), in its own names;
        ``reconnect backoff max`` is 5000 ms unless given (a returning broker is found within
        seconds).
    commit_timeout_ms
        Longest wait of :meth:`commit` for the broker.
    assignment_timeout_s
        With ``exit_at_end``, how long an empty assignment is waited out before it is an error
        (a group still rebalancing is waited for without end, with a warning this often); also
        the longest time spent retrying the broker calls that handle an assignment.
    max_line_bytes
        A longer message (or line of one) comes as a record with ``error="line_too_long"``
        holding its first bytes, as a line source gives one (``None``: no limit).

    Attributes
    ----------
    rebalances : int
        Number of times the assignment changed (the first one included); a rebalance that
        gives back the same partitions does not count.

    Notes
    -----
    *Threads.* ``on_assign`` and ``on_revoke`` never run concurrently with the iterating
    thread's code: the client runs them inside a poll (or :meth:`close`). An exception raised
    by one is re-raised unchanged by :meth:`batches` (or :meth:`close`).

    *Broker outages.* Iteration goes on: polls return nothing while the broker is away
    (losing and finding it is logged) and the client reconnects by itself; a poll that raises
    a retriable error is logged and retried after a short pause. Errors that retrying cannot
    fix (authorization, configuration) raise :class:`~connectors.errors.ConnectorError`.
    :meth:`commit` returns ``False`` while the broker is away. If the group membership
    expired meanwhile, the partitions are revoked (``on_revoke``; its commit fails) and
    assigned again (``on_assign``), resuming at the checkpoint.

    *Lag.* :meth:`lag` uses end offsets read at assignment, then those the client saw in its
    fetches (refreshed every few seconds); it makes no network call and is safe to call from
    another thread.

    *What a client adds* (the port): ``_configure`` (its settings), ``_open`` (create and
    subscribe the consumer, its rebalance callbacks calling ``_assign`` and ``_revoke``),
    ``_consume`` (one poll as one :class:`~connectors.MessageBlock` per partition run,
    tombstones as ``None``; timestamps when ``_timestamps``), ``_topic_partitions``,
    ``_range_assignor``, ``_commit_offsets``, ``_group_metadata``,
    ``_close_client``, ``_client_errors`` and ``_fatal``; for the books ``_committed_of``,
    ``_place`` (seek each partition to its start), ``_assignment_of``, ``_read_positions``,
    ``_highwaters``, ``_stable``; and ``_watch`` (note brokers lost and found).
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
        self._on_idle = on_idle
        self._exit_at_end = exit_at_end
        self._hold_at_end = hold_at_end
        self._poll_timeout_ms = poll_timeout_ms
        self._max_poll_records = max_poll_records
        self._split_lines = split_lines
        self._max_line_bytes = max_line_bytes
        self._commit_timeout_ms = commit_timeout_ms
        self._open_books(on_assign, on_revoke, assignment_timeout_s)
        self._consumer = None
        self._poll_lock = threading.Lock()  # held by the iterating thread while it polls
        self._close_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._as_blocks = False  # message_blocks() is iterated, not batches()
        self._poll_count = max_poll_records  # messages asked of the next poll
        self._stop_requested: Callable[[], bool] | None = None
        self._config = self._configure(bootstrap_servers, client_options)

    def stop_when(self, requested: Callable[[], bool]) -> None:
        """End before the next poll once ``requested()`` (SIGTERM): never by an exception
        raised inside a commit, a rebalance callback or a client's C call."""
        self._stop_requested = requested

    # -- Source --------------------------------------------------------------------------------
    def batches(self) -> Iterator[list[Record]]:
        """Return an iterator over batches: the messages of one poll each.

        Returns
        -------
        Iterator of list of Record
            Non-empty batches, in the order the client returns messages (offset order within
            a partition); a batch never ends inside a message. Empty polls yield nothing.
            Ends only when ``exit_at_end`` applies, after :meth:`close` or at ``stop_when``.

        Raises
        ------
        ConnectorError
            If called twice or after :meth:`close`; while iterating, if the consumer cannot
            be created, an error cannot be cured by retrying, or (``exit_at_end``) no
            assignment arrives in time. ``on_assign`` / ``on_revoke``'s exceptions propagate.
        """
        self._start()
        return self._iterate()  # type: ignore[return-value]  # units are lists of records

    def message_blocks(self) -> Iterator[PollUnit]:
        """Iterate as :meth:`batches` does (instead of it), with each partition's run of
        one-record messages in a poll as one :class:`~connectors.MessageBlock`, made without a
        record per message; a poll holding a message of several lines comes as records.

        Raises ``ConnectorError`` as :meth:`batches` does.
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

    # -- what a client adds --------------------------------------------------------------------
    def _configure(
        self, bootstrap_servers: str | list[str], client_options: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The client's settings: its defaults, ``client_options``, and what the source sets."""
        raise NotImplementedError

    def _open(self) -> Any:
        raise NotImplementedError

    def _consume(self, consumer: Any) -> list[MessageBlock]:
        """One poll of up to ``_poll_count`` messages as a block per partition run (values
        ``None`` for tombstones); the client's errors raise."""
        raise NotImplementedError

    def _watch(self, consumer: Any, got: bool) -> None:
        """After a poll (``got``: it returned messages): note brokers lost and found."""

    def _commit_offsets(self, todo: dict[TopicPartitionKey, int]) -> bool:
        raise NotImplementedError

    def _group_metadata(self, consumer: Any) -> Any:
        """The client's snapshot of ``consumer``'s group membership."""
        raise NotImplementedError

    def _close_client(self, consumer: Any) -> None:
        """Close ``consumer`` (logging, not raising, what the client reports)."""
        raise NotImplementedError

    # -- a poll --------------------------------------------------------------------------------
    def _poll(self, consumer: Any) -> list[PollUnit]:
        try:
            runs = self._consume(consumer)
        except self._client_errors() as exc:
            self._raise_callback_error()
            if self._fatal(exc):
                raise ConnectorError(f"consuming {self.topics!r} failed: {exc!r}") from exc
            logger.warning("polling %s failed, retrying: %r", self.topics, exc)
            time.sleep(RETRY_PAUSE_S)
            return []
        self._raise_callback_error()
        self._refresh_ends(consumer)
        self._watch(consumer, bool(runs))
        return self._units(runs) if runs else []

    def _units(self, runs: list[MessageBlock]) -> list[PollUnit]:
        units, positions, messages, read = units_of(runs, self._split_lines, self._as_blocks)
        self._note_read(positions)
        self._note_batch(messages, read)
        return units

    def _note_batch(self, messages: int, records: int) -> None:
        """Ask the next poll for about ``max_poll_records`` records, however many lines the
        messages have (a poll of many-line messages could hold a whole topic)."""
        if records:
            wanted = self._max_poll_records * messages // records
            self._poll_count = max(1, min(self._max_poll_records, wanted))

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
        if self._exit_at_end or self._check_partitions is not None:
            self._check_topics(consumer)  # before the first poll
        deadline = time.monotonic() + self._assignment_timeout_s
        while True:
            if self._stop_requested is not None and self._stop_requested():
                return  # as at the end: the consumer stays for the last commit
            with self._poll_lock:
                if self._closed:
                    break
                units = self._poll(consumer)
            if self._closed:
                break
            if units:
                if self._max_line_bytes is not None:
                    units = [held_to_limit(unit, self._max_line_bytes) for unit in units]
                yield from units
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

    #: A poll's wait while ``hold_at_end`` keeps a member at its end (``on_idle``'s period)
    HOLD_POLL_MS = 20

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

