"""Shared-model mode: the engine's side of many workers learning one model through Kafka.

Like a Kafka Streams task, the unit of ownership is the input partition. What this worker
shares lives in the model topic (a compacted log, :class:`~connectors.kafka.model_log.ModelLog`):

* ``partition:<topic>:<n>``: the partition's next offset and the examples and mistakes learned
  from it since the stream began (:class:`~stream_perceptron.sharing.PartitionState`);
* ``increment:<worker>:<seq>``: what a worker learned between two of its commits
  (:class:`~stream_perceptron.sharing.Increment`), until a mixture holds it;
* ``mixture``: the numbered mixtures (:class:`~stream_perceptron.sharing.Mixture`).

Every commit is one Kafka transaction (:class:`~connectors.kafka.transactions.TransactionalOutput`):
the predictions and dead letters since the last commit, the owned partitions' records, this
worker's increment and the consumed offsets. A ``kill -9`` loses exactly the open transaction:
its records are read again, by whoever owns their partition next, from the offsets and counts
that were committed with the increments that learned them.

Mixing (:mod:`~stream_perceptron.sharing.increments`): one worker mixes, the one that owns the
first input topic's partition 0 (Kafka's group assignment elects it, and moves the job with
the partition). At a commit of its own, once the committed increments no mixture holds reach
``mix_every / 2`` examples (about one mixture per ``mix_every`` examples of the group: it sees
only what the others committed before it read) and/or ``mix_interval`` seconds after its last
mix, it folds every increment no mixture holds yet into the newest mixture
(iterative parameter mixing: per worker the weighted average of the local changes, the sums of
the running average added) and writes the next mixture in that commit's transaction. Mixtures form
one chain, the model topic's order: the leader mixes again only once it read its last mixture
back, and of two mixtures of one version (two leaders around a rebalance) the first in the log
is the chain's for every reader. An increment is deleted (a tombstone, in a later transaction
of the leader) only once the mixture that holds it was read back as the head, so a mixture
refused as stale takes nothing with it. Every worker, at each commit (once its increment is
in the transaction), moves onto the newest mixture its one read of the model topic before
that transaction found: its model becomes the mixture plus what it learned that the mixture
does not hold yet, exactly.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from connectors import ConnectorError, PositionKey
from connectors.kafka.background_commits import BackgroundCommits
from connectors.kafka.transactions import TransactionFailed
from stream_perceptron.errors import EngineError
from stream_perceptron.sharing import Mixture, PartitionState
from stream_perceptron.sharing.cadence import SharedCadence
from stream_perceptron.sharing.coordinator_base import AROUND_COMMIT_STABLE_WAIT_S, InFlight
from stream_perceptron.sharing.increments import Form, form, to_state, translate, with_history
from stream_perceptron.sharing.states import (
    SharedModelMismatch,
    adopt,
    is_averaged,
    model_of,
    shared_state,
)

__all__ = ["SharedModelCoordinator"]

logger = logging.getLogger(__name__)

#: a commit that took longer is logged (a client that waited out a broker outage inside the
#: call, as kafka-python's retries do, committed it in place without failing)
SLOW_COMMIT_S = 5.0


class SharedModelCoordinator(SharedCadence):
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
        About one mix per ``mix_every`` examples of the group (the leader mixes at its commit
        once the committed examples no mixture holds reach half of it) / after this many
        seconds (whichever first); with ``mix_every`` every worker also commits after its
        share of it (``mix_every`` times its share of the input partitions) records.
    leader
        The input partition whose owner mixes (default: partition 0 of the first input topic
        this worker is assigned).
    adopt_settings
        Take the hyperparameters of the model the topic holds when they differ from this
        worker's (else :meth:`start` refuses them).
    """

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
        self.timeline.begin()
        with self.timeline.phase("restore"):
            self._start()
        self.timeline.open_span("join")  # until the first assignment

    def _start(self) -> None:
        self.log.ensure()
        if self.join_log is not None:
            self.join_log.start()
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
            # numbered on from the highest seq of its own read, tombstones too: never reused
            self._seq = max([included, self.view.last_seq.get(self.worker, 0),
                             *self.view.increments.get(self.worker, {})])  # fmt: skip
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

    # -- partitions ----------------------------------------------------------------------------
    def assigned(self, partitions: list[PositionKey]) -> dict[PositionKey, int]:
        """Restore the partitions' state from the model topic before their first record."""
        if self.timeline.span == "join":
            self.timeline.close_span()
        with self.timeline.phase("restore"):
            return self._assigned(partitions)

    def _assigned(self, partitions: list[PositionKey]) -> dict[PositionKey, int]:
        started = time.monotonic()
        self._read_log()
        state = self._state
        assert state is not None
        with state.lock:
            if self.join_log is not None:  # before the first record of each task
                self.join_log.restore(p or 0 for _topic, p in partitions)
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
            if self.join_log is not None:
                self.join_log.drop(p or 0 for _topic, p in partitions)

    # -- commit and mix ------------------------------------------------------------------------
    def save(self, background: bool = False) -> None:
        """One transaction: what was output since the last one, the owned partitions' records,
        this worker's increment, when this worker is the leader tombstones for the increments
        the head holds and the next mixture when a mix is due, and the consumed offsets. The
        model topic is read once, before it; the model moves onto the newest mixture read once
        the increment is sent (the last commit's reads its own mixture back after it).

        ``background`` (with an output that commits in the background,
        :class:`~connectors.kafka.background_commits.BackgroundCommits`; not in the last
        commit): the transaction commits while the engine learns on, and lands at the next
        save (or :meth:`land_if_done`); a save waits for the commit in flight first."""
        with self._saving:  # one save at a time (a revocation's comes from a helper thread)
            if self._failed is not None:
                # what was learned since the last commit went with the failed transaction (its
                # increment, predictions and partition records): committing the offsets now,
                # without them, would lose those examples for good; the worker that takes the
                # partitions next reads them again from the last commit that landed
                logger.warning("worker %s: not committing after its failed transaction (%s)",
                               self.worker, self._failed)  # fmt: skip
                return
            with self._failure_kept():
                self._land()
                self._save(background)

    def land_if_done(self) -> None:
        """Land the commit in flight if it has ended (its bookkeeping, the leader's mixture
        to read back): between batches and when idle, so an idle worker's last commit is
        counted and read back without waiting for a next one."""
        if self._in_flight is not None and not self._in_flight.output.committing:
            with self._saving:
                if self._failed is None:
                    with self._failure_kept():
                        self._land()

    @contextmanager
    def _failure_kept(self) -> Iterator[None]:
        """A failure inside is kept in ``_failed`` (no commit after it) and raised."""
        try:
            yield
        except BaseException as e:
            self._failed = e
            raise

    def _land(self) -> None:
        """Wait for the commit in flight; ride out a retriable failure (commit it again until
        the broker is back), raise another; then its bookkeeping."""
        flight = self._in_flight
        if flight is None:
            return
        self._in_flight = None
        with self.timeline.phase("transaction"), self.timeline.detail("commit"):
            try:
                flight.output.land()
            except TransactionFailed as e:
                if not e.retriable:
                    raise
                self._ride_out(e, flight.offsets, flight.group)
        self._landed(flight.offsets, flight.mixture, flight.retired, flight.started, False)

    def _save(self, background: bool) -> None:
        state = self._state
        if state is None:
            raise RuntimeError("SharedModelCoordinator.save before attach()")
        mixture, retired = None, []
        # the one read of the model topic a commit makes, before its transaction: the others'
        # increments for the leader's fold, the leader's last mixture read back, and a newer
        # mixture to move onto once the increment is out. Read after the commit instead, a
        # worker's own records were often not there yet (the broker writes a transaction's
        # markers after its commit returns): the leader then read again before its next
        # commit, 2.5 reads a commit (row 17)
        read = self._try_read_log()
        leader = self.is_leader and read
        with state.lock, self.timeline.phase("transaction"):
            offsets = {k: self.positions[k] for k in sorted(self.owned, key=repr)
                       if k in self.positions}  # fmt: skip
            for (topic, partition), offset in offsets.items():
                n, m = self.counts.get((topic, partition), (0, 0))
                record = PartitionState(topic, partition or 0, offset, n, m, self.worker)
                self._send(record.key, record.encode())
            if self.join_log is not None:  # the tasks' changes, with their offsets
                self.join_log.write(p or 0 for _topic, p in offsets)
            self._publish(state.learner)
            if read:  # what it learned is in its increment: onto the newest mixture now
                self._move_onto_head(state.learner)
            # the leader writes to the chain only in a transaction that sends consumed offsets:
            # only those carry the group generation check (KIP-447), which fences a former
            # leader that lost its partitions (a zombie) instead of letting it fork the chain
            if leader and offsets:
                for key in sorted(self.view.doomed):  # refused increments: deleted
                    self._send(key, None)
                retired = self._retire_held()
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
        output = self.output
        if background and not self._final and isinstance(output, BackgroundCommits):
            with self.timeline.phase("transaction"):
                output.commit_in_background(offsets, group)
            self._in_flight = InFlight(output, offsets, group, mixture, retired, started)
            with state.lock:  # the cadence counts from here: the next save waits for this one
                self._last_records = state.stats.records
                self._last_time = time.monotonic()
            return
        try:
            with self.timeline.phase("transaction"), self.timeline.detail("commit"):
                self.output.commit(offsets, group)
        except TransactionFailed as e:
            if not e.retriable:
                raise
            with self.timeline.phase("transaction"):
                self._ride_out(e, offsets, group)
        self._landed(offsets, mixture, retired, started, True)
        if not self._final:  # the next commit reads first
            return
        try:  # the last commit: onto the newest mixture (the leader's own, read back)
            self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
            self._read_back()
            with state.lock:
                self._move_onto_head(state.learner)
        except ConnectorError as e:
            logger.warning("worker %s did not read the model topic: %s", self.worker, e)

    def _landed(self, offsets: dict[PositionKey, int], mixture: Mixture | None,
                retired: list[str], started: float, cadence: bool) -> None:  # fmt: skip
        """A commit landed: count it; the tombstones it carried are the view's; the leader's
        mixture it carried is read back next. ``cadence``: the next commit is due from now
        (a commit in the background counted from when it was handed over)."""
        state = self._state
        assert state is not None
        took = time.perf_counter() - started
        if took > SLOW_COMMIT_S:
            logger.warning("worker %s: a commit took %.1f s (the broker slow or away)",
                           self.worker, took)  # fmt: skip
        with state.lock:
            self.commit_seconds += took
            self.committed.update(offsets)
            self.commits += 1
            if offsets:
                logger.info("worker %s committed %s", self.worker, _describe(offsets))
            self.last_saved_at = time.time()
            if cadence:
                self._last_records = state.stats.records
                self._last_time = time.monotonic()
            # committed: the tombstones of the increments the head holds
            self.view.ingest([(k.encode(), None) for k in retired], own=True)
            if mixture is not None:  # committed: the chain goes on once it is read back
                self._unconfirmed = mixture

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


def _describe(offsets: dict[PositionKey, int]) -> str:
    return ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(offsets.items(), key=repr))
