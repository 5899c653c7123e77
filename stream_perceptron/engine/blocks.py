"""The engine's block path: a whole block of plain CSV or flat JSON lines learned in one call
of the learner's block learning (``learn_dense``), exact to the per-record path.

Used automatically when the learner and the parser can: a line source's blocks, a Kafka
source's message blocks (a partition's one-record messages of one poll), record batches (a
Kafka batch one partition at a time). Predictions leave as columns (offsets, keys, and a code
per row for its prediction, label and mistake), formatted a block at a time. Anything it cannot
take whole (a bad line, lines still to be skipped on resume, the header) goes the per-record
way. Both paths leave the same model, counts and outputs, and both hand their results to the
same :class:`~stream_perceptron.engine.outcomes.Outcomes`: ``tests/fast``,
``tests/engine/test_dense_batches.py`` and ``tests/engine/test_dense_multiclass.py`` check it.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from connectors import LineBlock, MessageBlock, PositionKey, Record
from stream_perceptron.engine.outputs import BlockOrigin, PredictionBlock
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.formats.base import (
    LABEL_OUTSIDE_ENCODING,
    BlockParser,
    DenseBatch,
    DenseParser,
)
from stream_perceptron.formats.label_cells import LabelCells
from stream_perceptron.learners.binary_blocks import BinaryBlocks
from stream_perceptron.learners.preprocessed import base_learner

if TYPE_CHECKING:
    from stream_perceptron.engine.loop import Engine

__all__ = ["BlockPath"]


class BlockPath:
    """Processes an engine's blocks whole when its parser is a
    :class:`~stream_perceptron.formats.base.DenseParser` and its learner can learn blocks."""

    def __init__(self, engine: Engine, parser: DenseParser) -> None:
        self.learner = engine.learner
        self.parser = parser
        self.outcomes = engine.outcomes
        self.coordinator = engine.coordinator
        self.takes_blocks = isinstance(parser, BlockParser)

    @classmethod
    def for_engine(cls, engine: Engine) -> BlockPath | None:
        """The block path of ``engine``, or ``None`` when its parser or learner cannot."""
        parser = engine.parser
        if not isinstance(parser, DenseParser) or not engine.learner.dense_capable:
            return None
        return cls(engine, parser)

    def process(self, batch: list[Record]) -> bool:
        """Process ``batch`` (records of one source and partition) whole and return True, or
        return False having changed nothing."""
        first, last = batch[0].position, batch[-1].position
        key = (first.source, first.partition)
        if not self._ready(key, first.offset):
            return False
        if any(record.error is not None for record in batch):
            return False
        dense = self.parser.parse_dense([record.value for record in batch])

        def origin() -> BlockOrigin:
            offsets = [record.position.offset for record in batch]
            return BlockOrigin(key[0], key[1], offsets, [record.key for record in batch])

        return self._learn(dense, key, last.offset + 1, lambda: batch, origin)

    def process_messages(self, block: MessageBlock) -> bool:
        """Process a block of Kafka messages whole and return True, or return False having
        changed nothing (then the caller gives its records to the per-record path)."""
        key = (block.topic, block.partition)
        if not self._ready(key, block.offsets[0]):
            return False
        dense = self.parser.parse_dense(block.values)
        origin = BlockOrigin(block.topic, block.partition, block.offsets, block.keys)
        return self._learn(dense, key, block.end, block.records, lambda: origin)

    def process_block(self, block: LineBlock) -> bool:
        """Process a block of lines whole and return True, or return False having changed
        nothing (then the caller gives its records to the per-record path)."""
        key = (block.source, None)
        if not self._ready(key, block.start):
            return False
        parser: Any = self.parser  # a BlockParser (takes_blocks; a Protocol check costs 40 us)
        assert self.takes_blocks
        dense = parser.parse_dense_block(block.data, block.known_count)
        if dense is not None:  # the scanner counted the lines
            block.found_count(len(dense[2]))
        origin = BlockOrigin(block.source, None, range(block.start, block.end))
        return self._learn(dense, key, block.end, block.records, lambda: origin)

    def _ready(self, key: PositionKey, first_offset: int) -> bool:
        """False while the header is to come or the lines are still to be skipped (resume)."""
        if self.parser.header_pending:
            return False
        return first_offset >= self.coordinator.resume_from.get(key, 0)

    def _learn(
        self, dense: DenseBatch | None, key: PositionKey, end: int,
        records: Callable[[], list[Record]], origin: Callable[[], BlockOrigin],
    ) -> bool:  # fmt: skip
        """Learn the parsed lines (``None``: not plain, nothing done); ``records`` gives the
        lines as records, made only when a dead letter needs them, ``origin`` their offsets
        and keys, asked only when predictions are written."""
        if dense is None:
            return False
        if isinstance(base_learner(self.learner), BinaryBlocks):  # binary, maybe preprocessed
            done = self._learn_binary(dense, records, origin)
        else:
            done = self._learn_multiclass(dense, origin)
        if done:
            self.coordinator.positions[key] = end
        return done

    def _learn_binary(
        self, dense: DenseBatch, records: Callable[[], list[Record]],
        origin: Callable[[], BlockOrigin],
    ) -> bool:  # fmt: skip
        learner: Any = self.learner  # a binary learner, or a Preprocessed one
        outcomes = self.outcomes
        features, X, label_cells = dense
        n = len(label_cells)
        parsed = self.parser.label_cache
        encoding = learner.label_encoding
        atomic = outcomes.on_error == "fail"
        if isinstance(label_cells, LabelCells):  # each distinct cell encoded once
            ids = label_cells.ids
            encoded = learner.encode_block(label_cells.distinct, parsed, atomic=atomic, ids=ids)
        else:
            encoded = learner.encode_block(label_cells, parsed, atomic=atomic)
        if encoded is None:
            # The per-record path stops at the first bad label, having seen only the labels
            # before it: give it the block, the encoding as it was.
            return False
        signs, classes, errors = encoded
        rows = np.arange(n)
        if errors:
            keep = np.array([i not in errors for i in range(n)])
            X, signs, rows = X[keep], signs[keep], rows[keep]
        try:
            predicted = learner.learn_dense(features, X, signs)
        except ValueTooLargeError:
            # A row the model refuses (it would become non-finite): the model is as it was;
            # the per-record path dead-letters that row alone, the encoding as it was.
            learner.label_encoding = encoding
            return False
        labelled = signs != 0
        mistakes = (predicted != signs) & labelled
        if errors:
            batch = records()
            for i, error in errors.items():
                outcomes.bad(batch[i], LABEL_OUTSIDE_ENCODING, str(error))

        def window_rows() -> tuple[list[str], Any, Sequence[bytes]]:
            # Rows and raw label cells stay as they are: a scrape builds the dicts it reads.
            if errors or not labelled.all():
                picked = np.flatnonzero(labelled)
                return features, X[picked], [label_cells[i] for i in rows[picked]]
            return features, X, label_cells

        def predictions() -> PredictionBlock:
            where = origin()
            kept = rows.tolist() if errors else None
            cells = label_cells if kept is None else [label_cells[i] for i in kept]
            if kept is not None:
                keys = where.keys
                where = BlockOrigin(
                    where.source, where.partition, [where.offsets[i] for i in kept],
                    None if keys is None else [keys[i] for i in kept],
                )  # fmt: skip
            if classes.count(classes[0]) != len(classes):  # the encoding settled in the block
                shown = [classes[i][p] for i, p in zip(kept or range(n), (predicted > 0).tolist())]
                labels = list(map(parsed.__getitem__, cells))
                return PredictionBlock.of_rows(where, shown, labels, mistakes.tolist())
            # A row's case follows from its label cell (a kept row is unlabelled exactly when
            # its cell parses to None), whether it predicted positive, and whether that was a
            # mistake: codes by numpy, no Python per row but the cell lookup.
            if isinstance(cells, LabelCells):  # distinct cells in the order first seen
                ids = dict.fromkeys(cells.distinct)
                cell_ids = cells.ids.astype(np.intp)
            else:
                ids = {cell: i for i, cell in enumerate(dict.fromkeys(cells))}
                cell_ids = np.fromiter(map(ids.__getitem__, cells), np.intp, count=len(cells))
            codes = (cell_ids * 2 + (predicted > 0)) * 2 + mistakes
            negative, positive = classes[0]
            cases = [
                (shown, parsed[cell], wrong)
                for cell in ids
                for shown in (negative, positive)
                for wrong in (False, True)
            ]
            return PredictionBlock(where, codes.tolist(), cases)

        unlabelled = int((~labelled).sum())
        outcomes.learned_block(mistakes[labelled].tolist(), unlabelled, window_rows, predictions)
        return True

    def _learn_multiclass(self, dense: DenseBatch, origin: Callable[[], BlockOrigin]) -> bool:
        features, X, cells = dense
        parsed = self.parser.label_cache
        if isinstance(cells, LabelCells):  # each distinct cell parsed once, then a list index
            values = list(map(parsed.__getitem__, cells.distinct))
            labels = list(map(values.__getitem__, cells.ids.tolist()))
            unlabelled = None in values
        else:
            labels = list(map(parsed.__getitem__, cells))
            unlabelled = None in labels
        try:
            predictions = self.learner.learn_dense(features, X, labels)
        except (ValueTooLargeError, LabelError):
            return False  # a row the model refuses: the per-record path dead-letters it
        if unlabelled:
            mistakes = [p != y for p, y in zip(predictions, labels) if y is not None]
        else:  # a C-level map, the same comparisons
            mistakes = list(map(operator.ne, predictions, labels))

        def window_rows() -> tuple[list[str], Any, Sequence[bytes]]:
            if len(mistakes) == len(labels):
                return features, X, cells
            picked = [i for i, y in enumerate(labels) if y is not None]
            return features, X[picked], [cells[i] for i in picked]

        def output() -> PredictionBlock:
            wrong = [y is not None and p != y for p, y in zip(predictions, labels)]
            return PredictionBlock.of_rows(origin(), list(predictions), labels, wrong)

        self.outcomes.learned_block(mistakes, len(labels) - len(mistakes), window_rows, output)
        return True
