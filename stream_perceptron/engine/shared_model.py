"""Shared-model mode: the engine's side of many workers learning one model through Kafka.

Like a Kafka Streams task, the unit of ownership is the input partition. What this worker
shares lives in the model topic (a compacted log, :class:`~connectors.kafka_model_topic.ModelLog`):

* ``partition:<topic>:<n>``: the partition's next offset and the examples and mistakes learned
  from it since the stream began (:class:`~stream_perceptron.sharing.PartitionState`);
* ``increment:<worker>:<seq>``: what a worker learned between two of its commits
  (:class:`~stream_perceptron.sharing.Increment`), until a mixture holds it;
* ``mixture``: the numbered mixtures (:class:`~stream_perceptron.sharing.Mixture`).

Every commit is one Kafka transaction (:class:`~connectors.kafka_transactions.TransactionalOutput`):
the predictions and dead letters since the last commit, the owned partitions' records, this
worker's increment and the consumed offsets. A ``kill -9`` loses exactly the open transaction:
its records are read again, by whoever owns their partition next, from the offsets and counts
that were committed with the increments that learned them.

Mixing (:mod:`~stream_perceptron.sharing.increments`): one worker mixes, the one that owns the
first input topic's partition 0 (Kafka's group assignment elects it, and moves the job with
the partition). Every ``mix_every`` examples of some worker and/or ``mix_interval`` seconds,
right after a commit, it folds every increment no mixture holds yet into the newest mixture
(iterative parameter mixing: per worker the weighted average of the local changes, the sums of
the running average added) and writes the next mixture, with tombstones for the increments it
now holds, in its next transaction. Mixtures form one chain, so none is lost to a concurrent
one. Every worker, after each commit, moves onto a newer mixture when there is one: its model
becomes the mixture plus what it learned that the mixture does not hold yet, exactly.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from connectors import ConnectorError, PositionKey, Source
from connectors.kafka_model_topic import ModelLog
from connectors.kafka_transactions import (
    MAX_MESSAGE_BYTES,
    GroupMember,
    TransactionalOutput,
    TransactionFailed,
)
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.engine.model_view import ModelView
from stream_perceptron.engine.outcomes import EngineError
from stream_perceptron.engine.shared_state import (
    SharedModelMismatch,
    SharedModelTooLarge,
    adopt,
    is_averaged,
    model_of,
    shared_state,
)
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.sharing import Increment, MixError, Mixture, PartitionState, divergence
from stream_perceptron.sharing.increments import (
    Form,
    credited,
    form,
    history,
    increment,
    to_state,
    translate,
    with_history,
)
from stream_perceptron.sharing.records import MIXTURE_KEY, increment_key

__all__ = ["SharedModelCoordinator"]

logger = logging.getLogger(__name__)

#: how long the reads around a commit (the leader's before it, everyone's after it, to move
#: onto a newer mixture) wait for others' open transactions: not at all. What is committed is
#: a prefix of each worker's records (a worker's transactions are sequential), so the leader
#: folds what it can read and the rest at its next commit, and a worker moves onto the newest
#: mixture it can read, a newer one next time. Waiting (the leader up to 2 s, the others up to
#: 25 s) serialised the workers once they committed often: each one's read waited for the
#: others' transactions (row 11d, mixing every 1k: 2k records/s). Restores still wait (a
#: partition's former owner may be committing its last records).
AROUND_COMMIT_STABLE_WAIT_S = 0.0
#: a commit that took longer is logged (a client that waited out a broker outage inside the
#: call, as kafka-python's retries do, committed it in place without failing)
SLOW_COMMIT_S = 5.0
#: how often, at most, the leader reads the model topic between its commits to see whether
#: the others' increments make a mix due
PEEK_S = 0.05
#: the mixer, read to the end of its partitions (``--exit-at-end``), stays while another
#: worker's increment came within this many seconds (at least; twice the commit interval
#: when that is longer): the others commit at least once an interval while they learn
LINGER_S = 2.0


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
        Mix once the group learned this many examples no mixture holds / after this many
        seconds (whichever first); with ``mix_every`` every worker also commits after its
        share of that (``mix_every`` over the group's size) records.
    leader
        The input partition whose owner mixes (default: partition 0 of the first input topic
        this worker is assigned).
    adopt_settings
        Take the hyperparameters of the model the topic holds when they differ from this
        worker's (else :meth:`start` refuses them).
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
        leader: PositionKey | None = None,
        adopt_settings: bool = False,
    ) -> None:
        super().__init__(None, every=every, interval=interval)
        self.log = log
        self.output = output
        self.topic = topic
        self.worker = worker
        self.mix_every = mix_every
        self.mix_interval = mix_interval
        self.leader = leader
        self.adopt_settings = adopt_settings
        self.view = ModelView()
        self.counts: dict[PositionKey, list[int]] = {}  # owned partitions: [examples, mistakes]
        self.owned: set[PositionKey] = set()
        self.version = 0  # of the mixture the model is based on
        self.n_since = 0  # examples learned since the model moved onto a mixture
        self.mixes = 0  # mixtures this worker made or moved onto
        self.last_mix_at: float | None = None  # wall clock
        self.divergence = 0.0
        self.restores = 0
        self.restore_seconds = 0.0
        self.commits = 0
        self.commit_seconds = 0.0  # spent in transaction commits
        self.mix_seconds = 0.0  # spent reading the model topic and mixing
        self.committed: dict[PositionKey, int] = {}  # offsets committed, per partition
        self._seq = 0  # of this worker's last increment
        self._last_mix_time = time.monotonic()
        self._last_peek = 0.0  # the leader's last look for a mix due between its commits
        self._others_seq: dict[str, int] = {}  # the other workers' newest increments seen
        self._others_at = 0.0  # when one of them was first seen (monotonic)
        self._holding = False  # the mixer stays at the end of its partitions for the others
        self._final = False  # in the last commit (finish): the leader mixes whatever is fresh
        self.peek_s: float | None = PEEK_S  # None: never (in-process tests, deterministic)
        self._group: Callable[[], Any] | None = None
        self._base: dict[str, Any] | None = None  # the mixture the model is based on
        self._published: Form | None = None  # the model's form at its last increment
        self._pending: list[Increment] = []  # its increments no mixture holds yet
        self._decoded: dict[int, Form] = {}  # those increments' forms, by seq
        #: an averaged model's form at its last increment or move, and the sums of its weights
        #: over the examples it learned since its last increment up to then (see _move_onto)
        self._anchor: Form | None = None
        self._unpublished = Form(0.0, {})
        self._saving = threading.RLock()
        #: why a save failed: this worker commits nothing more (it is on its way out)
        self._failed: BaseException | None = None
        self.outages = 0  # transactions committed again after a broker outage
        self.outage_limit = 240.0  # seconds (below the consumers' max.poll.interval.ms)
        self.max_record_bytes = MAX_MESSAGE_BYTES  # the model topic's messages, at most

    # -- wiring --------------------------------------------------------------------------------
    def bind(self, source: Source) -> None:
        super().bind(source)
        self._group = source.group_metadata if isinstance(source, GroupMember) else None

    def start(self) -> None:
        """Before the first record: check the model topic (compacted, one partition; created
        if missing), fence a former self (aborting the transaction it left open), and start
        from the newest mixture plus this worker's own increments it does not hold (a restart),
        or from a fresh model (implicitly mixture 0, which the leader writes) when there is
        none yet.

        Raises
        ------
        SharedModelMismatch
            If the topic's model is another learner or has other hyperparameters than this
            worker's flags say, unless ``adopt_settings``.
        """
        self.log.ensure()
        self.output.start()
        self._read_log()
        state = self._state
        if state is None:
            raise RuntimeError("SharedModelCoordinator.start before attach()")
        with state.lock:
            learner = state.learner
            mixture = self.view.mixture
            own = shared_state(learner)
            if mixture is None:
                base = own
                self.version = 0
            else:
                base = mixture.state
                self.version = mixture.version
                self._check_settings(own, base)
            self.view.expected = model_of(base)
            included = self.view.included().get(self.worker, 0)
            self._seq = max([included, *self.view.increments.get(self.worker, {})])
            self._pending = self.view.steps(self.worker, included)
            model = translate(base, [(1.0, self._step(i)) for i in self._pending],
                              labels_from=[i.meta for i in self._pending])  # fmt: skip
            if is_averaged(model) and self._pending:
                model = to_state(model, with_history(
                    form(model), self._history_on(base, self._pending, Form(0.0, {}))
                ))  # fmt: skip
            adopt(learner, model)
            self._base = base
            self._published = form(model)
            self._anchor = self._published if is_averaged(model) else None
            self.n_since = sum(i.examples for i in self._pending)
            if mixture is not None:
                logger.warning(
                    "worker %s starts from mixture %d (%d examples)%s", self.worker,
                    self.version, mixture.state["n_seen"],
                    f" with {len(self._pending)} of its own increments ({self.n_since} "
                    "examples) it does not hold yet" if self._pending else "",
                )  # fmt: skip

    def _check_settings(self, own: dict[str, Any], topic: dict[str, Any]) -> None:
        """Refuse (or, with ``adopt_settings``, take with a warning) a topic's model other than
        the one this worker's flags describe."""
        mine, theirs = model_of(own), model_of(topic)
        if mine == theirs:
            return
        differ = ", ".join(
            f"{k}={theirs[1].get(k)!r} (here {mine[1].get(k)!r})"
            for k in sorted(mine[1].keys() | theirs[1].keys())
            if mine[1].get(k) != theirs[1].get(k)
        )
        what = (f"a {theirs[0]} (here a {mine[0]})" if mine[0] != theirs[0]
                else f"a {theirs[0]} with {differ}")  # fmt: skip
        # another learner, or other hashing (this worker's hasher is not the model's), is
        # never adopted
        fixed = mine[0] != theirs[0] or mine[1].get("hash_bits") != theirs[1].get("hash_bits")
        if not self.adopt_settings or fixed:
            raise SharedModelMismatch(
                f"the model topic {self.topic!r} holds {what}: start this worker with the "
                "group's model flags"
                + ("" if fixed else ", or --adopt-model-settings to take them")
            )
        logger.warning("the model topic %r holds %s: adopting its settings", self.topic, what)

    # -- per record ----------------------------------------------------------------------------
    def count_partition(self, key: PositionKey, examples: int, mistakes: int) -> None:
        """The engine's outcomes: ``examples`` learned from partition ``key``, ``mistakes``
        of them mistakes."""
        c = self.counts.get(key)
        if c is None:
            c = self.counts[key] = [0, 0]
        c[0] += examples
        c[1] += mistakes
        self.n_since += examples

    # -- when ----------------------------------------------------------------------------------
    @property
    def batch_limit(self) -> int | None:
        """A commit is due after ``every`` records or, with ``mix_every``, after this worker's
        share of a mixing period (``mix_every`` times its share of the input partitions: known
        locally at once, where the group's size in the model topic lags a rebalance): the
        engine checks at least that often, however many records a poll brings (a fast client
        hands over thousands at once), so the cadence holds at any speed."""
        every = self.every
        if self.mix_every:
            share = max(1, self.mix_every * len(self.owned) // max(1, self._partitions()))
            every = min(every, share) if every else share
        return every or None

    def _partitions(self) -> int:
        """The input partitions known to this worker: its own and those the model topic has a
        record of (the group's share of a worker is its share of them)."""
        topics = {t for t, _ in self.owned}
        return len(self.owned | {k for k in self.view.partitions if k[0] in topics})

    def due(self, records: int, now: float | None = None) -> bool:
        """A commit is due after :attr:`batch_limit` records or ``interval`` seconds, so the
        increments a mix needs are committed in time at any speed."""
        every = self.batch_limit
        if every and records - self._last_records >= every:
            return True
        now = time.monotonic() if now is None else now
        return self.interval is not None and now - self._last_time >= self.interval

    @property
    def is_leader(self) -> bool:
        """Whether this worker mixes: it owns the leader partition."""
        if self.leader is not None:
            return self.leader in self.owned
        topics = sorted({t for t, _ in self.owned})
        return bool(topics) and (topics[0], 0) in self.owned

    def mix_due(self, fresh: dict[str, list[Increment]], now: float | None = None) -> bool:
        """Whether the leader mixes at this commit: with ``mix_every``, once the increments no
        mixture holds reach half of it. The leader mixes only at its own commits, about one
        per ``mix_every`` examples of the group, and sees only the increments the others
        committed before it read: waiting for a whole ``mix_every`` skipped the mix whenever
        one of them committed just after (12-20 mixtures of 30 due); half of it mixes at
        nearly every such commit, and never more often than twice the cadence."""
        if not fresh:
            return False
        if self._final:
            return True
        if self.mix_every and (
            2 * sum(i.examples for steps in fresh.values() for i in steps) >= self.mix_every
        ):
            return True
        now = time.monotonic() if now is None else now
        return self.mix_interval is not None and now - self._last_mix_time >= self.mix_interval

    def after_batch(self, records: int) -> None:
        """Commit when due, or when the leader finds a mix due."""
        if self.due(records) or self._mix_waiting():
            self.save()

    def _mix_waiting(self) -> bool:
        """The leader, at most every ``peek_s`` seconds between its commits: whether the
        others' committed increments make a mix due now. Its own commits come after its own
        records, so when its partitions hold less of the stream than the others' (a worker
        that read alone at the start took some of them) it would mix less often than
        ``mix_every`` says."""
        if not self.mix_every or self.peek_s is None or not self.is_leader:
            return False
        now = time.monotonic()
        if now - self._last_peek < self.peek_s:
            return False
        self._last_peek = now
        try:
            self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
        except ConnectorError as e:  # the commit, when due, says so
            logger.debug("worker %s did not read the model topic: %s", self.worker, e)
            return False
        return self.mix_due(self.view.fresh(), now)

    def hold_at_end(self) -> bool:
        """The mixer, its partitions read to their end (``--exit-at-end``): whether to stay
        and mix on, because another worker committed an increment within :data:`LINGER_S`.
        Left to a next mixer, their increments would wait for a rebalance to make one (a
        mixer whose partitions held less of the stream ended early, and 13 mixtures of 30
        due were made)."""
        if not (self.mix_every or self.mix_interval) or self.peek_s is None or not self.is_leader:
            return False
        now = time.monotonic()  # the log is read by idle(), called between the polls
        linger = max(LINGER_S, 2 * (self.interval or 0.0))
        # the others gone (their partitions all came to this worker): nobody to wait for
        alone = self._partitions() <= len(self.owned)
        holding = not alone and now - self._others_at < linger
        if holding != self._holding:
            self._holding = holding
            logger.info(
                "worker %s, at the end of its partitions, %s", self.worker,
                "stays to mix what the other workers still learn" if holding
                else "ends: it holds every partition" if alone
                else f"ends: no other worker committed for {linger:g} s",
            )  # fmt: skip
        return holding

    def finish(self) -> None:
        """The last commit; the leader's mixes every increment it finds (a run that ends
        leaves the chain's head holding all it could see, not up to ``mix_every / 2`` fewer
        examples for the next start to lack)."""
        if self._state is not None:
            self._final = True
            try:
                self.save()
            finally:
                self._final = False

    def idle(self) -> None:
        """The source has nothing new for now: commit what came since the last commit; else,
        when a commit would be due, the leader still commits (and mixes what the others
        learned meanwhile) and any other worker moves onto a newer mixture."""
        state = self._state
        if state is None:
            return
        if state.stats.records > self._last_records:
            self.after_batch(state.stats.records)
        elif self._mix_waiting():
            self.save()
        elif self.due(state.stats.records):
            if self.is_leader:
                self.save()
            else:
                self._last_time = time.monotonic()
                try:
                    self.mix()
                except ConnectorError as e:
                    logger.warning("worker %s did not read the model topic: %s", self.worker, e)

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
        this worker's increment, the next mixture when this worker is the leader and a mix is
        due (with tombstones for the increments it folds in), and the consumed offsets; then
        move onto the newest mixture."""
        with self._saving:  # one save at a time (a revocation's comes from a helper thread)
            if self._failed is not None:
                # what was learned since the last commit went with the failed transaction (its
                # increment, predictions and partition records): committing the offsets now,
                # without them, would lose those examples for good; the worker that takes the
                # partitions next reads them again from the last commit that landed
                logger.warning("worker %s: not committing after its failed transaction (%s)",
                               self.worker, self._failed)  # fmt: skip
                return
            try:
                self._save()
            except BaseException as e:
                self._failed = e
                raise

    def _save(self) -> None:
        state = self._state
        if state is None:
            raise RuntimeError("SharedModelCoordinator.save before attach()")
        mixture = None
        leader = self.is_leader
        if leader:
            # read before this transaction writes to the model topic: a read_committed reader
            # waits for every open transaction on it, its own one too
            leader = self._try_read_log()
        with state.lock:
            offsets = {k: self.positions[k] for k in sorted(self.owned, key=repr)
                       if k in self.positions}  # fmt: skip
            for (topic, partition), offset in offsets.items():
                n, m = self.counts.get((topic, partition), (0, 0))
                record = PartitionState(topic, partition or 0, offset, n, m, self.worker)
                self._send(record.key, record.encode())
            self._publish(state.learner)
            # the leader writes to the chain only in a transaction that sends consumed offsets:
            # only those carry the group generation check (KIP-447), which fences a former
            # leader that lost its partitions (a zombie) instead of letting it fork the chain
            if leader and offsets:
                for key in sorted(self.view.doomed):  # refused increments: deleted
                    self._send(key, None)
                mixture = self._next_mixture()
            self.view.doomed.clear()
            # the group's membership only where offsets go with the transaction: a worker
            # stopped before it was assigned anything (its consumer closed or never opened)
            # commits what it has without one
            group = self._group() if offsets and self._group is not None else None
            if offsets and group is None:
                raise EngineError("shared-model mode commits offsets of a consumer group only")
        # the commit outside the state's lock, which the metrics read under (a commit can wait
        # out a broker outage); saves are serialised by their own lock
        started = time.perf_counter()
        try:
            self.output.commit(offsets, group)
        except TransactionFailed as e:
            if not e.retriable:
                raise
            self._ride_out(e, offsets, group)
        else:
            took = time.perf_counter() - started
            if took > SLOW_COMMIT_S:
                logger.warning("worker %s: a commit took %.1f s (the broker slow or away)",
                               self.worker, took)  # fmt: skip
        with state.lock:
            self.commit_seconds += time.perf_counter() - started
            self.committed.update(offsets)
            self.commits += 1
            if offsets:
                logger.info("worker %s committed %s", self.worker, _describe(offsets))
            self.last_saved_at = time.time()
            self._last_records = state.stats.records
            self._last_time = time.monotonic()
            if mixture is not None:  # committed: the chain goes on from it
                held = _held_keys(mixture, self.view)
                self.view.ingest([(k.encode(), None) for k in held], own=True)
                self.view.advance(mixture)
        try:
            self.mix(read=mixture is None)
        except ConnectorError as e:  # the broker away: the next commit tries again
            logger.warning("worker %s did not read the model topic: %s", self.worker, e)

    def _ride_out(self, failure: TransactionFailed, offsets: dict[PositionKey, int],
                  group: Any) -> None:  # fmt: skip
        """Commit the failed transaction again, in a new one, until the broker is back (the
        failed one was aborted: nothing of it is visible, so its outputs stay exactly once);
        give up after ``outage_limit`` seconds, or at once when another producer or group
        member took over."""
        started = time.monotonic()
        delay = 0.5
        logger.warning(
            "worker %s: the transaction failed (%s); %s when the broker is back", self.worker,
            failure, "finishing its commit (in doubt: never sent again)"
            if getattr(failure, "in_doubt", False) else "committing it again",
        )  # fmt: skip
        self.outages += 1
        while True:
            if time.monotonic() - started > self.outage_limit:
                raise EngineError(
                    f"the broker stayed unreachable for {self.outage_limit:g} s: {failure}"
                ) from failure
            time.sleep(delay)
            delay = min(2 * delay, 5.0)
            try:
                self.output.retry(offsets, group)
            except TransactionFailed as e:
                if not e.retriable:
                    raise
                failure = e
                logger.info("worker %s: the transaction failed again: %s", self.worker, e)
                continue
            logger.warning("worker %s: committed after %.1f s of broker outage", self.worker,
                           time.monotonic() - started)  # fmt: skip
            return

    def _try_read_log(self) -> bool:
        """Read the model topic (the leader, before its commit: what the others' open
        transactions hold is mixed next time); False (logged) when the broker cannot be
        reached."""
        try:
            self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
        except ConnectorError as e:
            logger.warning("worker %s did not read the model topic: %s", self.worker, e)
            return False
        return True

    def _publish(self, learner: StreamClassifier) -> None:
        """This worker's increment since its last one, into the open transaction."""
        assert self._published is not None
        now = shared_state(learner)
        step = increment(now, self._published, [self._step(i) for i in self._pending])
        if not step.t:
            return
        self._seq += 1
        meta = {k: v for k, v in now.items() if k not in _WEIGHTS}
        record = Increment(self.worker, self._seq, self.version, step.encode(), meta)
        self._send(record.key, record.encode())
        self._pending.append(record)
        self._decoded[record.seq] = step
        self._published = form(now)
        if self._anchor is not None:
            self._anchor, self._unpublished = self._published, Form(0.0, {})

    def _next_mixture(self) -> Mixture | None:
        """The leader's next mixture, into the open transaction (with tombstones for the
        increments it holds), when one is due: every increment the newest mixture lacks,
        this worker's own in this transaction included, folded in."""
        started = time.perf_counter()
        try:
            view = self.view  # read just before the transaction began
            for own in self._pending:  # the one in this transaction is not in the log yet
                view.increments.setdefault(self.worker, {})[own.seq] = own
            current = view.mixture
            if current is None:  # the chain starts from the fresh model: mixture 0
                assert self._base is not None
                current = view.mixture = Mixture(0, self._base, self.worker)
                if not self.mix_due(view.fresh()):
                    self._send(current.key, current.encode())
                    return current
            elif not self.mix_due(view.fresh()):
                return None
            try:
                folded = view.folded()
            except MixError as e:
                logger.error("not mixing: %s", e)
                return None
            assert folded is not None
            mixed, fresh, step = folded
            included = {**current.included, **{w: s[-1].seq for w, s in fresh.items()}}
            mixture = Mixture(current.version + 1, mixed, self.worker, included=included,
                              step=step.encode())  # fmt: skip
            self._send(mixture.key, mixture.encode())
            for steps in fresh.values():
                for i in steps:
                    self._send(i.key, None)
            self._last_mix_time = time.monotonic()
            logger.info("worker %s mixed %d increments of %d workers into version %d",
                        self.worker, sum(map(len, fresh.values())), len(fresh),
                        mixture.version)  # fmt: skip
            return mixture
        finally:
            self.mix_seconds += time.perf_counter() - started

    def mix(self, read: bool = True) -> bool:
        """Read the model topic and move onto a newer mixture if there is one; True if the
        model moved. ``read=False``: onto the newest mixture known (the leader's own, just
        committed: only the leader mixes, so a read would find no newer one)."""
        started = time.perf_counter()
        try:
            if read:
                self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
            state = self._state
            assert state is not None
            with state.lock:
                mixture = self.view.mixture
                if mixture is None or mixture.version <= self.version:
                    return False
                self._move_onto(state.learner, mixture)
            return True
        finally:
            self.mix_seconds += time.perf_counter() - started

    def _move_onto(self, learner: StreamClassifier, mixture: Mixture) -> None:
        """The model becomes ``mixture`` plus what this worker learned that it does not hold."""
        assert self._base is not None and self._published is not None
        holds = mixture.included.get(self.worker, 0)
        held = [i for i in self._pending if i.seq <= holds]
        shift = [(1.0, form(mixture.state)), (-1.0, form(self._base))]
        shift += [(-1.0, self._step(i)) for i in held]
        local = shared_state(learner)
        unpublished = local["n_seen"] - int(round(self._published.t))
        moved = translate(local, shift, labels_from=[mixture.state])
        published = self._published
        for coef, f in shift:  # the last increment's form moves alike
            published = published.plus(f, coef)
        if self._anchor is not None:
            # an averaged model's running average: moving its accumulators by the same shift
            # would credit its examples with weights times counts it never had (the mixture's
            # count is the group's); its sums of the weights over its history become the
            # mixture's, plus its own increments the mixture does not hold as the fold will
            # credit them, plus its examples since its last increment with its own weights
            since = self._unpublished.plus(history(form(local))).plus(history(self._anchor), -1.0)
            linear = form(moved)
            fixed = with_history(linear, self._history_on(
                mixture.state, [i for i in self._pending if i.seq > holds], since))
            # the open increment's accumulator change stays what this worker learned: taken
            # before the shift (exactly zero for every key untouched since the last
            # increment), on top of the fixed accumulators; shifting both sides and
            # subtracting left rounding residues in every key the shift moved, which the
            # next increment then carried (1,984 keys for an increment of 2 examples)
            open_u = self._published._plus(form(local), 0.0, -1.0, 0.0, 0.0)
            published = (published._plus(published, 0.0, -1.0, 0.0, 0.0)
                         ._plus(fixed, 0.0, 1.0, 0.0, 0.0)._plus(open_u, 0.0, 1.0, 0.0, 0.0))
            moved = to_state(moved, fixed)
            self._anchor, self._unpublished = fixed, since
        self._published = published
        self.divergence = divergence(local, moved)
        adopt(learner, moved)
        self._pending = [i for i in self._pending if i.seq > holds]
        self._decoded = {s: f for s, f in self._decoded.items() if s > holds}
        self._base = mixture.state
        self.version = mixture.version
        self.n_since = sum(i.examples for i in self._pending) + unpublished
        self.mixes += 1
        self.last_mix_at = time.time()
        logger.info("worker %s moved onto mixture %d (divergence %.4g)", self.worker,
                    self.version, self.divergence)  # fmt: skip

    def _step(self, inc: Increment) -> Form:
        """``inc``'s form, decoded once."""
        f = self._decoded.get(inc.seq)
        if f is None:
            f = self._decoded[inc.seq] = Form.decode(inc.delta)
        return f

    def _history_on(self, mixture: dict[str, Any], pending: list[Increment],
                    since: Form) -> Form:  # fmt: skip
        """An averaged model's sums of its weights over its history once it is on ``mixture``
        (a state): the mixture's, plus its increments in ``pending`` as the fold will credit
        them (each with the weights of the mixture it began on), plus ``since``."""
        head = form(mixture)
        total = history(head).plus(since)
        for inc in pending:
            lag = self.view.lag(inc.base_version)
            total = total.plus(credited(self._step(inc), head if lag is None
                                        else head.plus(lag, -1.0)))  # fmt: skip
        return total

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

    def _send(self, key: str, value: bytes | None) -> None:
        if value is not None and len(value) > self.max_record_bytes:
            # refused before the broker does it less clearly (the transaction is aborted: what
            # was learned since the last commit is learned again by the next owner)
            raise SharedModelTooLarge(
                f"the model topic's record {key!r} would be {len(value) / 2**20:.1f} MiB, over "
                f"the {self.max_record_bytes / 2**20:g} MiB a Kafka message holds here: "
                + ("bound the model with --hash-bits (2^bits weights per class)"
                   if key == MIXTURE_KEY else "commit more often (--checkpoint-every N: an "
                   "increment holds the features learned since the last commit) or bound the "
                   "model with --hash-bits")
            )  # fmt: skip
        raw = key.encode()
        signer = self.view.signer
        headers = signer.headers(raw, value) if signer is not None else None
        self.output.send(self.topic, value, raw, headers=headers)

    def _read_log(self, stable_wait_s: float | None = None) -> None:
        """Ingest what the model topic has that was not read yet; ``stable_wait_s``: how long
        to wait for others' open transactions (default: the log's own, for restores)."""
        wait = getattr(self.log, "stable_wait_s", None)
        if stable_wait_s is None or wait is None:
            self.view.ingest(self.log.read_new())
            self._note_others()
            return
        self.log.stable_wait_s = min(wait, stable_wait_s)  # type: ignore[attr-defined]
        try:
            self.view.ingest(self.log.read_new())
        finally:
            self.log.stable_wait_s = wait  # type: ignore[attr-defined]
        self._note_others()

    def _note_others(self) -> None:
        """When another worker's newest increment was first seen (see :meth:`hold_at_end`)."""
        for w, steps in self.view.increments.items():
            if w != self.worker and steps and max(steps) > self._others_seq.get(w, 0):
                self._others_seq[w] = max(steps)
                self._others_at = time.monotonic()


#: the parts of a learner state an increment's ``meta`` leaves out
_WEIGHTS = frozenset({"weights", "bias", "avg_weights_acc", "avg_bias_acc", "classes"})


def _held_keys(mixture: Mixture, view: ModelView) -> list[str]:
    """The keys of the increments in ``view`` that ``mixture`` holds."""
    return [
        increment_key(w, q) for w, steps in view.increments.items() for q in steps
        if q <= mixture.included.get(w, 0)
    ]  # fmt: skip


def _describe(offsets: dict[PositionKey, int]) -> str:
    return ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(offsets.items(), key=repr))
