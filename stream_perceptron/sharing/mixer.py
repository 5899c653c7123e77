"""Shared-model mode's mixing: the leader folds the increments no mixture holds into the next
mixture; every worker publishes its increment and moves onto a newer mixture (its own
running average kept exact, see docs/ARCHITECTURE.md).

The chain is the model topic's order: of two mixtures of one version (two leaders around a
rebalance, one not yet seeing the other's open transaction), the first in the log is the
chain's for every reader, its writer included, and a mixture's increments are deleted only
once it was read back as the head; so a second mixture, refused as stale, loses nothing.
"""

from __future__ import annotations

import logging
import time

from connectors import ConnectorError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.sharing import Increment, MixError, Mixture, divergence
from stream_perceptron.sharing.coordinator_base import (
    AROUND_COMMIT_STABLE_WAIT_S,
    SharedCoordinatorBase,
)
from stream_perceptron.sharing.increments import (
    Form,
    form,
    history,
    increment,
    to_state,
    translate,
    with_history,
)
from stream_perceptron.sharing.records import increment_key
from stream_perceptron.sharing.states import adopt, shared_state
from stream_perceptron.sharing.view import ModelView

__all__ = ["SharedMixing", "held_keys"]

logger = logging.getLogger(__name__)

#: how long the leader's last commit waits to read its last mixture back (its transaction is
#: committed: the broker marks it in the log within milliseconds)
READ_BACK_WAIT_S = 5.0


class SharedMixing(SharedCoordinatorBase):
    """Publishing increments, making mixtures, moving onto them."""

    def _try_read_log(self) -> bool:
        """Read the model topic (the leader, before its commit: what the others' open
        transactions hold is mixed next time); False (logged) when the broker cannot be
        reached."""
        try:
            self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
            if self._final:  # the last commit mixes what is fresh: on its last mixture, read back
                self._read_back()
        except ConnectorError as e:
            logger.warning("worker %s did not read the model topic: %s", self.worker, e)
            return False
        return True

    def _read_back(self) -> None:
        """Read the model topic until the leader's last mixture is read back (up to
        :data:`READ_BACK_WAIT_S`): the broker marks a transaction committed in the log just
        after its commit returns."""
        deadline = time.monotonic() + READ_BACK_WAIT_S
        with self.timeline.phase("wait"):  # its reads are reads
            while not self._chain_read() and time.monotonic() < deadline:
                time.sleep(0.01)
                self._read_log(AROUND_COMMIT_STABLE_WAIT_S)

    def _publish(self, learner: StreamClassifier) -> None:
        """This worker's increment since its last one, into the open transaction."""
        with self.timeline.phase("increment"):
            self._publish_step(learner)

    def _publish_step(self, learner: StreamClassifier) -> None:
        assert self._published is not None
        timeline = self.timeline
        with timeline.detail("increment_get_state"):
            now = shared_state(learner)
        with timeline.detail("increment_diff"):
            step = increment(now, self._published, [self._step(i) for i in self._pending])
        if not step.t:
            return
        self._seq += 1
        meta = {k: v for k, v in now.items() if k not in _WEIGHTS}
        with timeline.detail("increment_diff"):
            record = Increment(self.worker, self._seq, self.version, step.encode(), meta)
            encoded = record.encode()
        self._send(record.key, encoded)
        self._pending.append(record)
        self._decoded[record.seq] = step
        self._published = form(now)
        if self._anchor is not None:
            self._anchor, self._unpublished = self._published, Form(0.0, {})

    def _chain_read(self) -> bool:
        """Whether the leader's last mixture has been read back from the model topic (or it
        made none since it read the head): only then does it know which mixture of that
        version came first in the log, the one every reader takes (another leader's, when
        two wrote one, as around a rebalance), and it mixes on from that one."""
        made = self._unconfirmed
        if made is None:
            return True
        head = self.view.mixture
        if head is None or head.version < made.version:
            return False
        if self.view.heads.get(made.version) != (made.worker, made.mixed_at):
            logger.warning(
                "worker %s: another worker's mixture %d came first in the model topic, not "
                "its own: mixing on from the chain's (the increments only its own held are "
                "still there, and are mixed next)", self.worker, made.version,
            )  # fmt: skip
        self._unconfirmed = None
        return True

    def _retire_held(self) -> list[str]:
        """Tombstones, into the open transaction, for the increments the head holds. Only a
        mixture read back from the log (the first of its version there, the one every reader
        takes) lets its increments go: were a mixture's tombstones sent with it, a second
        leader's mixture of the same version, written after the first, would delete the
        increments only it held, and every reader, refusing it as stale, would lose them.

        While a stale mixture was read after the head, none: the log's last mixture record,
        the one compaction keeps, is that stale one. The head is written again instead (read
        back, it is the last again; every reader knows it, so none refuses it). The keys sent
        are returned."""
        head = self.view.mixture
        if head is None:
            return []
        if self.view.stale_after_head:
            self._send(head.key, head.encode())
            return []
        keys = held_keys(head, self.view)
        for key in keys:
            self._send(key, None)
        return keys

    def _next_mixture(self) -> Mixture | None:
        """The leader's next mixture, into the open transaction, when one is due and its last
        one was read back: every increment the newest mixture lacks, this worker's own in this
        transaction included, folded in."""
        started = time.perf_counter()
        try:
            with self.timeline.phase("fold"):
                return self._fold()
        finally:
            self.mix_seconds += time.perf_counter() - started

    def _fold(self) -> Mixture | None:
        """:meth:`_next_mixture`'s work (timed as the ``fold`` phase)."""
        view = self.view  # read just before the transaction began
        if not self._chain_read():
            return None
        for own in self._pending:  # the one in this transaction is not in the log yet
            view.increments.setdefault(self.worker, {})[own.seq] = own
        current = view.mixture
        if current is None:  # the chain starts from the fresh model: mixture 0
            assert self._base is not None
            current = Mixture(0, self._base, self.worker)
            if not self.mix_due(view.fresh()):
                self._send(current.key, current.encode())
                return current
        elif not self.mix_due(view.fresh()):
            return None
        try:
            folded = view.folded(start=current.state)
        except MixError as e:
            logger.error("not mixing: %s", e)
            return None
        assert folded is not None
        mixed, fresh, step = folded
        included = {**current.included, **{w: s[-1].seq for w, s in fresh.items()}}
        mixture = Mixture(current.version + 1, mixed, self.worker, included=included,
                          step=step.encode())  # fmt: skip
        self._send(mixture.key, mixture.encode())
        self._last_mix_time = time.monotonic()
        logger.info("worker %s mixed %d increments of %d workers into version %d",
                    self.worker, sum(map(len, fresh.values())), len(fresh),
                    mixture.version)  # fmt: skip
        return mixture

    def mix(self) -> bool:
        """Read the model topic and move onto a newer mixture if there is one; True if the
        model moved. The leader too moves onto its own mixtures only as read back: the log's
        order, not the order of commits, says which mixture of a version is the chain's."""
        started = time.perf_counter()
        try:
            self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
            state = self._state
            assert state is not None
            with state.lock:
                return self._move_onto_head(state.learner)
        finally:
            self.mix_seconds += time.perf_counter() - started

    def _move_onto_head(self, learner: StreamClassifier) -> bool:
        """Move onto the newest mixture read, if newer than the model's (the state's lock
        held); True if it moved."""
        mixture = self.view.mixture
        if mixture is None or mixture.version <= self.version:
            return False
        with self.timeline.phase("move"):
            self._move_onto(learner, mixture)
        return True

    def _move_onto(self, learner: StreamClassifier, mixture: Mixture) -> None:
        """The model becomes ``mixture`` plus what this worker learned that it does not hold."""
        assert self._base is not None and self._published is not None
        holds = mixture.included.get(self.worker, 0)
        held = [i for i in self._pending if i.seq <= holds]
        shift = [(1.0, form(mixture.state)), (-1.0, form(self._base))]
        shift += [(-1.0, self._step(i)) for i in held]
        timeline = self.timeline
        with timeline.detail("move_get_state"):
            local = shared_state(learner)
        unpublished = local["n_seen"] - int(round(self._published.t))
        started = time.perf_counter()
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
        timeline.add_detail("move_translate", time.perf_counter() - started)
        self.divergence = divergence(local, moved)
        with timeline.detail("move_adopt"):
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


#: the parts of a learner state an increment's ``meta`` leaves out
_WEIGHTS = frozenset({"weights", "bias", "avg_weights_acc", "avg_bias_acc", "classes"})


def held_keys(mixture: Mixture, view: ModelView) -> list[str]:
    """The keys of the increments in ``view`` that ``mixture`` holds."""
    return [
        increment_key(w, q) for w, steps in view.increments.items() for q in steps
        if q <= mixture.included.get(w, 0)
    ]  # fmt: skip
