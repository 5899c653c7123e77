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

Examples
--------
>>> from connectors import Position
>>> tasks = JoinTasks(max_pending=10, label_wait=5, events_topic="events")
>>> task = tasks.of(Position("labels", 4, 2))  # partition 2 of either topic: task 2
>>> task.store.add_event("a", {"f": 0.5}, 1, ("events", 2), offset=4, now=task.tick())
>>> log = tasks.changes(2)
>>> [(key, value is not None) for key, value in log]
[(b'a', True), (b'', True)]
>>> again = JoinTasks(max_pending=10, label_wait=5, events_topic="events")
>>> again.restore(2, log)
>>> again.of(Position("events", 9, 2)).records, again.events, tasks.events
(1, 1, 1)
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from connectors import Position
from stream_perceptron.errors import StateError
from stream_perceptron.join import changelog
from stream_perceptron.join.pending import PendingJoin
from stream_perceptron.state import count, short

__all__ = ["JoinTask", "JoinTasks", "TASK_KEY"]

#: the changelog key of a task's own record (no join key is empty)
TASK_KEY = b""
TASK_VERSION = 1


class JoinTask:
    """One partition task's join: its store and its clock.

    Parameters
    ----------
    store
        The task's pending events and outcomes (change tracking on).
    records
        The task's clock: its records read so far.
    """

    def __init__(self, store: PendingJoin, records: int = 0) -> None:
        self.store = store
        self.records = records
        self.written = records  # the clock in the last changes given
        store.track_changes()

    def tick(self) -> int:
        """One more record of the task read: the clock before it (what the join counts from)."""
        now = self.records
        self.records = now + 1
        return now

    def record(self) -> dict[str, Any]:
        """The task's own changelog record: its clock and stream time."""
        return {"v": TASK_VERSION, "kind": "task", "records": self.records,
                "time": self.store.time}  # fmt: skip


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

    def _new(self, records: int = 0) -> JoinTask:
        return JoinTask(PendingJoin(self.task_max_pending, self.label_wait, self.by_time),
                        records)  # fmt: skip

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
        self._tasks.pop(partition, None)
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
        self._tasks.pop(partition, None)


def _task_record(value: dict[str, Any] | None, partition: int) -> tuple[int]:
    """A task's clock from its own record (none: a task that never committed)."""
    if value is None:
        return (0,)
    where = f"the join changelog's task record of partition {partition}"
    if value.get("v") != TASK_VERSION or value.get("kind") != "task":
        raise StateError(f"{where} is not a version {TASK_VERSION} task record")
    time = value.get("time")
    if time is not None and type(time) is not int:
        raise StateError(f"{where} has the stream time {short(time)}, not milliseconds")
    return (count(value.get("records"), f"{where} records"),)
