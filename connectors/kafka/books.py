"""A Kafka group source's books, whatever its client: which partitions are assigned, where each
starts, what is read and committed, where each ends; how an assignment is taken up and given
up, and whether the ends are reached (``exit_at_end``).

:class:`GroupBooks` is the lower half of :class:`~connectors.kafka.group_source.GroupSource`;
the broker calls it needs are the client adapter's hooks (listed there).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from connectors.errors import ConnectorError
from connectors.kafka.common import TopicPartitionKey, check_offsets

__all__ = ["GroupBooks"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
RETRY_PAUSE_S = 0.5  # pause after a failed poll or assignment call
LAG_REFRESH_S = 2.0  # how often cached end offsets are updated from what the client saw
TOPIC_WAIT_S = 10.0  # how long co-partitioned topics are waited for before one is missing

Positions = dict[TopicPartitionKey, int]


class GroupBooks:
    """The books of a group source (a base class: the state is set by :meth:`_open_books`,
    guarded by ``_lock``, and read by metrics threads)."""

    group_id: str
    topics: list[str]
    _closed: bool
    _exit_at_end: bool
    _consumer: Any
    _config: dict[str, Any]

    #: How long the brokers have to list their topics (``--exit-at-end`` checks the names).
    METADATA_TIMEOUT_S = 20.0
    #: Records carry their message timestamps (:meth:`co_partition`).
    _timestamps = False
    #: Told the partition count of each topic before the first poll (:meth:`co_partition`).
    _check_partitions: Callable[[dict[str, int]], None] | None = None
    #: Told the same, to know the topics' size (:meth:`tell_partition_counts`).
    _count_listeners: tuple[Callable[[dict[str, int]], None], ...] = ()

    def _open_books(
        self,
        on_assign: Callable[[list[TopicPartitionKey]], Positions] | None,
        on_revoke: Callable[[list[TopicPartitionKey]], None] | None,
        assignment_timeout_s: float,
    ) -> None:
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._assignment_timeout_s = float(assignment_timeout_s)
        self.rebalances = 0
        self._lock = threading.Lock()
        self._assigned: list[TopicPartitionKey] = []  # announced to on_assign, not revoked
        self._positions: Positions = {}  # next offset to read
        self._ends: Positions = {}  # for lag(), refreshed
        self._stop_at: Positions = {}  # end offsets seen at assignment, for exit_at_end
        self._committed: Positions = {}  # by this source
        self._floor: Positions = {}  # never commit at or below
        self._callback_error: BaseException | None = None
        self._had_partitions = False
        self._joined = False  # an assignment (maybe empty) came from the group
        self._lost_since: float | None = None  # when the brokers or the coordinator went
        self._last_assignment: set[TopicPartitionKey] = set()
        self._ends_refreshed = 0.0
        #: Assignments taken up, a partition given back to this member included (what a merge
        #: buffered before one is read again from the checkpoint: it drops it)
        self.assignments = 0

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

    # -- co-partitioned topics (merged by timestamp: connectors.kafka.merge) -------------------
    def co_partition(self, check: Callable[[dict[str, int]], None]) -> None:
        """Before iterating: partition p of every topic goes to one member (the range assignor,
        an eager one), each record carries its message timestamp, and ``check`` is told each
        topic's partition count (0: no such topic) before the first poll."""
        self._timestamps = True
        self._check_partitions = check
        self._config = self._range_assignor(self._config)

    def tell_partition_counts(self, listener: Callable[[dict[str, int]], None]) -> None:
        """Before iterating: at each assignment, before ``on_assign``, ``listener`` is told the
        partition count of each topic read that the client's metadata lists (what it already
        fetched to join the group: no request for the cluster's topics; best effort, a topic
        it cannot tell is left out)."""
        self._count_listeners = (*self._count_listeners, listener)

    def _tell_counts(self, consumer: Any) -> None:
        try:
            counts = self._subscribed_partition_counts(consumer)
        except self._client_errors() as exc:
            logger.debug("the partition counts of %s are unknown: %r", self.topics, exc)
            return
        if counts:
            for listener in self._count_listeners:
                listener(counts)

    def ended(self, keys: list[TopicPartitionKey]) -> set[TopicPartitionKey]:
        """Of ``keys``, the assigned partitions read up to the end offset last seen (at
        assignment, then in the client's fetches): nothing of them waits on the broker now."""
        ended = self._ended(keys)
        pending = [tp for tp in keys if tp not in ended and tp in self._positions]
        if pending and self._consumer is not None:  # a position may move past control records
            try:
                self._note_read(self._read_positions(self._consumer, pending))
            except self._client_errors() as exc:
                logger.debug("reading positions failed: %r", exc)
            ended = self._ended(keys)
        return ended

    def _ended(self, keys: list[TopicPartitionKey]) -> set[TopicPartitionKey]:
        with self._lock:
            ends, positions = self._ends, self._positions
            return {tp for tp in keys if tp in ends and positions.get(tp, -1) >= ends[tp]}

    def _check_topics(self, consumer: Any) -> None:
        """Before the first poll: with ``exit_at_end``, a topic that is not there has no end to
        read to (say so at once); :meth:`co_partition`'s check of the partition counts."""
        counts = self._topic_partitions(consumer)
        if self._check_partitions is not None:  # a topic just made may not be listed at once
            deadline = time.monotonic() + TOPIC_WAIT_S
            while any(t not in counts for t in self.topics) and time.monotonic() < deadline:
                time.sleep(RETRY_PAUSE_S)
                counts = self._topic_partitions(consumer)
        missing = [t for t in self.topics if t not in counts]
        if missing and self._exit_at_end:
            raise ConnectorError(
                f"the topic {', '.join(map(repr, missing))} does not exist, so it has no end "
                "to read to (--exit-at-end): check the name, or create the topic first"
            )
        if self._check_partitions is not None:
            self._check_partitions({t: counts.get(t, 0) for t in self.topics})

    # -- the client's broker calls (see GroupSource) -------------------------------------------
    def _client_errors(self) -> tuple[type[BaseException], ...]:
        raise NotImplementedError

    def _fatal(self, exc: BaseException) -> bool:
        raise NotImplementedError

    def _committed_of(self, consumer: Any, keys: list[TopicPartitionKey]) -> dict[Any, Any]:
        raise NotImplementedError

    def _subscribed_partition_counts(self, consumer: Any) -> dict[str, int]:
        raise NotImplementedError

    def _place(
        self, consumer: Any, keys: list[TopicPartitionKey], starts: Positions
    ) -> tuple[Positions, Positions]:
        raise NotImplementedError

    def _log_starts(self, consumer: Any, keys: list[TopicPartitionKey]) -> Positions:
        """The first offset the broker still keeps of each of ``keys`` (its log start)."""
        raise NotImplementedError

    def _stable(self, consumer: Any) -> bool:
        return True

    def _topic_partitions(self, consumer: Any) -> dict[str, int]:
        """Each topic the cluster has, with its partition count (a :class:`ConnectorError` when
        it cannot say in ``METADATA_TIMEOUT_S``); without asking, so that none is created."""
        raise NotImplementedError

    def _range_assignor(self, config: dict[str, Any]) -> dict[str, Any]:
        """``config`` with the range assignor as the only assignment strategy."""
        raise NotImplementedError

    def _assignment_of(self, consumer: Any) -> list[TopicPartitionKey]:
        raise NotImplementedError

    def _read_positions(self, consumer: Any, keys: list[TopicPartitionKey]) -> Positions:
        raise NotImplementedError

    def _highwaters(self, consumer: Any) -> dict[TopicPartitionKey, int | None]:
        raise NotImplementedError

    def _failed(self, what: str, exc: BaseException) -> ConnectorError:
        """The error a broker call that cannot be retried ends in."""
        return ConnectorError(f"{what} failed: {exc!r}")

    # -- an assignment -------------------------------------------------------------------------
    def _assign(self, consumer: Any, keys: list[TopicPartitionKey]) -> None:
        """Take up the newly assigned ``keys`` (sorted): ask ``on_assign`` for the checkpoint,
        start each partition at the larger of it and the committed offset (with neither, the
        client's offset reset applies), note where each ends."""
        self._joined = True  # the group has settled an assignment (maybe empty) for this member
        self.assignments += 1
        if not keys:
            self._place(consumer, [], {})
            self._count_change(keys)
            logger.info("group %r assigned no partitions of %s", self.group_id, self.topics)
            return
        committed = self._retrying(
            "reading committed offsets", lambda: self._committed_of(consumer, keys)
        )
        if self._count_listeners:
            self._tell_counts(consumer)
        wanted = self._on_assign(list(keys)) if self._on_assign else {}
        wanted = check_offsets(wanted, "on_assign")
        starts: Positions = {}
        for key in keys:
            known = [o for o in (wanted.get(key), committed.get(key)) if o is not None]
            if known:
                starts[key] = max(known)
        self._warn_deleted(consumer, starts)
        positions, ends = self._place(consumer, keys, starts)
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
            self.group_id, keys, [positions[key] for key in keys],
            [wanted.get(key) for key in keys], [committed.get(key) for key in keys],
            [ends[key] for key in keys],
        )  # fmt: skip

    def _warn_deleted(self, consumer: Any, starts: Positions) -> None:
        """Say so when a partition resumes (checkpoint or committed offset) below the first
        offset its broker still keeps: retention (by time, judged by the records' timestamps,
        or by size) or a deletion removed records this group never read, and the client's
        offset reset will skip them. Nothing can keep them now; the warning tells the user to
        look at the topic's retention. Best effort: a failed query only skips the check."""
        if not starts:
            return
        try:
            firsts = self._log_starts(consumer, sorted(starts))
        except self._client_errors() as exc:
            logger.debug("reading log start offsets failed: %r", exc)
            return
        for key in sorted(starts):
            first = firsts.get(key)
            if first is not None and starts[key] < first:
                logger.warning(
                    "%s[%d]: resuming at offset %d, but the broker keeps offsets from %d on: "
                    "%d records were deleted (retention.ms / retention.bytes, or a deletion) "
                    "before this group read them, and are skipped",
                    key[0], key[1], starts[key], first, first - starts[key],
                )  # fmt: skip

    def _retrying(self, what: str, call: Callable[[], _T]) -> _T:
        """``call()``, retried on the client's retriable errors for up to
        ``assignment_timeout_s``."""
        deadline = time.monotonic() + self._assignment_timeout_s
        while True:
            try:
                return call()
            except self._client_errors() as exc:
                if self._fatal(exc) or time.monotonic() > deadline:
                    raise self._failed(f"{what} for {self.topics!r}", exc) from exc
                logger.warning("%s for %s failed, retrying: %r", what, self.topics, exc)
                time.sleep(RETRY_PAUSE_S)

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

    def _keep_failure(self, exc: BaseException, partitions: object, moot: bool) -> None:
        """A rebalance callback failed: keep ``exc`` for the iterating thread to raise, unless
        ``moot`` and the source is closed (a stop during a rebalance is not an error)."""
        if moot and self._closed:
            logger.info("rebalance callback for %s ended by the close: %r", partitions, exc)
        else:
            logger.error("rebalance callback for %s failed: %r", partitions, exc)
            self._callback_error = exc

    def _raise_callback_error(self) -> None:
        error, self._callback_error = self._callback_error, None
        if error is not None:
            raise error

    def _lost(self, what: str) -> None:
        """Note (and log once) that the brokers or the group coordinator went away."""
        if self._lost_since is None and self._had_partitions:
            self._lost_since = time.monotonic()
            logger.warning("group %r lost %s; reconnecting", self.group_id, what)

    def _found(self, what: str) -> None:
        if self._lost_since is not None:
            logger.info("group %r reached %s again after %.1f s", self.group_id, what,
                        time.monotonic() - self._lost_since)  # fmt: skip
            self._lost_since = None

    # -- reading -------------------------------------------------------------------------------
    def _note_read(self, positions: Positions) -> None:
        """Positions (next offsets) reached by a poll; they only move forward."""
        with self._lock:
            for tp, offset in positions.items():
                if tp in self._positions:
                    self._positions[tp] = max(offset, self._positions[tp])

    def _at_end(self, consumer: Any, *, refresh: bool) -> bool:
        """Whether the group is stable and each assigned partition is read up to the end it had
        when assigned (``refresh``: ask the client for positions, which can move past
        non-message records)."""
        if not self._stable(consumer):
            return False
        current = self._assignment_of(consumer)
        pending = self._pending(current)
        if pending is None:
            return False  # nothing assigned yet, or an assignment is being handled
        if pending and refresh:
            try:
                self._note_read(self._read_positions(consumer, pending))
            except self._client_errors() as exc:
                logger.debug("reading positions failed: %r", exc)
                return False
            pending = self._pending(current)
        return pending == []

    def _pending(self, current: list[TopicPartitionKey]) -> list[TopicPartitionKey] | None:
        """Of the client's ``current`` assignment (sorted), the partitions not yet read up to
        the end they had when assigned; ``None`` while nothing is assigned or an assignment is
        being handled."""
        with self._lock:
            if not current or current != self._assigned:
                return None
            return [tp for tp in current if self._positions[tp] < self._stop_at[tp]]

    def _refresh_ends(self, consumer: Any) -> None:
        """End offsets seen by the client (for :meth:`lag`), every ``LAG_REFRESH_S``."""
        now = time.monotonic()
        if now - self._ends_refreshed < LAG_REFRESH_S:
            return
        self._ends_refreshed = now
        highwaters = self._highwaters(consumer)
        with self._lock:
            for tp in self._assigned:
                end = highwaters.get(tp)
                if end is not None:
                    self._ends[tp] = end
