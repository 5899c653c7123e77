"""The join of shared-model mode: one pending store per partition task, its own clock.

In shared-model mode a worker owns partitions, not the stream, and its partitions move. As in
Kafka Streams, the unit is the task: partition ``p`` of the events topic with partition ``p``
of the co-partitioned labels topic. Each task has its own store
(:class:`~stream_perceptron.join.PendingJoin`), its own clock (the records of the task read,
bad ones too) and its own stream time, so what it joins and expires depends on the task's
records only, not on which worker owns it or what else that worker reads; ``--max-pending``
bounds each task's store.

A task's state goes to its partition of a compacted changelog topic in each commit's
transaction (:meth:`JoinTasks.changes`: the records of the keys that changed, and the task's
own record, keyed by the empty key, which no join key is), and the task's next owner rebuilds
it from that partition (:meth:`JoinTasks.restore`), compacted or not.

A task also counts what its join did (:class:`~stream_perceptron.join.JoinCounts`: events,
outcomes, pairs joined, served mistakes, expired, unmatched, duplicates, the delays), from the
task's first record on, in its own record: the group's totals are the sums of the tasks' last
records, exact after kills and rebalances. A worker's metrics are counters of its process
(:class:`WorkerJoinCounts`: what it counted in the tasks it held since it started).

Examples
--------
>>> from connectors import Position
>>> tasks = JoinTasks(max_pending=10, label_wait=5, events_topic="events")
>>> task = tasks.of(Position("labels", 4, 2))  # partition 2 of either topic: task 2
>>> task.store.add_event("a", {"f": 0.5}, 1, ("events", 2), offset=4, now=task.tick())
>>> task.counts.events += 1  # as the engine's join counts it
>>> log = tasks.changes(2)
>>> [(key, value is not None) for key, value in log]
[(b'a', True), (b'', True)]
>>> again = JoinTasks(max_pending=10, label_wait=5, events_topic="events")
>>> again.restore(2, log)
>>> again.of(Position("events", 9, 2)).records, again.events, tasks.events
(1, 1, 1)
>>> again.tasks()[2].counts.events, again.counts.events, tasks.counts.events
(1, 0, 1)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from typing import Any

from connectors import Position
from stream_perceptron.errors import StateError
from stream_perceptron.join import changelog
from stream_perceptron.join.counts import JoinCounts
from stream_perceptron.join.pending import PendingJoin
from stream_perceptron.state import count, short

__all__ = ["JoinTask", "JoinTasks", "TASK_KEY", "WorkerJoinCounts"]

logger = logging.getLogger(__name__)

#: the changelog key of a task's own record (no join key is empty)
TASK_KEY = b""
#: 2: with the task's counts (a version 1 record, of 0.x before them, restores them as 0)
TASK_VERSION = 2


class JoinTask:
    """One partition task's join: its store and its clock.

    Parameters
    ----------
    store
        The task's pending events and outcomes (change tracking on).
    records
        The task's clock: its records read so far.
    counts
        What the task's join counted from its first record (restored with it).
    """

    def __init__(self, store: PendingJoin, records: int = 0,
                 counts: JoinCounts | None = None) -> None:  # fmt: skip
        self.store = store
        self.records = records
        self.written = records  # the clock in the last changes given
        self.counts = JoinCounts() if counts is None else counts
        self.base = self.counts.copy()  # the counts when this worker took the task
        store.track_changes()

    def tick(self) -> int:
        """One more record of the task read: the clock before it (what the join counts from)."""
        now = self.records
        self.records = now + 1
        return now

    def record(self) -> dict[str, Any]:
        """The task's own changelog record: its clock, stream time and counts."""
        return {"v": TASK_VERSION, "kind": "task", "records": self.records,
                "time": self.store.time, "counts": self.counts.get_state()}  # fmt: skip


class JoinTasks:
    """The tasks of the partitions a worker owns (made at the first record of one).

    Parameters
    ----------
    max_pending, label_wait, by_time
        Each task's bounds (see :class:`~stream_perceptron.join.PendingJoin`).
    events_topic
        The events topic: its partition ``p`` is task ``p`` (so is the labels topic's).
    """

    def __init__(self, max_pending: int, label_wait: int, events_topic: str,
                 by_time: bool = False) -> None:  # fmt: skip
        self.task_max_pending = max_pending
        self.label_wait = label_wait
        self.by_time = by_time
        self.events_topic = events_topic
        self._tasks: dict[int, JoinTask] = {}
        #: what this worker counted in the tasks it held and gave up
        self._given_up = JoinCounts()

    def _new(self, records: int = 0, counts: JoinCounts | None = None) -> JoinTask:
        return JoinTask(PendingJoin(self.task_max_pending, self.label_wait, self.by_time),
                        records, counts)  # fmt: skip

    def _give_up(self, partition: int) -> None:
        task = self._tasks.pop(partition, None)
        if task is not None:
            self._given_up.add(task.counts)
            self._given_up.add(task.base, -1)

    def of(self, position: Position) -> JoinTask:
        """The task of a record's position (made empty when new)."""
        partition = position.partition or 0
        task = self._tasks.get(partition)
        if task is None:
            task = self._tasks[partition] = self._new()
        return task

    def tasks(self) -> dict[int, JoinTask]:
        return dict(self._tasks)

    # -- what the metrics read (the sums of the tasks) -----------------------------------------
    @property
    def events(self) -> int:
        return sum(t.store.events for t in self._tasks.values())

    @property
    def outcomes(self) -> int:
        return sum(t.store.outcomes for t in self._tasks.values())

    def __len__(self) -> int:
        return self.events + self.outcomes

    @property
    def counts(self) -> JoinCounts:
        """What this worker counted since it started: in the tasks it holds since it took
        them, and in those it gave up while it held them (so it only grows)."""
        out = self._given_up.copy()
        for task in self._tasks.values():
            out.add(task.counts)
            out.add(task.base, -1)
        return out

    @property
    def max_pending(self) -> int:
        """At most this many wait together here: each task's bound, times the tasks held."""
        return self.task_max_pending * max(1, len(self._tasks))

    # -- the changelog -------------------------------------------------------------------------
    def changes(self, partition: int) -> list[tuple[bytes, bytes | None]]:
        """The changelog records of task ``partition`` since the last call: each changed key's
        latest record (``None``: a tombstone), then the task's own record; nothing for a task
        that read no record since."""
        task = self._tasks.get(partition)
        if task is None or task.written == task.records:
            return []
        task.written = task.records
        out = [(key.encode(), changelog.encode(value))
               for key, value in changelog.changes(task.store)]  # fmt: skip
        out.append((TASK_KEY, json.dumps(task.record(), separators=(",", ":")).encode()))
        return out

    def restore(self, partition: int, records: Iterable[tuple[bytes | None, bytes | None]]) -> None:
        """Task ``partition`` from its changelog partition read in its order (replacing what
        this worker held of it); :class:`StateError` naming the first bad record, the task
        then left out."""
        self._give_up(partition)
        entries: list[tuple[str, dict[str, Any] | None]] = []
        own: dict[str, Any] | None = None
        for key, value in records:
            if key == TASK_KEY:
                own = changelog.decode(value)
                continue
            try:
                text = (key or b"").decode()
            except UnicodeDecodeError:
                raise StateError(f"a join changelog record has the key {short(key)}") from None
            entries.append((text, changelog.decode(value)))
        task = self._new(*_task_record(own, partition))
        task.store.time = None if own is None else own.get("time")
        changelog.restore(task.store, entries)
        task.store.changed()  # what was read back is in the changelog already
        self._tasks[partition] = task

    def drop(self, partition: int) -> None:
        """Forget task ``partition`` (another worker owns it now)."""
        self._give_up(partition)


class WorkerJoinCounts(JoinCounts):
    """A worker's join counts in shared-model mode (``stats.join``, what its metrics, live
    page and summary read): :attr:`JoinTasks.counts`, computed when read, beside the run's
    own ``records`` (those the join kept waiting, which the run's record count adds)."""

    def __init__(self, tasks: JoinTasks) -> None:  # the counts are the tasks'
        self.records = 0
        self._join_tasks = tasks

    def __getattr__(self, name: str) -> Any:  # any count but ``records``
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._join_tasks.counts, name)


def _task_record(value: dict[str, Any] | None, partition: int) -> tuple[int, JoinCounts]:
    """A task's clock and counts from its own record (none: a task that never committed)."""
    if value is None:
        return 0, JoinCounts()
    where = f"the join changelog's task record of partition {partition}"
    version = value.get("v")
    if type(version) is not int or version not in (1, TASK_VERSION) or value.get("kind") != "task":
        raise StateError(f"{where} is not a version {TASK_VERSION} task record")
    time = value.get("time")
    if time is not None and type(time) is not int:
        raise StateError(f"{where} has the stream time {short(time)}, not milliseconds")
    records = count(value.get("records"), f"{where} records")
    if version == 1:
        logger.warning("%s was written before tasks kept their counts: they start at 0", where)
        return records, JoinCounts()
    try:
        counts = JoinCounts.from_state(value.get("counts"))
    except StateError as e:
        raise StateError(f"{where}: {e}") from None
    if counts.events + counts.outcomes > records:
        raise StateError(f"{where} counts {counts.events} events and {counts.outcomes} "
                         f"outcomes in {records} records")  # fmt: skip
    return records, counts
