"""The checkpoint protocol in one place: what the state is, when it is saved, the order save ->
commit, and what a resume restores.

The state is the model, the run's counters, the sizes of the file outputs, the join's pending
events and outcomes (``--join-key``) and, per source
position (a file or stdin, a Kafka topic partition), the first offset not yet processed. Sources
only read and commit; the coordinator decides when, and in which order:

1. flush the outputs (a checkpoint never claims output that was not written),
2. write the checkpoint atomically (temp file, fsync, rename),
3. commit the same positions to a :class:`~connectors.CommittingSource` (an offset is never
   committed before the model that learned it is saved).

A crash between any two steps is safe: on resume, the positions of the checkpoint win over
anything committed later (the Kafka source seeks to the larger of the two, which is the
checkpoint's since commits follow saves), and file outputs are cut back to the sizes the
checkpoint saw, so the records after it are learned and written again, once.

Per-partition state (the coming shared-model mode) extends :attr:`positions`: it is already keyed
by ``(topic, partition)`` and handed out per partition by :meth:`assigned`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from connectors import CommittingSource, PositionKey, Source
from stream_perceptron.checkpoint.inputs import change, identify, same_input
from stream_perceptron.checkpoint.store import (
    Checkpoint,
    file_size,
    load_checkpoint,
    save_checkpoint,
)
from stream_perceptron.errors import StreamPerceptronError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.paths import same_file
from stream_perceptron.stats import RunStats

if TYPE_CHECKING:  # the engine imports this module
    from stream_perceptron.engine.outputs import Outputs
    from stream_perceptron.join import PendingJoin

__all__ = ["CheckpointCoordinator", "InputChangedError", "RunState"]

logger = logging.getLogger(__name__)


class InputChangedError(StreamPerceptronError):
    """The file behind ``--input`` is not the one the checkpoint read (rotated, rewritten or
    cut shorter): skipping the lines the checkpoint learned would skip others (exit 2: the
    user chooses, ``--input-changed restart`` or ``--fresh``)."""

    exit_code = 2


@dataclass
class RunState:
    """What a checkpoint saves of a running engine, and the lock that makes it consistent."""

    learner: StreamClassifier
    stats: RunStats
    outputs: Outputs
    lock: threading.Lock
    #: ``--join-key``: the pending events and outcomes, saved with the model they wait on
    join: PendingJoin | None = None


class CheckpointCoordinator:
    """Saves checkpoints when due and commits positions after them.

    Parameters
    ----------
    path
        Checkpoint file (``None``: none is written; positions are still committed to a
        committing source at the end and on revocation).
    every
        Save after this many records since the last save.
    interval
        Save after this many seconds since the last save; whichever of the two comes first.
    positions
        First offset not yet processed, per source position, from a restored checkpoint;
        records before it are skipped.

    Examples
    --------
    >>> coordinator = CheckpointCoordinator("model.json", every=100)
    >>> coordinator.due(records=99, now=0.0), coordinator.due(records=100, now=0.0)
    (False, True)

    """

    def __init__(
        self,
        path: str | None = None,
        *,
        every: int | None = None,
        interval: float | None = None,
        positions: dict[PositionKey, int] | None = None,
    ) -> None:
        self.path = path
        self.every = every
        self.interval = interval
        # Updated by the engine as it goes: the first offset not yet processed, per position.
        self.positions: dict[PositionKey, int] = dict(positions or {})
        # Where the restored model left each position: records before it are skipped.
        self.resume_from: dict[PositionKey, int] = dict(self.positions)
        # Input files to identify in each checkpoint: source name -> path.
        self.inputs: dict[str, str] = {}
        self.last_saved_at: float | None = None  # wall-clock time of the last saved checkpoint
        self._last_records = 0
        self._last_time = time.monotonic()
        self._state: RunState | None = None
        self._committer: CommittingSource | None = None

    # -- resume --------------------------------------------------------------------------------
    @classmethod
    def resume(
        cls,
        path: str,
        *,
        source: str | None,
        every: int | None = None,
        interval: float | None = None,
        restart_changed: bool = False,
    ) -> tuple[CheckpointCoordinator, Checkpoint | None]:
        """A coordinator that continues the checkpoint at ``path`` (if it exists yet).

        ``source`` says which saved positions still hold: ``None`` for a partitioned source
        (Kafka: every topic partition), a file's name (that file's lines already learned are
        skipped), or ``"stdin"`` (a pipe cannot be re-read: nothing is skipped). A file is
        found by what it is (device and inode, or resolved path), not by its spelling; when
        what it holds changed (shorter, or other first bytes), :class:`InputChangedError` is
        raised, unless ``restart_changed``: then it is read from its first line.
        """
        if not os.path.exists(path):
            logger.warning("no checkpoint at %s yet: starting a new model", path)
            return cls(path, every=every, interval=interval), None
        checkpoint = load_checkpoint(path)
        saved = checkpoint.next_offsets
        if source is None:
            positions = {k: v for k, v in saved.items() if k[1] is not None}
            where = "Kafka partitions resume at " + _describe(positions)
        elif source != "stdin":
            skip = _file_position(checkpoint, source, restart_changed)
            positions = {(source, None): skip} if skip else {}
            where = f"skipping the first {skip} lines of {source}"
        else:
            positions = {}
            where = "stdin is read from its start (nothing is skipped)"
        model = checkpoint.model
        logger.warning(
            "resuming from %s: %s after %d examples; %s", path, model, model.n_seen, where
        )
        coordinator = cls(path, every=every, interval=interval, positions=positions)
        return coordinator, checkpoint

    @staticmethod
    def cut_outputs(paths: list[str], checkpoint: Checkpoint | None) -> None:
        """Cut the regular-file outputs ``paths`` back to the sizes the checkpoint saw (creating
        them): what was written after it is written again by the resumed run. Without a
        checkpoint (a run that crashed before its first) they start empty."""
        sizes = checkpoint.outputs if checkpoint is not None else {}
        for path in paths:
            # Matched by what the file is, not by how its path is spelled (./out, out, a link).
            size = next((n for saved, n in sizes.items() if same_file(saved, path)), 0)
            with open(path, "ab") as f:
                f.truncate(size)

    # -- wiring --------------------------------------------------------------------------------
    def attach(self, state: RunState) -> None:
        """What to save: the engine's model, counters and outputs, under its lock."""
        self._state = state

    def bind(self, source: Source) -> None:
        """The source of the run: positions are committed to it when it is a committing one."""
        self._committer = source if isinstance(source, CommittingSource) else None

    # -- when ----------------------------------------------------------------------------------
    def due(self, records: int, now: float | None = None) -> bool:
        """Whether a checkpoint is due after ``records`` records in all."""
        if self.path is None:
            return False
        if self.every and records - self._last_records >= self.every:
            return True
        now = time.monotonic() if now is None else now
        return self.interval is not None and now - self._last_time >= self.interval

    #: Told per input partition how many examples were learned and how many were mistakes
    #: (``None``: nothing to count; shared-model mode's coordinator counts them).
    count_partition: Callable[[PositionKey, int, int], None] | None = None

    @property
    def batch_limit(self) -> int | None:
        """At most how many records the engine hands over between two ``after_batch`` calls
        (``None``: a source's batch whole, as a file checkpoint needs no finer cadence)."""
        return None

    def after_batch(self, records: int) -> None:
        """Called by the engine between batches: save when due."""
        if self.due(records):
            self.save()

    def idle(self) -> None:
        """The source has nothing new for now: save if due and records came since the last
        save (so an interval checkpoint also covers the last batches of an idle stream)."""
        state = self._state
        if state is not None and state.stats.records > self._last_records:
            self.after_batch(state.stats.records)

    def hold_at_end(self) -> bool:
        """Whether a source read to its end (``--exit-at-end``) stays for this coordinator's
        timed work: never, for a worker that only checkpoints its own partitions."""
        return False

    def finish(self) -> None:
        """The run ends (done, stopped or failed): flush, and save and commit what was done."""
        state = self._state
        if state is None:
            return
        if self.path is not None or self._committer is not None:
            self.save()
        else:
            state.outputs.flush()

    # -- partitioned sources -------------------------------------------------------------------
    def assigned(self, partitions: list[PositionKey]) -> dict[PositionKey, int]:
        """Where to resume newly assigned partitions: the offsets this model has learned to."""
        return {p: self.positions[p] for p in partitions if p in self.positions}

    def revoked(self, partitions: list[PositionKey]) -> None:
        """Partitions are about to go to another consumer: save and commit first."""
        logger.info("partitions revoked: %s; checkpointing before giving them up", partitions)
        self.save()

    # -- how -----------------------------------------------------------------------------------
    def save(self) -> None:
        """Flush the outputs, write the checkpoint atomically, then commit the positions."""
        state = self._state
        if state is None:
            raise RuntimeError("CheckpointCoordinator.save before attach()")
        with state.lock:
            state.outputs.flush()
            if self.path is not None:
                checkpoint = Checkpoint(
                    model=state.learner,
                    next_offsets=self.positions,
                    stats=state.stats.get_state(),
                    outputs={
                        os.path.realpath(path): file_size(path)
                        for path in state.outputs.paths.values()
                    },
                    inputs={
                        name: identity
                        for name, path in self.inputs.items()
                        if (identity := identify(path)) is not None
                    },
                    join=None if state.join is None else state.join.get_state(),
                )
                save_checkpoint(self.path, checkpoint)
                self.last_saved_at = time.time()
            self._last_records = state.stats.records
            self._last_time = time.monotonic()
            offsets = dict(self.positions)
        if self._committer is not None and offsets:
            self._committer.commit(offsets)
        logger.debug("checkpoint at %d records", state.stats.records)


def _file_position(checkpoint: Checkpoint, source: str, restart_changed: bool) -> int:
    """The lines of the input file ``source`` the checkpoint learned (0: none, or another file)."""
    saved = checkpoint.next_offsets
    current = identify(source)
    if current is None:  # a FIFO or device: known by its name only
        return saved.get((source, None), 0)
    name = next(
        (n for n, identity in checkpoint.inputs.items() if same_input(identity, current)), None
    )
    if name is None and not checkpoint.inputs:  # a version 1 checkpoint: the same file
        name = next((s for s, p in saved if p is None and same_file(s, source)), None)
    skip = 0 if name is None else saved.get((name, None), 0)
    if name is None:
        others = [s for s, p in saved if p is None and s != "stdin"]
        if others:
            logger.warning(
                "--input %s is not the file the checkpoint read (%s): it is read from its "
                "first line", source, ", ".join(others),
            )  # fmt: skip
        return 0
    why = change(checkpoint.inputs[name], source) if name in checkpoint.inputs else None
    if why is None or skip == 0:
        return skip
    if not restart_changed:
        raise InputChangedError(
            f"--input {source} is not what the checkpoint read ({skip} lines of it): {why}. "
            "Give --input-changed restart to learn it from its first line with the "
            "checkpoint's model, or --fresh to start a new model"
        )
    logger.warning(
        "--input %s changed since the checkpoint (%s): it is read from its first line", source, why
    )
    return 0


def _describe(offsets: dict[PositionKey, int]) -> str:
    return ", ".join(f"{t}[{p}]@{o}" for (t, p), o in sorted(offsets.items())) or "(none saved)"
