"""The prequential loop: parse, predict, emit, learn, count, checkpoint when due.

The engine joins a source, a parser, a learner and sinks. It knows sources and sinks only
through the ``connectors`` interface, so stdin, files and Kafka plug in alike.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import repeat
from typing import Any

from connectors import LineBlock, Record, Sink, Source
from stream_perceptron.checkpoint import Checkpoint, CheckpointPolicy, PositionKey, save_checkpoint
from stream_perceptron.errors import LabelError, RecordError, StreamPerceptronError
from stream_perceptron.formats import Parser
from stream_perceptron.formats.base import LABEL_OUTSIDE_ENCODING
from stream_perceptron.formats.delimited import CsvHeaderError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.stats import RunStats

# A block the dense path does not take goes the per-record way in batches of this many lines.
BLOCK_BATCH_SIZE = 256

__all__ = ["Engine", "EngineError", "BadRecordError", "LABEL_OUTSIDE_ENCODING"]

logger = logging.getLogger(__name__)


class EngineError(StreamPerceptronError):
    """The run cannot go on (unusable header, unreadable source, failed checkpoint)."""


class BadRecordError(EngineError):
    """A bad record under ``on_error="fail"``."""


class _Interrupted(Exception):
    """Raised by a stop request that arrives while the engine waits for input."""


@dataclass
class Outputs:
    """Where the engine writes: predictions, dead letters, each optional."""

    predictions: Sink | None = None
    dead_letters: Sink | None = None
    # Paths of file outputs, so a checkpoint can record their sizes (exactly-once on resume).
    paths: dict[str, str] = field(default_factory=dict)

    def flush(self) -> None:
        for sink in (self.predictions, self.dead_letters):
            if sink is not None:
                sink.flush()


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
    checkpoint
        When and where to save checkpoints (``None``: never).
    on_error
        ``"skip"`` or ``"fail"``.
    stats
        Counters (pass a restored one to continue a resumed run's numbers).
    next_offsets
        Per source position, the first offset not yet processed (from a checkpoint); records
        before it are skipped.
    on_batch
        Called after every batch with the batch's processing time in seconds.
    lock
        Held while a batch is processed and a checkpoint written; readers of the model
        (metrics scrapes) take it too.
    keep_recent
        How many of the last labelled examples to keep in ``recent_examples`` (0: none).
    dense
        Let batches of plain dense CSV records go through the exact vectorised path
        (:mod:`stream_perceptron.dense_batches`) when the learner supports it.

    Examples
    --------
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
        checkpoint: CheckpointPolicy | None = None,
        on_error: str = "skip",
        stats: RunStats | None = None,
        next_offsets: dict[PositionKey, int] | None = None,
        on_batch: Callable[[float], None] | None = None,
        lock: threading.Lock | None = None,
        keep_recent: int = 0,
        dense: bool = True,
    ) -> None:
        if on_error not in ("skip", "fail"):
            raise ValueError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
        self.learner = learner
        self.parser = parser
        self.outputs = outputs or Outputs()
        self.checkpoint = checkpoint
        self.on_error = on_error
        self.stats = stats or RunStats()
        self.next_offsets: dict[PositionKey, int] = dict(next_offsets or {})
        self._skip_before = dict(self.next_offsets)
        self.on_batch = on_batch
        # Held while a batch is processed: a metrics scrape reads a consistent model.
        self.lock = lock or threading.Lock()
        self.last_checkpoint_time: float | None = None
        # The last labelled examples, for the live margin metrics (only when asked for); the
        # dense path keeps an example as ((feature names, values array), label).
        self.recent_examples: deque[tuple[Any, Any]] | None = (
            deque(maxlen=keep_recent) if keep_recent else None
        )
        # Batches of the dense path not yet added to recent_examples: (names, rows, labels).
        self._recent_pending: deque[tuple[list, Any, list]] = deque()
        self._recent_pending_rows = 0
        self._stop = False
        self._waiting_for_input = False
        self._source: Source | None = None
        # Whole batches of plain dense records through the exact vectorised kernel.
        from stream_perceptron.dense_batches import DenseBatches

        self._dense = DenseBatches(self) if dense and DenseBatches.usable(self) else None

    # -- control -------------------------------------------------------------------------------
    def request_stop(self) -> None:
        """Ask the loop to stop after the current batch (safe from a signal handler).

        Batches end between messages, so a stop never splits a multi-record message.
        """
        self._stop = True
        if self._waiting_for_input:
            raise _Interrupted

    # -- the loop ------------------------------------------------------------------------------
    def run(self, source: Source) -> RunStats:
        """Process the source to its end (or until stopped); always checkpoint at the end."""
        self._source = source
        try:
            for unit in self._batches(source):
                started = time.perf_counter()
                if not self.stats.records_this_run:
                    self.stats.started = time.monotonic()  # rates count from the first record
                with self.lock:
                    if type(unit) is LineBlock:
                        self._process_block(unit)
                    else:
                        self._process(unit)
                if self.on_batch is not None:
                    self.on_batch(time.perf_counter() - started)
                if self._stop:
                    break
                if self.checkpoint is not None and self.checkpoint.due(self.stats.records):
                    self.save_checkpoint()
        finally:
            self.outputs.flush()
            if self.checkpoint is not None or hasattr(source, "commit"):
                self.save_checkpoint()
        return self.stats

    def _batches(self, source: Source) -> Iterator[list[Record] | LineBlock]:
        # A line source can hand whole reads to the dense path, without a record per line.
        blocks = getattr(source, "blocks", None)
        if self._dense is not None and blocks is not None and self._dense.takes_blocks:
            batches: Iterator[Any] = blocks()
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
            yield batch

    def _process_block(self, block: LineBlock) -> None:
        dense = self._dense
        if dense is not None and self.parser.header_pending and block.count > 1:
            # The header alone the per-record way, then the rest of the block whole.
            cut = block.data.index(b"\n") + 1
            self._process(LineBlock(block.data[:cut], block.source, block.start, 1).records())
            block = LineBlock(block.data[cut:], block.source, block.start + 1, block.count - 1)
        if dense is not None and dense.process_block(block):
            return
        records = block.records()
        size = BLOCK_BATCH_SIZE
        for lo in range(0, len(records), size):
            self._process(records[lo : lo + size])

    def _process(self, batch: list[Record]) -> None:
        dense = self._dense
        if dense is None:
            self._process_records(batch)
            return
        # The dense path takes one source and partition at a time (a Kafka batch has several).
        for run in _runs(batch):
            if not dense.process(run):
                self._process_records(run)

    def _process_records(self, batch: list[Record]) -> None:
        parser = self.parser
        learner = self.learner
        stats = self.stats
        predictions = self.outputs.predictions
        next_offsets = self.next_offsets
        skip_before = self._skip_before
        recent = self.recent_examples
        if self._recent_pending:
            self._flush_recent()
        first = batch[0].position
        key = (first.source, first.partition)
        skip_until = skip_before.get(key, 0)
        for record in batch:
            position = record.position
            if position.partition != key[1] or position.source != key[0]:
                key = (position.source, position.partition)
                skip_until = skip_before.get(key, 0)
            offset = position.offset
            if offset < skip_until:
                if parser.header_pending:  # a skipped CSV header is still the header
                    self._parse(record)
                continue
            next_offsets[key] = offset + 1
            if record.error is not None:
                self._bad(record, record.error, "the line is longer than --max-line-bytes")
                continue
            example = self._parse(record)
            if example is None:
                continue
            x, y = example
            if y is None:
                prediction = learner.predict_one(x)
                stats.count_unlabelled()
                if predictions is not None:
                    self._emit(record, prediction)
                continue
            try:
                prediction = learner.predict_learn_one(x, y)
            except LabelError as e:
                self._bad(record, LABEL_OUTSIDE_ENCODING, str(e))
                continue
            mistake = prediction != y
            stats.count_learned(mistake)
            if recent is not None:
                recent.append((x, y))
            if predictions is not None:
                self._emit(record, prediction, y, mistake)

    def _parse(self, record: Record) -> Any:
        try:
            return self.parser.parse(record.value)
        except CsvHeaderError as e:
            raise EngineError(f"{record.position}: {e.detail}") from None
        except RecordError as e:
            self._bad(record, e.reason, e.detail)
            return None

    def _bad(self, record: Record, reason: str, detail: str) -> None:
        self.stats.count_invalid(reason)
        sink = self.outputs.dead_letters
        send = getattr(sink, "send", None)
        if send is not None:  # a message sink: the original bytes, the reason in headers
            send(record.value, key=record.key, headers=_dead_letter_headers(record, reason, detail))
        elif sink is not None:
            entry: dict[str, Any] = {
                "position": record.position.to_dict(),
                "reason": reason,
                "detail": detail,
            }
            try:
                entry["record"] = record.value.decode("utf-8")
            except UnicodeDecodeError:
                entry["record_base64"] = base64.b64encode(record.value).decode("ascii")
            sink.write(json.dumps(entry).encode())
        if self.on_error == "fail":
            raise BadRecordError(f"bad record at {record.position}: {reason}: {detail}")
        logger.debug("bad record at %s: %s: %s", record.position, reason, detail)

    def _emit(self, record: Record, prediction: Any, y: Any = None, mistake: bool = False) -> None:
        position = record.position
        entry: dict[str, Any] = {"position": position.to_dict(), "prediction": prediction}
        if position.partition is not None:
            entry.update(
                topic=position.source, partition=position.partition, offset=position.offset
            )
        if y is not None:
            entry["label"] = y
            entry["mistake"] = mistake
        line = json.dumps(entry).encode()
        sink = self.outputs.predictions
        send = getattr(sink, "send", None)
        if send is not None:
            send(line, key=record.key)
        else:
            sink.write(line)  # type: ignore[union-attr]

    # -- the window of recent examples (metrics) ---------------------------------------------
    def defer_recent(self, names: list, rows: Any, labels: list[bytes]) -> None:
        """Remember a dense batch's labelled rows (values and raw label cells) for the window,
        without building dicts or parsing labels now."""
        window = self.recent_examples.maxlen or 0  # type: ignore[union-attr]
        # A copy of the last rows only: the batch's whole matrix is freed at once, so the next
        # batch reuses its memory instead of faulting in fresh pages (measured: 9% of a run).
        rows = rows[-window:].copy()
        labels = labels[-window:]
        self._recent_pending.append((names, rows, labels))
        self._recent_pending_rows += len(labels)
        while self._recent_pending_rows - len(self._recent_pending[0][2]) >= window:
            self._recent_pending_rows -= len(self._recent_pending.popleft()[2])

    def _flush_recent(self) -> None:
        recent = self.recent_examples
        assert recent is not None
        window = recent.maxlen or 0
        labels = self.parser._labels  # type: ignore[attr-defined]
        while self._recent_pending:
            names, rows, cells = self._recent_pending.popleft()
            start = max(0, len(cells) - window)
            recent.extend(
                zip(zip(repeat(names), rows[start:]), map(labels.__getitem__, cells[start:]))
            )
        self._recent_pending_rows = 0

    def recent_window(self) -> list[tuple[Any, Any]]:
        """The last labelled examples, oldest first (call with the lock held)."""
        if self.recent_examples is None:
            return []
        if self._recent_pending:
            self._flush_recent()
        return list(self.recent_examples)

    # -- partitioned sources (Kafka) ------------------------------------------------------------
    def assigned(self, partitions: list[PositionKey]) -> dict[PositionKey, int]:
        """Where to resume newly assigned partitions: the offsets this model has learned to."""
        return {p: self.next_offsets[p] for p in partitions if p in self.next_offsets}

    def idle(self) -> None:
        """The source has nothing new for now: save the checkpoint if one is due and records
        came since the last one (so an interval checkpoint also covers the last batches)."""
        policy = self.checkpoint
        if (
            policy is not None
            and self.stats.records > policy.last_records
            and policy.due(self.stats.records)
        ):
            self.save_checkpoint()

    def revoked(self, partitions: list[PositionKey]) -> None:
        """Partitions are about to go to another consumer: checkpoint and commit first."""
        logger.info("partitions revoked: %s; checkpointing before giving them up", partitions)
        self.save_checkpoint()

    # -- checkpoints ---------------------------------------------------------------------------
    def save_checkpoint(self) -> None:
        """Flush the outputs, write the model and positions atomically, then commit offsets.

        The order makes a crash at any point safe: a checkpoint never claims output that was not
        flushed, and an offset is never committed before the model that learned it is saved.
        """
        from stream_perceptron.checkpoint import file_size

        with self.lock:
            self.outputs.flush()
            checkpoint = Checkpoint(
                model=self.learner,
                next_offsets=self.next_offsets,
                stats=self.stats.get_state(),
                outputs={path: file_size(path) for path in self.outputs.paths.values()},
            )
            if self.checkpoint is not None:
                save_checkpoint(self.checkpoint.path, checkpoint)
                self.checkpoint.done(self.stats.records)
                self.last_checkpoint_time = time.time()
            offsets = dict(self.next_offsets)
        commit = getattr(self._source, "commit", None)
        if commit is not None and offsets:
            commit(offsets)
        logger.debug("checkpoint at %d records", self.stats.records)


def _runs(batch: list[Record]) -> Iterator[list[Record]]:
    """The batch cut where the source or partition changes."""
    position = batch[0].position
    key = (position.source, position.partition)
    start = 0
    for i, record in enumerate(batch):
        position = record.position
        if position.partition != key[1] or position.source != key[0]:
            yield batch[start:i]
            start = i
            key = (position.source, position.partition)
    yield batch if start == 0 else batch[start:]


def _dead_letter_headers(record: Record, reason: str, detail: str) -> list[tuple[str, bytes]]:
    position = record.position
    headers = [
        ("reason", reason.encode()),
        ("detail", detail.encode()),
        ("source", position.source.encode()),
        ("offset", str(position.offset).encode()),
    ]
    if position.partition is not None:
        headers.append(("partition", str(position.partition).encode()))
    return headers
