"""The prequential loop: read, parse, predict, learn, hand the outcome on, checkpoint when due.

The engine joins a source, a parser, a learner and sinks. It knows sources and sinks only
through the ``connectors`` interfaces, so stdin, files and Kafka plug in alike; what follows
from each record is :class:`~stream_perceptron.engine.outcomes.Outcomes`' job, when to save and
commit the :class:`~stream_perceptron.checkpoint.CheckpointCoordinator`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from connectors import (
    BlockSource,
    LineBlock,
    MessageBlock,
    MessageBlockSource,
    PartitionedSource,
    PositionKey,
    Record,
    Source,
)
from stream_perceptron.checkpoint import CheckpointCoordinator, RunState
from stream_perceptron.engine.blocks import BlockPath, RecordRun, Run, runs_of
from stream_perceptron.engine.outcomes import EngineError, Outcomes
from stream_perceptron.engine.outputs import Outputs
from stream_perceptron.engine.window import RecentWindow
from stream_perceptron.errors import LabelError, RecordError
from stream_perceptron.formats import Parser
from stream_perceptron.formats.base import UNPARSEABLE, DenseParser, KeyedParser
from stream_perceptron.formats.delimited import CsvHeaderError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.stats import RunStats

if TYPE_CHECKING:  # imported where a join is asked for: 2 ms of every command's start else
    from stream_perceptron.engine.delayed import DelayedLabels
    from stream_perceptron.engine.delayed_blocks import JoinBlockPath
    from stream_perceptron.join import PendingJoin
    from stream_perceptron.join.tasks import JoinTasks

# A block the block path does not take goes the per-record way in batches of this many lines.
BLOCK_BATCH_SIZE = 256

__all__ = ["Engine"]

logger = logging.getLogger(__name__)


class _Interrupted(Exception):
    """Raised by a stop request that arrives while the engine waits for input."""


class Engine:
    """Runs a learner prequentially over a source.

    Each record is parsed; a labelled example is predicted, then learned from (the prediction
    made before learning decides whether it was a mistake); an unlabelled one is only
    predicted. A bad record is counted by reason, dead-lettered and skipped, leaving the model
    untouched, or stops the run when ``on_error="fail"``.

    Parameters
    ----------
    learner
        Any learner of :mod:`stream_perceptron.learners`.
    parser
        The record format.
    outputs
        Prediction and dead-letter sinks.
    coordinator
        Checkpoints and commits, and the positions a resumed model has learned up to (records
        before them are skipped). Default: no checkpoint file, positions from the start.
    on_error
        ``"skip"`` or ``"fail"``.
    stats
        Counters (pass a restored one to continue a resumed run's numbers).
    on_batch
        Called after every batch with the batch's processing time in seconds.
    lock
        Held while a batch is processed and a checkpoint written; readers of the model
        (metrics scrapes) take it too.
    keep_recent
        How many of the last labelled examples to keep for :meth:`recent_window` (0: none).
    dense
        Let blocks of plain dense lines go through the learner's block learning
        (:mod:`stream_perceptron.engine.blocks`) when the learner and the parser can.
    join
        ``--join-key``: events kept until their outcomes come (the parser must be a
        :class:`~stream_perceptron.formats.base.KeyedParser` with its key; see
        :mod:`stream_perceptron.engine.delayed`). Runs of keyed JSON lines go the join's block
        path (:mod:`stream_perceptron.engine.delayed_blocks`) when ``dense`` allows.
    join_tasks
        Shared-model mode's join: a store per partition task (:mod:`stream_perceptron.join.tasks`),
        by record (not with ``dense``).

    Examples
    --------
    >>> import json
    >>> from connectors import MemorySource, MemorySink
    >>> from stream_perceptron import Perceptron
    >>> from stream_perceptron.formats import make_parser
    >>> sink = MemorySink()
    >>> engine = Engine(Perceptron(), make_parser("csv"), Outputs(predictions=sink))
    >>> stats = engine.run(MemorySource([b"a,y", b"1,1", b"-1,0", b"2,", b"oops,1"]))
    >>> stats.learned, stats.unlabelled, stats.mistakes, dict(stats.invalid)
    (2, 1, 1, {'non_numeric_value': 1})
    >>> json.loads(sink.lines[2])
    {'position': {'source': 'memory', 'offset': 3}, 'prediction': 1}

    """

    def __init__(
        self,
        learner: StreamClassifier,
        parser: Parser,
        outputs: Outputs | None = None,
        *,
        coordinator: CheckpointCoordinator | None = None,
        on_error: str = "skip",
        stats: RunStats | None = None,
        on_batch: Callable[[float], None] | None = None,
        lock: threading.Lock | None = None,
        keep_recent: int = 0,
        dense: bool = True,
        join: PendingJoin | None = None,
        join_tasks: JoinTasks | None = None,
    ) -> None:
        self.learner = learner
        self.parser = parser
        self.outputs = outputs or Outputs()
        self.stats = stats or RunStats()
        self.on_batch = on_batch
        # Held while a batch is processed: a metrics scrape reads a consistent model.
        self.lock = lock or threading.Lock()
        labels = parser.label_cache if isinstance(parser, DenseParser) else None
        self.window = RecentWindow(keep_recent, labels) if keep_recent else None
        self.coordinator = coordinator or CheckpointCoordinator()
        self.outcomes = Outcomes(
            self.stats, self.outputs, self.window, on_error, self.coordinator.count_partition
        )
        self.delayed: DelayedLabels | None = None
        if join_tasks is not None and dense:
            raise ValueError("a join of partition tasks goes record by record (dense=False)")
        if join is None and join_tasks is not None:  # the run's own store is not used
            from stream_perceptron.join import PendingJoin

            join = PendingJoin(join_tasks.task_max_pending, join_tasks.label_wait,
                               join_tasks.by_time)  # fmt: skip
        if join is not None:
            from stream_perceptron.engine.delayed import DelayedLabels

            key = getattr(parser, "key", None)
            if not isinstance(parser, KeyedParser) or key is None:
                raise ValueError("a join needs a parser with a join key (csv or jsonl)")
            self.delayed = DelayedLabels(join, self.stats, self.outcomes, key, join_tasks)
        self.coordinator.attach(
            RunState(learner, self.stats, self.outputs, self.lock, join)
        )
        self._stop = False
        self._waiting_for_input = False
        # a source that polls (Kafka) looks at the stop between its polls: an exception raised
        # by the signal handler could surface in whatever the source runs while the engine
        # waits on it (a shared-model commit: a transaction failed by a TypeError from inside
        # confluent-kafka's produce, which checks for signals); only a blocking read is
        # interrupted so
        self._polls_stop = False
        self._blocks: BlockPath | JoinBlockPath | None = None
        resume_from = self.coordinator.resume_from
        if dense and self.delayed is not None:
            from stream_perceptron.engine.delayed_blocks import JoinBlockPath

            self._blocks = JoinBlockPath.of(learner, parser, self.delayed, resume_from)
        elif dense:
            self._blocks = BlockPath.of(learner, parser, self.outcomes, resume_from)

    @property
    def next_offsets(self) -> dict[PositionKey, int]:
        """Per source position, the first offset not yet processed."""
        return self.coordinator.positions

    @property
    def on_error(self) -> str:
        return self.outcomes.on_error

    def recent_window(self) -> list[tuple[Any, Any]]:
        """The last labelled examples, oldest first (call with the lock held)."""
        return self.window.examples() if self.window is not None else []

    # -- control -------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the loop to stop after the current batch (safe from a signal handler).

        Batches end between messages, so a stop never splits a multi-record message.
        """
        self._stop = True
        if self._waiting_for_input and not self._polls_stop:
            raise _Interrupted

    # -- the loop ------------------------------------------------------------------------------
    def run(self, source: Source) -> RunStats:
        """Process the source to its end (or until stopped); always checkpoint at the end."""
        coordinator = self.coordinator
        coordinator.bind(source)
        stop_when = getattr(source, "stop_when", None)
        if stop_when is not None:
            stop_when(lambda: self._stop)
            self._polls_stop = True
        ticker = self._idle_ticker(source)
        try:
            for unit in self._batches(source):
                started = time.perf_counter()
                if not self.stats.records_this_run:
                    self.stats.started = time.monotonic()  # rates count from the first record
                with self.lock:
                    self._process_unit(unit)
                if self.on_batch is not None:
                    self.on_batch(time.perf_counter() - started)
                if self._stop:
                    break
                coordinator.after_batch(self.stats.records)
        finally:
            if ticker is not None:
                ticker.set()
            coordinator.finish()
        return self.stats

    def _idle_ticker(self, source: Source) -> threading.Event | None:
        """An interval checkpoint also while a line source blocks in a read (stdin with nothing
        to say): a thread asks the coordinator while the loop waits for input; the save takes
        the engine's lock, so it never sees half a batch. (A Kafka source calls ``idle()``
        itself between polls.) Returns the event that stops the thread."""
        if isinstance(source, PartitionedSource):
            return None  # Kafka: its poll loop calls idle()
        interval = self.coordinator.interval
        if interval is None or self.coordinator.path is None:
            return None
        stop = threading.Event()
        tick = min(interval, 1.0) / 2

        def loop() -> None:
            while not stop.wait(tick):
                if self._waiting_for_input:
                    try:
                        self.coordinator.idle()
                    except Exception:  # the loop's own save at the end raises it again
                        logger.exception("an idle checkpoint failed")

        threading.Thread(target=loop, name="idle-checkpoint", daemon=True).start()
        return stop

    def _batches(self, source: Source) -> Iterator[list[Record] | LineBlock | MessageBlock]:
        # A line source can hand whole reads to the block path, without a record per line, and
        # a Kafka source each partition's messages of a poll, without a record per message.
        batches: Iterator[Any]
        if self._blocks is not None and self._blocks.takes_blocks and isinstance(
            source, BlockSource
        ):
            batches = source.blocks()
        elif self._blocks is not None and isinstance(source, MessageBlockSource):
            batches = source.message_blocks()
        else:
            batches = source.batches()
        while not self._stop:
            self._waiting_for_input = True
            try:
                if self._stop:
                    return
                batch = next(batches, None)
            except _Interrupted:
                logger.info("stop requested while waiting for input")
                return
            finally:
                self._waiting_for_input = False
            if batch is None:
                return
            limit = self.coordinator.batch_limit
            if limit and isinstance(batch, list) and len(batch) > limit:
                # the limit read again for every slice: a commit between two slices may change
                # it (shared mode: the worker's share once the group is known)
                yield from _slices(batch, self._slice_size(limit))
            elif limit and isinstance(batch, MessageBlock) and batch.count > limit:
                yield from _message_slices(batch, self._slice_size(limit))
            else:
                yield batch

    def _slice_size(self, first: int) -> Callable[[], int]:
        """The coordinator's batch limit, asked again for each slice (``first`` when it has
        none any more)."""
        return lambda: self.coordinator.batch_limit or first

    def _process_unit(self, unit: list[Record] | LineBlock | MessageBlock) -> None:
        if self._blocks is None:  # only batches of records come (see _batches)
            assert isinstance(unit, list)
            self._process_records(unit)
            return
        for run in runs_of(unit):
            self._process_run(run, whole=True)

    def _process_run(self, run: Run, whole: bool) -> None:
        """One run, whole by the block path if it can be, else the per-record way; a run that
        is not plain (a bad record, lines to skip on resume) in slices of BLOCK_BATCH_SIZE,
        each whole if it can be."""
        blocks = self._blocks
        assert blocks is not None
        if self.parser.header_pending and run.count > 1:
            # The header alone the per-record way, then the rest whole (the first read or
            # Kafka poll may hold a whole file or topic).
            head, run = run.split_first()
            self._process_records(head)
        if blocks.learn(run):
            self.coordinator.positions[run.key] = run.end
            return
        records = run.records()
        if whole and len(records) > BLOCK_BATCH_SIZE:
            size = BLOCK_BATCH_SIZE
            for lo in range(0, len(records), size):
                self._process_run(RecordRun(records[lo : lo + size]), whole=False)
            return
        self._process_records(records)

    def _process_records(self, batch: list[Record]) -> None:
        """The per-record path: parse, predict (then learn when labelled), hand on."""
        parser = self.parser
        learner = self.learner
        outcomes = self.outcomes
        positions = self.coordinator.positions
        resume_from = self.coordinator.resume_from
        delayed = self.delayed
        first = batch[0].position
        key = (first.source, first.partition)
        skip_until = resume_from.get(key, 0)
        for record in batch:
            position = record.position
            if position.partition != key[1] or position.source != key[0]:
                key = (position.source, position.partition)
                skip_until = resume_from.get(key, 0)
            offset = position.offset
            if offset < skip_until:
                if parser.header_pending:  # a skipped CSV header is still the header
                    self._parse(record)
                continue
            positions[key] = offset + 1
            if record.error is not None:
                outcomes.bad(record, record.error, "the line is longer than --max-line-bytes")
                if delayed is not None:
                    delayed.passed(record)
                continue
            if delayed is not None:
                keyed = self._parse(record, keyed=True)
                if keyed is not None:
                    delayed.handle(record, learner, keyed[0], *keyed[1])
                else:
                    delayed.passed(record)
                continue
            example = self._parse(record)
            if example is None:
                continue
            x, y = example
            if y is None:
                outcomes.predicted(record, learner.predict_one(x))
                continue
            try:
                prediction = learner.predict_learn_one(x, y)
            except (LabelError, RecordError) as e:  # the model refused the example
                outcomes.refused(record, learner, y, e)
                continue
            outcomes.learned(record, x, y, prediction)

    def _parse(self, record: Record, keyed: bool = False) -> Any:
        try:
            if keyed:
                return self.parser.parse_keyed(record.value)  # type: ignore[attr-defined]
            return self.parser.parse(record.value)
        except CsvHeaderError as e:
            raise EngineError(f"{record.position}: {e.detail}") from None
        except RecordError as e:
            self.outcomes.bad(record, e.reason, e.detail)
            return None
        except (ValueError, ArithmeticError, RecursionError) as e:
            # A record no parser rule foresaw: still counted and kept, never the end of the run.
            logger.warning("record at %s could not be parsed: %r", record.position, e)
            self.outcomes.bad(record, UNPARSEABLE, f"{type(e).__name__}: {e}"[:500])
            return None


def _slices(batch: list[Record], limit: int | Callable[[], int]) -> Iterator[list[Record]]:
    """``batch`` in runs of about ``limit`` records (a callable: asked before each run), cut
    only where a message ends (the lines of one Kafka message share its position: a commit
    never splits a message)."""
    size = limit if callable(limit) else (lambda: limit)
    start = 0
    while len(batch) - start > (step := max(1, size())):
        cut = start + step
        while cut < len(batch) and batch[cut].position == batch[cut - 1].position:
            cut += 1
        if cut >= len(batch):
            break
        yield batch[start:cut]
        start = cut
    yield batch[start:]


def _message_slices(block: MessageBlock, limit: Callable[[], int]) -> Iterator[MessageBlock]:
    """``block`` in runs of about ``limit`` messages (asked before each run); its messages
    hold one record each, so any cut is between messages."""
    start, n = 0, block.count
    while start < n:
        end = min(n, start + max(1, limit()))
        if start == 0 and end == n:
            yield block
            return
        times = None if block.timestamps is None else block.timestamps[start:end]
        yield MessageBlock(
            block.topic, block.partition, block.values[start:end], block.offsets[start:end],
            block.keys[start:end], times,
        )  # fmt: skip
        start = end
