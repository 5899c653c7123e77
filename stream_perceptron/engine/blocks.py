"""The engine's one kind of block, and its block path: a whole run of plain CSV or flat JSON
lines learned in one call of the learner's ``learn_block``, exact to the per-record path.

Whatever a source gives (a line source's blocks of lines, a Kafka source's message blocks, a
batch of records) the engine cuts into :class:`Run`\\ s: consecutive records of one source and
partition, which know their key, first offset, end, records, and how to parse themselves
dense. The block path takes a run whole when the header is behind, nothing of it is to be
skipped on resume, and its lines are plain; predictions leave as columns (offsets, keys, and a
code per row for its prediction, label and mistake), formatted a block at a time. Both paths
leave the same model, counts and outputs, and both hand their results to the same
:class:`~stream_perceptron.engine.outcomes.Outcomes`: ``tests/fast``,
``tests/engine/test_dense_batches.py`` and ``tests/engine/test_dense_multiclass.py`` check it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Protocol, cast

from connectors import LineBlock, MessageBlock, PositionKey, Record
from stream_perceptron.engine.outcomes import Outcomes
from stream_perceptron.engine.outputs import BlockOrigin, PredictionBlock
from stream_perceptron.formats.base import BlockParser, DenseBatch, DenseParser
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.learners.block_learning import BlockRows

__all__ = ["BlockPath", "Run", "runs_of"]


class Run(Protocol):
    """Consecutive records of one source and partition, in offset order."""

    @property
    def key(self) -> PositionKey: ...

    @property
    def start(self) -> int:
        """The first record's offset."""

    @property
    def end(self) -> int:
        """The offset after the last record."""

    @property
    def count(self) -> int: ...

    def records(self) -> list[Record]: ...

    def parse_dense(self, parser: DenseParser) -> DenseBatch | None:
        """The run as a dense batch, or ``None`` when it is not plain."""

    def origin(self) -> BlockOrigin: ...

    def split_first(self) -> tuple[list[Record], Run]:
        """The first record alone (a header) and the rest (``count > 1``)."""


class RecordRun:
    """A run of records (a Kafka batch's records of one partition, or a slice of a run)."""

    __slots__ = ("batch", "key")

    def __init__(self, batch: list[Record]) -> None:
        first = batch[0].position
        self.batch = batch
        self.key: PositionKey = (first.source, first.partition)

    @property
    def start(self) -> int:
        return self.batch[0].position.offset

    @property
    def end(self) -> int:
        return self.batch[-1].position.offset + 1

    @property
    def count(self) -> int:
        return len(self.batch)

    def records(self) -> list[Record]:
        return self.batch

    def parse_dense(self, parser: DenseParser) -> DenseBatch | None:
        if any(record.error is not None for record in self.batch):
            return None
        return parser.parse_dense([record.value for record in self.batch])

    def origin(self) -> BlockOrigin:
        offsets = [record.position.offset for record in self.batch]
        return BlockOrigin(self.key[0], self.key[1], offsets, [r.key for r in self.batch])

    def split_first(self) -> tuple[list[Record], Run]:
        return self.batch[:1], RecordRun(self.batch[1:])


class _WholeBlock:
    """A run that is a source's block whole: its count, end and records are the block's."""

    __slots__ = ("block", "key")

    block: LineBlock | MessageBlock

    @property
    def end(self) -> int:
        return self.block.end

    @property
    def count(self) -> int:
        return self.block.count

    def records(self) -> list[Record]:
        return self.block.records()


class LineRun(_WholeBlock):
    """A line source's block of lines, whole (no record per line unless asked)."""

    __slots__ = ()

    def __init__(self, block: LineBlock) -> None:
        self.block: LineBlock = block
        self.key: PositionKey = (block.source, None)

    @property
    def start(self) -> int:
        return self.block.start

    def parse_dense(self, parser: DenseParser) -> DenseBatch | None:
        # a BlockParser: line blocks come only when the block path takes them (takes_blocks;
        # a Protocol check here cost 40 us a block)
        block = self.block
        dense = cast(BlockParser, parser).parse_dense_block(block.data, block.known_count)
        if dense is not None:  # the scanner counted the lines
            block.found_count(len(dense[2]))
        return dense

    def origin(self) -> BlockOrigin:
        block = self.block
        return BlockOrigin(block.source, None, range(block.start, block.end))

    def split_first(self) -> tuple[list[Record], Run]:
        block = self.block
        cut = block.data.index(b"\n") + 1
        head = LineBlock(block.data[:cut], block.source, block.start, 1).records()
        rest = LineBlock(block.data[cut:], block.source, block.start + 1, block.count - 1)
        return head, LineRun(rest)


class MessageRun(_WholeBlock):
    """A Kafka source's block of one partition's one-record messages, as columns."""

    __slots__ = ()

    def __init__(self, block: MessageBlock) -> None:
        self.block: MessageBlock = block
        self.key: PositionKey = (block.topic, block.partition)

    @property
    def start(self) -> int:
        return self.block.offsets[0]

    def parse_dense(self, parser: DenseParser) -> DenseBatch | None:
        return parser.parse_dense(self.block.values)

    def origin(self) -> BlockOrigin:
        block = self.block
        return BlockOrigin(block.topic, block.partition, block.offsets, block.keys)

    def split_first(self) -> tuple[list[Record], Run]:
        b = self.block
        head = MessageBlock(b.topic, b.partition, b.values[:1], b.offsets[:1], b.keys[:1])
        rest = MessageBlock(b.topic, b.partition, b.values[1:], b.offsets[1:], b.keys[1:])
        return head.records(), MessageRun(rest)


def runs_of(unit: list[Record] | LineBlock | MessageBlock) -> Iterator[Run]:
    """A source's unit as runs: a block is one; a batch of records is cut where the source or
    partition changes (a Kafka batch has several)."""
    if isinstance(unit, LineBlock):
        yield LineRun(unit)
    elif isinstance(unit, MessageBlock):
        yield MessageRun(unit)
    else:
        position = unit[0].position
        key = (position.source, position.partition)
        start = 0
        for i, record in enumerate(unit):
            position = record.position
            if position.partition != key[1] or position.source != key[0]:
                yield RecordRun(unit[start:i])
                start = i
                key = (position.source, position.partition)
        yield RecordRun(unit if start == 0 else unit[start:])


class BlockPath:
    """Learns runs whole when the parser is a
    :class:`~stream_perceptron.formats.base.DenseParser` and the learner can learn blocks
    (``dense_capable``): the learner's ``learn_block`` encodes, learns and, when it refuses a
    block, leaves itself as it was."""

    def __init__(
        self, learner: StreamClassifier, parser: DenseParser, outcomes: Outcomes,
        resume_from: dict[PositionKey, int],
    ) -> None:  # fmt: skip
        self.learner = learner
        self.parser = parser
        self.outcomes = outcomes
        self.resume_from = resume_from
        self.takes_blocks = isinstance(parser, BlockParser)

    @classmethod
    def of(
        cls, learner: StreamClassifier, parser: Any, outcomes: Outcomes,
        resume_from: dict[PositionKey, int],
    ) -> BlockPath | None:  # fmt: skip
        """The block path of this learner and parser, or ``None`` when either cannot."""
        if not isinstance(parser, DenseParser) or not learner.dense_capable:
            return None
        if learner.sparse_capable and hasattr(parser, "sparse_blocks"):
            parser.sparse_blocks = True  # blocks of any record shape, as sparse rows
        return cls(learner, parser, outcomes, resume_from)

    def learn(self, run: Run) -> bool:
        """Learn ``run`` whole and return True, or return False having changed nothing (the
        header still to come, lines still to be skipped on resume, lines not plain, a row
        refused)."""
        if self.parser.header_pending or run.start < self.resume_from.get(run.key, 0):
            return False
        dense = run.parse_dense(self.parser)
        if dense is None:
            return False
        outcomes = self.outcomes
        watch, trial = outcomes.stats.drift_reference, None
        if watch is not None:  # the drift reference's copy predicts the block first
            if isinstance(dense[1], SparseRows):  # its copy takes dense blocks only
                return False
            trial = watch.trial_block(dense, self.parser.label_cache, outcomes.stats.learned)
            if trial is None:
                return False
        atomic = outcomes.on_error == "fail"
        result = self.learner.learn_block(dense, self.parser.label_cache, atomic=atomic)
        if result is None:
            return False
        if result.bad_labels:
            records, cells = run.records(), dense[2]
            for i, error in result.bad_labels.items():
                label = self.parser.label_cache[cells[i]]
                outcomes.refused(records[i], self.learner, label, error)

        def predictions() -> PredictionBlock:
            return prediction_block(run.origin(), result.rows())

        outcomes.learned_block(
            run.key, result.mistakes, result.unlabelled, result.window_rows, predictions
        )
        if watch is not None:
            watch.commit_block(trial)
        return True


def prediction_block(where: BlockOrigin, rows: BlockRows) -> PredictionBlock:
    """A learned block's rows (:class:`~stream_perceptron.learners.block_learning.BlockRows`)
    for the outputs, each at its origin."""
    kept = rows.kept
    if kept is not None:
        keys = where.keys
        where = BlockOrigin(
            where.source, where.partition, [where.offsets[i] for i in kept],
            None if keys is None else [keys[i] for i in kept],
        )  # fmt: skip
    if rows.codes is not None:
        return PredictionBlock(where, rows.codes, rows.cases)
    return PredictionBlock.of_rows(where, rows.shown, rows.labels, rows.wrong)
