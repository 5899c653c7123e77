"""Shared-model mode's cadence: when a worker commits (its share of ``--mix-every``, the
interval), when the leader mixes, and the leader lingering at the end for the others.
"""

from __future__ import annotations

import logging
import time

from connectors import ConnectorError
from stream_perceptron.sharing.coordinator_base import AROUND_COMMIT_STABLE_WAIT_S
from stream_perceptron.sharing.mixer import SharedMixing

__all__ = ["SharedCadence"]

logger = logging.getLogger(__name__)

#: the mixer, read to the end of its partitions (``--exit-at-end``), stays while another
#: worker's increment came within this many seconds (at least; twice the commit interval
#: when that is longer): the others commit at least once an interval while they learn
LINGER_S = 2.0


class SharedCadence(SharedMixing):
    """When to commit, to mix, to stop."""

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
        """The input partitions known to this worker: its own, those the model topic has a
        record of and those its source listed at its assignment (the group's share of a worker is
        its share of them). Without the source's list a worker starting on an empty model topic
        took its partitions for all of them and committed once a whole mixing period: soak 33
        run 2, the pulled model 3.2 points below one sequential model (bound 3); replayed in
        one process over 20 seeds 2.7 points on average, 3.3 at worst, and 2.3, 2.9 with it."""
        topics = {t for t, _ in self.owned}
        known = self.view.partitions.keys() | self.input_partitions
        return len(self.owned | {k for k in known if k[0] in topics})

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

    def after_batch(self, records: int) -> None:
        """Commit when due, or when the leader finds a mix due (in the background, when the
        output can: the engine learns on while it commits)."""
        self.land_if_done()
        if self.due(records) or self._mix_waiting():
            self.save(background=True)

    def _mix_waiting(self) -> bool:
        """The leader, at most every ``peek_s`` seconds between its commits: whether the
        others' committed increments make a mix due now. Its own commits come after its own
        records, so when its partitions hold less of the stream than the others' (a worker
        that read alone at the start took some of them) it would mix less often than
        ``mix_every`` says."""
        if not self.mix_every or self.peek_s is None or not self.is_leader:
            return False
        now = time.monotonic()
        # counted from the end of the last read of the model topic, a commit's included (see
        # _read_log): a read can wait for the broker longer than peek_s, and the engine hands
        # over a block a partition, several a poll: from a peek's start, every block would
        # read the log
        if now - self._last_peek < self.peek_s:
            return False
        try:
            self._read_log(AROUND_COMMIT_STABLE_WAIT_S)
        except ConnectorError as e:  # the commit, when due, says so
            logger.debug("worker %s did not read the model topic: %s", self.worker, e)
            return False
        return self._chain_read() and self.mix_due(self.view.fresh(), now)

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
            if holding:  # waiting for the others, its commits and reads excluded
                self.timeline.open_span("wait")
            elif self.timeline.span == "wait":
                self.timeline.close_span()
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
        learned meanwhile), so does the owner of a partition whose last record read is a
        replay (its record written again is the last again: compaction keeps that one), and
        any other worker moves onto a newer mixture."""
        state = self._state
        if state is None:
            return
        self.land_if_done()
        if state.stats.records > self._last_records:
            self.after_batch(state.stats.records)
        elif self._mix_waiting():
            self.save(background=True)
        elif self.is_leader and self._unconfirmed is None and self.view.mixture is not None \
                and self.view.mixture.version > self.version:
            # its last look read back the mixture its last commit made (a commit reads
            # before its transaction): nothing learned since, the model moves onto it now
            with state.lock:
                self._move_onto_head(state.learner)
        elif self.due(state.stats.records):
            if self.is_leader or self.view.replayed_partitions & self.owned:
                self.save(background=True)
            else:
                self._last_time = time.monotonic()
                try:
                    self.mix()
                except ConnectorError as e:
                    logger.warning("worker %s did not read the model topic: %s", self.worker, e)
