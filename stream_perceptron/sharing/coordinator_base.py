"""Shared-model mode's coordinator, its ground floor: what one worker keeps (the view of the
model topic, its increments, counts and timers), per-partition counting, reading the model
topic, sending to it, and when a mix is due.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from connectors import PositionKey, Source
from connectors.kafka.background_commits import BackgroundCommits
from connectors.kafka.model_log import ModelLog
from connectors.kafka.transactions import (
    MAX_MESSAGE_BYTES,
    GroupMember,
    PartitionCounter,
    TransactionalOutput,
)
from stream_perceptron.checkpoint import CheckpointCoordinator
from stream_perceptron.sharing import Increment, Mixture
from stream_perceptron.sharing.increments import Form, credited, form, history
from stream_perceptron.sharing.records import MIXTURE_KEY
from stream_perceptron.sharing.states import SharedModelTooLarge
from stream_perceptron.sharing.timeline import Timeline
from stream_perceptron.sharing.view import ModelView

if TYPE_CHECKING:
    from stream_perceptron.sharing.join_changelog import JoinChangelog

__all__ = ["InFlight", "SharedCoordinatorBase"]

logger = logging.getLogger(__name__)

#: how long the reads around a commit (each worker's one before its transaction, the leader's
#: looks between its commits) wait for others' open transactions: not at all. What is committed is
#: a prefix of each worker's records (a worker's transactions are sequential), so the leader
#: folds what it can read and the rest at its next commit, and a worker moves onto the newest
#: mixture it can read, a newer one next time. Waiting (the leader up to 2 s, the others up to
#: 25 s) serialised the workers once they committed often: each one's read waited for the
#: others' transactions (row 11d, mixing every 1k: 2k records/s). Restores still wait (a
#: partition's former owner may be committing its last records).
AROUND_COMMIT_STABLE_WAIT_S = 0.0

#: how often, at most, the leader reads the model topic between its commits to see whether
#: the others' increments make a mix due
PEEK_S = 0.05


@dataclass
class InFlight:
    """A transaction committing in the background, and what its landing does."""

    output: BackgroundCommits
    offsets: dict[PositionKey, int]
    group: Any
    mixture: Mixture | None
    retired: list[str]
    started: float


class SharedCoordinatorBase(CheckpointCoordinator):
    """What the shared-model coordinator keeps, and its reads and sends (see
    :class:`~stream_perceptron.sharing.coordinator.SharedModelCoordinator`)."""

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
        #: the input topics' partitions, as the source last told them (at an assignment)
        self.input_partitions: frozenset[PositionKey] = frozenset()
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
        self._last_peek = 0.0  # the last read of the model topic (the leader's look for a mix)
        self._others_seq: dict[str, int] = {}  # the other workers' newest increments seen
        self._others_at = 0.0  # when one of them was first seen (monotonic)
        self._holding = False  # the mixer stays at the end of its partitions for the others
        self._final = False  # in the last commit (finish): the leader mixes whatever is fresh
        #: the leader's last mixture, committed and not yet read back from the model topic: it
        #: mixes again only once the log shows which mixture of that version came first
        self._unconfirmed: Mixture | None = None
        #: the transaction committing in the background (``save(background=True)``), if any
        self._in_flight: InFlight | None = None
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
        #: ``--join-key`` with ``--labels-topic``: the tasks' pending stores and their changelog
        self.join_log: JoinChangelog | None = None
        self.outage_limit = 240.0  # seconds (below the consumers' max.poll.interval.ms)
        self.max_record_bytes = MAX_MESSAGE_BYTES  # the model topic's messages, at most
        self.timeline = Timeline()  # where this worker's time goes, by phase

    # -- the commit (SharedModelCoordinator) ----------------------------------------------------
    def save(self, background: bool = False) -> None:
        """One transaction (``background``: committed while the engine learns on)."""
        raise NotImplementedError

    def land_if_done(self) -> None:
        """Land the commit in flight if it has ended."""
        raise NotImplementedError

    # -- wiring --------------------------------------------------------------------------------
    def bind(self, source: Source) -> None:
        super().bind(source)
        self._group = source.group_metadata if isinstance(source, GroupMember) else None
        if isinstance(source, PartitionCounter):
            source.tell_partition_counts(self._note_partition_counts)

    def _note_partition_counts(self, counts: dict[str, int]) -> None:
        """The input topics' sizes: a worker's share of a mixing period is its share of them
        from its first commit (the model topic names the others' partitions only once they
        have committed)."""
        self.input_partitions = frozenset((t, p) for t, n in counts.items() for p in range(n))

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

    def _read_log(self, stable_wait_s: float | None = None) -> None:
        """Ingest what the model topic has that was not read yet; ``stable_wait_s``: how long
        to wait for others' open transactions (default: the log's own, for restores)."""
        # a restore's reads are the restore's
        timed = self.timeline.current() != "restore"
        try:
            with self.timeline.phase("read") if timed else nullcontext():
                self._read_new(stable_wait_s)
        finally:
            # a read, whatever made it, is the leader's look for a mix due (see _mix_waiting)
            self._last_peek = time.monotonic()

    def _read_new(self, stable_wait_s: float | None) -> None:
        fetched = getattr(self.log, "read_fetched", None)
        if (stable_wait_s is not None and stable_wait_s <= 0 and fetched is not None
                and self._unconfirmed is None):  # fmt: skip
            # not waiting for open transactions: what the reader's fetches brought in (a
            # prefix of the log, as a read that asks the broker for the end is). Not while
            # the leader waits to read its last mixture back: its fetches brought that in
            # only after many commits when they came every few ms (one worker draining 60k
            # records in 0.4 s read its mixture back 18 commits later, 5 mixtures of 30 due);
            # asked for the end, it reads it back at its next commit
            self.view.ingest(fetched())
            self._note_others()
            return
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
        with self.timeline.phase("transaction"):
            raw = key.encode()
            signer = self.view.signer
            headers = signer.headers(raw, value) if signer is not None else None
            self.output.send(self.topic, value, raw, headers=headers)

    def close(self) -> None:
        """Close the transactions (aborting anything uncommitted) and the model-topic reader;
        log where the time went."""
        self.timeline.end()
        background = (f" (in the background: {self.output.waited_s:.2f} s waited for them)"
                      if isinstance(self.output, BackgroundCommits) else "")  # fmt: skip
        logger.info(
            "worker %s: %d transactions in %.2f s%s, %d mixes in %.2f s, %d partition restores "
            "in %.2f s; timeline: %s", self.worker, self.commits, self.commit_seconds, background,
            self.mixes, self.mix_seconds, self.restores, self.restore_seconds,
            self.timeline.describe(),
        )  # fmt: skip
        try:
            self.output.close()
        finally:
            self.log.close()

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
