"""Shared-model mode: the engine's side of many workers learning one model through Kafka.

Like a Kafka Streams task, the unit of ownership is the input partition. What this worker
shares lives in the model topic (a compacted log, :class:`~connectors.kafka_model_topic.ModelLog`):

* ``partition:<topic>:<n>``: the partition's next offset and the examples and mistakes learned
  from it since the stream began (:class:`~stream_perceptron.sharing.PartitionState`);
* ``worker:<id>``: the worker's model as of its last commit, with the examples it learned since
  it last mixed (:class:`~stream_perceptron.sharing.Publication`);
* ``mixture``: the numbered mixtures (:class:`~stream_perceptron.sharing.Mixture`).

Every commit is one Kafka transaction (:class:`~connectors.kafka_transactions.TransactionalOutput`):
the predictions and dead letters since the last commit, the owned partitions' records, this
worker's publication and the consumed offsets. A ``kill -9`` loses exactly the open
transaction: its records are read again, by whoever owns their partition next, from the
offsets and counts that were committed with the model that learned them.

Mixing (:func:`~stream_perceptron.sharing.mix_states`): every ``mix_every`` examples of this
worker and/or ``mix_interval`` seconds, right after a commit, the worker reads the model topic
to its end and replaces its model by the average of its own and of every other worker's
latest publication it has not mixed yet, weighted by the examples each learned since its last
mix. The mixture gets the next version number and the exact cluster-wide counts (the sum of
the partition records), and is written to the model topic.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from connectors import PositionKey, Record, Source
from connectors.kafka_model_topic import ModelLog
from connectors.kafka_transactions import GroupMember, TransactionalOutput
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.engine.outcomes import EngineError, Outcomes
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.sharing import (
    MixError,
    Mixture,
    PartitionState,
    Publication,
    RecordFormatError,
    divergence,
    mix_states,
)
from stream_perceptron.sharing.records import decode

__all__ = ["ModelView", "PartitionCounting", "SharedModelCoordinator", "adopt", "pull_model"]

logger = logging.getLogger(__name__)


def adopt(learner: StreamClassifier, state: dict[str, Any]) -> None:
    """Make ``learner`` (in place: the engine and the metrics hold it) the learner of
    ``state``."""
    fresh = type(learner).from_state(state)
    learner.__dict__.clear()
    learner.__dict__.update(fresh.__dict__)


@dataclass
class ModelView:
    """The latest record of each key of the model topic, as read so far."""

    partitions: dict[PositionKey, PartitionState] = field(default_factory=dict)
    publications: dict[str, Publication] = field(default_factory=dict)
    mixture: Mixture | None = None
    bad_records: int = 0

    def ingest(self, records: list[tuple[bytes | None, bytes | None]]) -> None:
        """Take records in log order; one that does not parse is logged, counted, ignored."""
        for key, value in records:
            try:
                record = decode(value)
            except RecordFormatError as e:
                self.bad_records += 1
                logger.warning("ignoring a model-topic record (key %r): %s", key, e)
                continue
            if isinstance(record, PartitionState):
                self.partitions[(record.topic, record.partition)] = record
            elif isinstance(record, Publication):
                self.publications[record.worker] = record
            elif self.mixture is None or record.version >= self.mixture.version:
                self.mixture = record  # concurrent mixes: the highest version wins

    def counts(self, own: dict[PositionKey, list[int]] | None = None) -> tuple[int, int]:
        """Examples and mistakes learned cluster-wide: the partition records, with ``own``
        (this worker's live counts) in place of its partitions' records."""
        own = own or {}
        n = m = 0
        for key in self.partitions.keys() | own.keys():
            if key in own:
                n, m = n + own[key][0], m + own[key][1]
            else:
                p = self.partitions[key]
                n, m = n + p.n_seen, m + p.n_mistakes
        return n, m

    def current(self) -> tuple[dict[str, Any], int] | None:
        """The cluster's current model and its version: the newest mixture, or when workers
        learned on top of it, the mixture of their latest publications (weighted by the
        examples each learned since its last mix), with the exact cluster-wide counts."""
        base = self.mixture.version if self.mixture is not None else 0
        fresh = [
            p for _, p in sorted(self.publications.items())
            if p.n_since > 0 and p.base_version >= base
        ]  # fmt: skip
        n_seen, n_mistakes = self.counts()
        if not fresh:
            if self.mixture is None:
                return None
            state = dict(self.mixture.state, n_seen=n_seen, n_mistakes=n_mistakes)
            return state, self.mixture.version
        state = mix_states(
            [p.state for p in fresh], [p.n_since for p in fresh],
            n_seen=n_seen, n_mistakes=n_mistakes,
            base=self.mixture.state if self.mixture is not None else None,
        )  # fmt: skip
        return state, base + 1


def pull_model(log: ModelLog) -> tuple[StreamClassifier, int, dict[PositionKey, int], int]:
    """The cluster's current model from the model topic: ``(model, version, next offsets per
    partition, records that did not parse)``.

    Raises
    ------
    EngineError
        If the topic holds no model yet.
    """
    view = ModelView()
    view.ingest(log.read_new())
    current = view.current()
    if current is None:
        raise EngineError("the model topic holds no model yet")
    state, version = current
    offsets = {k: p.next_offset for k, p in view.partitions.items()}
    return StreamClassifier.from_state(state), version, offsets, view.bad_records


class PartitionCounting(Outcomes):
    """The engine's outcomes, also counting examples and mistakes per input partition."""

    def __init__(self, outcomes: Outcomes, coordinator: SharedModelCoordinator) -> None:
        self.__dict__.update(outcomes.__dict__)
        self._coordinator = coordinator

    def learned(self, record: Record, x: Any, y: Any, prediction: Any) -> None:
        super().learned(record, x, y, prediction)
        position = record.position
        self._coordinator.count((position.source, position.partition), prediction != y)


class SharedModelCoordinator(CheckpointCoordinator):
    """Commits (one transaction each), restores partitions and mixes, for one worker.

    Parameters
    ----------
    log
        The model topic.
    output
        The worker's transactions (the prediction and dead-letter sinks write into them).
    topic
        The model topic's name (records are produced there).
    worker
        This worker's id, stable across restarts (its transactional id derives from it).
    every, interval
        Commit after this many records / seconds (whichever first).
    mix_every, mix_interval
        Mix after this many examples of this worker / seconds (whichever first).
    """

    def __init__(
        self,
        log: ModelLog,
        output: TransactionalOutput,
        topic: str,
        worker: str,
        *,
        every: int | None = None,
        interval: float | None = 1.0,
        mix_every: int | None = None,
        mix_interval: float | None = None,
    ) -> None:
        super().__init__(None, every=every, interval=interval)
        self.log = log
        self.output = output
        self.topic = topic
        self.worker = worker
        self.mix_every = mix_every
        self.mix_interval = mix_interval
        self.view = ModelView()
        self.counts: dict[PositionKey, list[int]] = {}  # owned partitions: [examples, mistakes]
        self.owned: set[PositionKey] = set()
        self.version = 0  # of the mixture the model is based on
        self.n_since = 0  # examples learned since the last mix
        self.mixes = 0
        self.last_mix_at: float | None = None  # wall clock
        self.divergence = 0.0
        self.restores = 0
        self.restore_seconds = 0.0
        self.commits = 0
        self.commit_seconds = 0.0  # spent in transaction commits
        self.mix_seconds = 0.0  # spent reading the model topic and mixing
        self.committed: dict[PositionKey, int] = {}  # offsets committed, per partition
        self._seq = 0
        self._published_n = -1  # learner.n_seen at the last publication
        self._included: dict[str, int] = {}  # worker -> seq of its publication last mixed
        self._last_mix_time = time.monotonic()
        self._group: Callable[[], Any] | None = None
        self._mixture: Mixture | None = None  # the last mix, written with the next commit
        self._base_state: dict[str, Any] | None = None  # the model the local steps start from

    # -- wiring --------------------------------------------------------------------------------
    def install(self, engine: Any) -> None:
        """Count per partition in ``engine`` (built with ``dense=False``: every record goes
        through the outcomes)."""
        if engine._blocks is not None:
            raise EngineError("shared-model mode needs the engine built with dense=False")
        engine.outcomes = PartitionCounting(engine.outcomes, self)

    def bind(self, source: Source) -> None:
        super().bind(source)
        self._group = source.group_metadata if isinstance(source, GroupMember) else None

    def start(self) -> None:
        """Before the first record: fence a former self (aborting the transaction it left
        open), create the model topic if missing, and start from the newest model: this
        worker's own last publication when it is based on the newest mixture (a restart), else
        the newest mixture (a late joiner)."""
        self.output.start()
        self.log.ensure()
        self._read_log()
        state = self._state
        if state is None:
            raise RuntimeError("SharedModelCoordinator.start before attach()")
        mixture, own = self.view.mixture, self.view.publications.get(self.worker)
        newest = mixture.version if mixture is not None else 0
        with state.lock:
            # what the model is learned on top of (a fresh model at first)
            self._base_state = mixture.state if mixture is not None else state.learner.get_state()
            if own is not None and own.base_version >= newest:
                adopt(state.learner, own.state)
                self.version, self.n_since, self._seq = own.base_version, own.n_since, own.seq
                self._included = {w: p.seq for w, p in self.view.publications.items()
                                  if p.base_version < own.base_version}  # fmt: skip
                logger.warning("worker %s continues its own model (mixture %d + %d examples)",
                               self.worker, self.version, self.n_since)  # fmt: skip
            elif mixture is not None:
                adopt(state.learner, mixture.state)
                self.version = mixture.version
                self._included = {w: p.seq for w, p in self.view.publications.items()
                                  if p.base_version < mixture.version}  # fmt: skip
                if own is not None:
                    self._seq = own.seq
                logger.warning("worker %s starts from mixture %d (%d examples)",
                               self.worker, self.version, state.learner.n_seen)  # fmt: skip
            self._published_n = state.learner.n_seen

    # -- per record ----------------------------------------------------------------------------
    def count(self, key: PositionKey, mistake: bool) -> None:
        c = self.counts.get(key)
        if c is None:
            c = self.counts[key] = [0, 0]
        c[0] += 1
        c[1] += mistake
        self.n_since += 1

    # -- when ----------------------------------------------------------------------------------
    def due(self, records: int, now: float | None = None) -> bool:
        if self.every and records - self._last_records >= self.every:
            return True
        now = time.monotonic() if now is None else now
        return self.interval is not None and now - self._last_time >= self.interval

    def mix_due(self, now: float | None = None) -> bool:
        if self.mix_every and self.n_since >= self.mix_every:
            return True
        now = time.monotonic() if now is None else now
        return self.mix_interval is not None and now - self._last_mix_time >= self.mix_interval

    def after_batch(self, records: int) -> None:
        """Commit when due; a mix that is due commits first (mixes happen between commits)."""
        if self.due(records) or self.mix_due():
            self.save()

    def finish(self) -> None:
        if self._state is not None:
            self.save()

    # -- partitions ----------------------------------------------------------------------------
    def assigned(self, partitions: list[PositionKey]) -> dict[PositionKey, int]:
        """Restore the partitions' state from the model topic before their first record."""
        started = time.monotonic()
        self._read_log()
        state = self._state
        assert state is not None
        with state.lock:
            for key in partitions:
                saved = self.view.partitions.get(key)
                if saved is not None:
                    self.positions[key] = self.resume_from[key] = saved.next_offset
                    self.counts[key] = [saved.n_seen, saved.n_mistakes]
                else:
                    self.positions.pop(key, None)
                    self.resume_from.pop(key, None)
                    self.counts[key] = [0, 0]
                self.owned.add(key)
        seconds = time.monotonic() - started
        self.restores += len(partitions)
        self.restore_seconds += seconds
        logger.info("worker %s restored %s in %.3f s: %s", self.worker, partitions, seconds,
                    {k: self.positions.get(k) for k in partitions})  # fmt: skip
        return {k: self.positions[k] for k in partitions if k in self.positions}

    def revoked(self, partitions: list[PositionKey]) -> None:
        """Commit the partitions' state before another worker takes them."""
        self.save()
        state = self._state
        assert state is not None
        with state.lock:
            for key in partitions:
                self.owned.discard(key)
                self.counts.pop(key, None)

    # -- commit and mix ------------------------------------------------------------------------
    def save(self) -> None:
        """One transaction: what was output since the last one, the owned partitions' records,
        this worker's model, and the consumed offsets."""
        state = self._state
        if state is None:
            raise RuntimeError("SharedModelCoordinator.save before attach()")
        with state.lock:
            offsets = {k: self.positions[k] for k in sorted(self.owned, key=repr)
                       if k in self.positions}  # fmt: skip
            for (topic, partition), offset in offsets.items():
                n, m = self.counts.get((topic, partition), (0, 0))
                record = PartitionState(topic, partition or 0, offset, n, m, self.worker)
                self._send(record.key, record.encode())
            learner = state.learner
            if self._mixture is not None:
                self._send(self._mixture.key, self._mixture.encode())
                self._mixture = None
            if learner.n_seen != self._published_n:
                self._seq += 1
                publication = Publication(
                    self.worker, self._seq, self.version, self.n_since, learner.get_state()
                )
                self._send(publication.key, publication.encode())
                self._published_n = learner.n_seen
            group = self._group() if self._group is not None else None
            if offsets and group is None:
                raise EngineError("shared-model mode commits offsets of a consumer group only")
            started = time.perf_counter()
            self.output.commit(offsets, group)
            self.commit_seconds += time.perf_counter() - started
            self.committed.update(offsets)
            self.commits += 1
            if offsets:
                logger.info("worker %s committed %s", self.worker, _describe(offsets))
            self.last_saved_at = time.time()
            self._last_records = state.stats.records
            self._last_time = time.monotonic()
        if self.mix_due():
            self.mix()

    def mix(self) -> bool:
        """Mix this worker's model with the others' new publications; False if there was
        nothing to mix. The mixture is written with the next commit."""
        started = time.perf_counter()
        try:
            return self._mix()
        finally:
            self.mix_seconds += time.perf_counter() - started

    def _mix(self) -> bool:
        self._read_log()
        state = self._state
        assert state is not None
        with state.lock:
            self._last_mix_time = time.monotonic()
            others = [
                p for w, p in sorted(self.view.publications.items())
                if w != self.worker and p.n_since > 0 and self._included.get(w, -1) < p.seq
            ]  # fmt: skip
            weights = [self.n_since] + [p.n_since for p in others]
            if not sum(weights):
                return False
            learner = state.learner
            local = learner.get_state()
            n_seen, n_mistakes = self.view.counts(self.counts)
            try:
                mixed = mix_states(
                    [local, *(p.state for p in others)], weights,
                    n_seen=n_seen, n_mistakes=n_mistakes, base=self._base_state,
                )  # fmt: skip
            except MixError as e:
                logger.error("not mixing: %s", e)
                return False
            newest = self.view.mixture.version if self.view.mixture is not None else 0
            self.version = max([self.version, newest, *(p.base_version for p in others)]) + 1
            self.divergence = divergence(local, mixed)
            adopt(learner, mixed)
            self._base_state = mixed
            for p in others:
                self._included[p.worker] = p.seq
            self.n_since = 0
            self.mixes += 1
            self.last_mix_at = time.time()
            # written with the next commit (the model topic is in a transaction only while a
            # commit is being written, so readers seldom wait for one)
            self._mixture = Mixture(self.version, mixed, self.worker)
            self._published_n = -1  # publish the mixed model with the next commit
        logger.info("worker %s mixed %d publications into version %d (divergence %.4g)",
                    self.worker, len(others), self.version, self.divergence)  # fmt: skip
        return True

    def close(self) -> None:
        """Close the transactions (aborting anything uncommitted) and the model-topic reader."""
        logger.info(
            "worker %s: %d transactions in %.2f s, %d mixes in %.2f s, %d partition restores "
            "in %.2f s", self.worker, self.commits, self.commit_seconds, self.mixes,
            self.mix_seconds, self.restores, self.restore_seconds,
        )  # fmt: skip
        try:
            self.output.close()
        finally:
            self.log.close()

    def _send(self, key: str, value: bytes) -> None:
        self.output.send(self.topic, value, key.encode())

    def _read_log(self) -> None:
        self.view.ingest(self.log.read_new())


def _describe(offsets: dict[PositionKey, int]) -> str:
    return ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(offsets.items(), key=repr))
