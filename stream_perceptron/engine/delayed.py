"""``--join-key``: labels that come after their records, joined to them by a key.

A keyed record with features and no label is an *event*: predicted at once (its prediction
written, one per event) and kept pending. A keyed record with a label and no features is its
*outcome*: the model learns the event's features with that label, as the model is when the
outcome comes, and the outcome is scored against the prediction served for the event. The join
is symmetric: an outcome that comes first waits for its event, which is then predicted and
learned at once. A keyed record with features and a label is learned at once and leaves the
pending state alone; a record without the key is read as without ``--join-key``, but a label
without features or key is refused (``missing_join_key``): it can only be a lost outcome.

The clock is the number of records read (bad ones too), which the checkpoint restores, so a
resumed run expires and joins exactly as an uninterrupted one. The bounds are applied as each
parsed record comes (a dropped entry is counted, and dead-lettered, then).

A pair the model refuses (a label outside its encoding, a value too large) is a bad record,
as a labelled record is without the join: the record that completed it (the outcome, or the
event an outcome waited for, which then gets no prediction line) is counted invalid and
dead-lettered, and the pair is gone.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from connectors import Position, Record
from stream_perceptron.engine.outcomes import Outcomes
from stream_perceptron.errors import LabelError, RecordError
from stream_perceptron.formats.base import MISSING_JOIN_KEY
from stream_perceptron.join import Expired, JoinCounts, PendingEvent, PendingJoin
from stream_perceptron.join.tasks import JoinTasks, WorkerJoinCounts
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.stats import RunStats

__all__ = ["DelayedLabels", "NO_OUTCOME", "UNMATCHED_OUTCOME"]

logger = logging.getLogger(__name__)

#: Dead-letter reasons of what the join drops (not bad records: they are not counted invalid).
NO_OUTCOME = "no_outcome"
UNMATCHED_OUTCOME = "unmatched_outcome"


class DelayedLabels:
    """The engine's step for one keyed record: predict, keep, join, learn, expire.

    Parameters
    ----------
    join
        The pending store (its bounds: ``--max-pending``, ``--label-wait``).
    stats
        The run's counters; ``stats.join`` gets the join's counts.
    outcomes
        The engine's outcome path (counts, prediction lines, dead letters).
    key
        The key field's name (for the dead letters of expired events).
    tasks
        Shared-model mode: a store per partition task, each with its own clock (the task's
        records read) and counts, instead of ``join``, the run's clock (``stats.records``) and
        the run's counts (``stats.join`` then sums what this worker's tasks counted).

    Examples
    --------
    >>> from connectors import MemorySink, Position
    >>> from stream_perceptron import Perceptron
    >>> from stream_perceptron.engine.outputs import Outputs
    >>> stats, sink = RunStats(), MemorySink()
    >>> step = DelayedLabels(PendingJoin(100, 10), stats, Outcomes(stats, Outputs(sink), None,
    ...                      "skip"), key="id")
    >>> model = Perceptron()
    >>> step.handle(Record(b"", Position("s", 0)), model, "e1", {"a": 1.0}, None)
    >>> step.handle(Record(b"", Position("s", 1)), model, "e1", {}, 1)
    >>> stats.records, stats.learned, model.n_seen, len(sink.lines), stats.join.joined
    (2, 1, 1, 1, 1)

    """

    def __init__(self, join: PendingJoin, stats: RunStats, outcomes: Outcomes, key: str,
                 tasks: JoinTasks | None = None) -> None:  # fmt: skip
        self.pending = join
        self.tasks = tasks
        self.stats = stats
        if tasks is not None:
            stats.join = WorkerJoinCounts(tasks)
        elif stats.join is None:
            stats.join = JoinCounts()
        self.outcomes = outcomes
        self.key = key

    @property
    def counts(self) -> JoinCounts:
        counts = self.stats.join
        assert counts is not None
        return counts

    @property
    def waiting(self) -> PendingJoin | JoinTasks:
        """What waits (its ``events``, ``outcomes`` and ``max_pending``), for the metrics."""
        return self.pending if self.tasks is None else self.tasks

    def passed(self, record: Record) -> None:
        """A record of the stream that is not :meth:`handle`'d (a bad one): its task's clock
        moves on as the run's does."""
        if self.tasks is not None:
            self.tasks.of(record.position).tick()

    def handle(
        self, record: Record, learner: StreamClassifier, key: str | None, x: dict[Any, float],
        y: Any,
    ) -> None:  # fmt: skip
        """One parsed record: ``key`` (``None``: none), features ``x``, label ``y``."""
        if self.tasks is None:
            now, pending, counts = self.stats.records, self.pending, self.counts
        else:
            task = self.tasks.of(record.position)
            now, pending, counts = task.tick(), task.store, task.counts
        stamp = pending.tick(record.timestamp)  # the stream's time: the entries' stamp
        gone = pending.expire(now)
        if gone:
            self._dropped(counts, pending, gone)
        outcomes = self.outcomes
        if key is None or (y is not None and x):
            if y is None:
                outcomes.predicted(record, learner.predict_one(x))
            elif not x:
                outcomes.bad(record, MISSING_JOIN_KEY, f"a label without features or the "
                             f"--join-key field {self.key!r}")  # fmt: skip
            else:
                self._learn(record, learner, x, y, line=True)
            return
        position = record.position
        if y is None:  # an event
            counts.events += 1
            if pending.outcome_waiting(key):
                outcome = pending.take_outcome(key, now)
                prediction = self._learn(record, learner, x, outcome.label, line=True)
                if prediction is not _REFUSED:
                    self._joined(counts, prediction, outcome.label, 0,
                                 _ms(outcome.stamp, stamp))  # fmt: skip
                return
            if pending.has_event(key):
                counts.duplicate_event += 1
                outcomes.predicted(record, learner.predict_one(x), waiting=True)
                self._kept(counts)
                return
            prediction = learner.predict_one(x)
            pending.add_event(key, x, prediction, (position.source, position.partition),
                              position.offset, now, stamp)  # fmt: skip
            outcomes.predicted(record, prediction, waiting=True)
            self._kept(counts)
        else:  # an outcome
            counts.outcomes += 1
            if pending.has_event(key):
                event = pending.take_event(key, now)
                learned = self._learn(record, learner, event.features(), y, line=False)
                if learned is not _REFUSED:
                    self._joined(counts, event.served, y, now - event.arrival,
                                 _ms(stamp, event.stamp))  # fmt: skip
                return
            if pending.outcome_waiting(key) or pending.joined_recently(key):
                counts.duplicate_outcome += 1
                self.stats.count_waiting()
                self._kept(counts)
                return
            pending.add_outcome(key, y, record.value, (position.source, position.partition),
                                position.offset, now, stamp)  # fmt: skip
            self.stats.count_waiting()
            self._kept(counts)
        gone = pending.overflow()
        if gone:
            self._dropped(counts, pending, gone)

    def _kept(self, counts: JoinCounts) -> None:
        """A record kept waiting (or refused as a duplicate), in a task's counts too (the
        run's count it in :meth:`RunStats.count_waiting`)."""
        if self.tasks is not None:
            counts.records += 1

    def _learn(
        self, record: Record, learner: StreamClassifier, x: dict[Any, float], y: Any, line: bool
    ) -> Any:
        try:
            prediction = learner.predict_learn_one(x, y)
        except (LabelError, RecordError) as e:  # the model refused the example
            self.outcomes.refused(record, learner, y, e)
            return _REFUSED
        self.outcomes.learned(record, x, y, prediction, line=line)
        return prediction

    @staticmethod
    def _joined(counts: JoinCounts, served: Any, y: Any, delay: int, ms: int | None) -> None:
        counts.joined += 1
        counts.served_mistakes += served != y
        counts.observe_delay(delay)
        if ms is not None:
            counts.observe_delay_ms(ms)

    def _dropped(self, counts: JoinCounts, pending: PendingJoin, gone: list[Expired]) -> None:
        """Count (and dead-letter) what a bound dropped."""
        if not self.outcomes.writes_dead_letters:  # counted only
            events = sum(isinstance(entry, PendingEvent) for _, entry in gone)
            counts.expired += events
            counts.unmatched_outcome += len(gone) - events
            return
        wait = pending.label_wait
        wait_text = f"{wait / 1000:g} s" if pending.by_time else f"{wait} records"
        why = f"within --label-wait {wait_text} and --max-pending {pending.max_pending}"
        for key, entry in gone:
            position = Position(entry.origin[0], entry.offset, entry.origin[1])
            if isinstance(entry, PendingEvent):
                counts.expired += 1
                value = json.dumps({self.key: key, **entry.features()}).encode()
                self.outcomes.dead_letter(Record(value, position), NO_OUTCOME,
                                          f"no outcome for the key {key!r} {why}")  # fmt: skip
            else:
                counts.unmatched_outcome += 1
                self.outcomes.dead_letter(Record(entry.raw, position), UNMATCHED_OUTCOME,
                                          f"no event for the key {key!r} {why}")  # fmt: skip


class _Refused:
    """The example was refused (counted and dead-lettered as a bad record)."""


_REFUSED = _Refused()


def _ms(outcome: int | None, event: int | None) -> int | None:
    """The label delay in time: from the event's stamp (the stream's time when it came) to the
    outcome's, in milliseconds, 0 for an outcome that came first (as its delay in records);
    ``None`` unless both have one.

    >>> _ms(1_500, 1_000), _ms(1_000, 1_500), _ms(None, 1_000), _ms(1_000, None)
    (500, 0, None, None)
    """
    if outcome is None or event is None:
        return None
    return max(0, outcome - event)
