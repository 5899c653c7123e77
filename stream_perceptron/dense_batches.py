"""The engine's vectorised path: a whole block of plain CSV or flat JSON lines through an exact
kernel (the binary or the multi-class perceptron).

Used automatically when the learner and the lines allow it: a line source's blocks, record
batches (a Kafka batch one partition at a time). Anything it cannot take whole (a bad line,
lines still to be skipped on resume, the header) goes the per-record way. Both paths leave the
same model, counts and outputs: ``tests/fast``, ``tests/engine/test_dense_batches.py`` and
``tests/engine/test_dense_multiclass.py`` check it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from connectors import LineBlock, Record
from stream_perceptron.checkpoint import PositionKey
from stream_perceptron.formats.base import LABEL_OUTSIDE_ENCODING, LabelCache
from stream_perceptron.learners.labels import BinaryLabels
from stream_perceptron.learners.perceptron import Perceptron
from stream_perceptron.native.labels import encode_labels

__all__ = ["DenseBatches"]


class DenseBatches:
    """Processes batches of an engine whose parser has ``parse_dense`` and whose learner is
    :attr:`~stream_perceptron.learners.StreamClassifier.dense_capable`."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @staticmethod
    def usable(engine: Any) -> bool:
        # A parser with a dense form keeps its label cells' parsed values in ``_labels``, a
        # LabelCache (CSV cells and JSON values are parsed differently).
        learner = engine.learner
        return hasattr(engine.parser, "parse_dense") and getattr(learner, "dense_capable", False)

    @property
    def takes_blocks(self) -> bool:
        """Whether the parser reads a :class:`~connectors.LineBlock` whole."""
        return hasattr(self.engine.parser, "parse_dense_block")

    def process(self, batch: list[Record]) -> bool:
        """Process ``batch`` (records of one source and partition) whole and return True, or
        return False having changed nothing."""
        first, last = batch[0].position, batch[-1].position
        key = (first.source, first.partition)
        if not self._ready(key, first.offset):
            return False
        if any(record.error is not None for record in batch):
            return False
        dense = self.engine.parser.parse_dense([record.value for record in batch])
        return self._learn(dense, key, last.offset + 1, lambda: batch)

    def process_block(self, block: LineBlock) -> bool:
        """Process a block of lines whole and return True, or return False having changed
        nothing (then the caller gives its records to the per-record path)."""
        key = (block.source, None)
        if not self._ready(key, block.start):
            return False
        dense = self.engine.parser.parse_dense_block(block.data, block.count)
        return self._learn(dense, key, block.end, block.records)

    def _ready(self, key: PositionKey, first_offset: int) -> bool:
        """False while the header is to come or the lines are still to be skipped (resume)."""
        engine = self.engine
        if engine.parser.header_pending:
            return False
        return first_offset >= engine._skip_before.get(key, 0)

    def _learn(
        self, dense: Any, key: PositionKey, end: int, records: Callable[[], list[Record]]
    ) -> bool:
        """Learn the parsed lines (``None``: not plain, nothing done); ``records`` gives the
        lines as records, made only when a prediction or a dead letter needs them."""
        if dense is None:
            return False
        engine = self.engine
        if not isinstance(engine.learner, Perceptron):
            return self._learn_multiclass(dense, key, end, records)
        features, X, label_cells = dense
        n = len(label_cells)
        learner = engine.learner
        parsed = engine.parser._labels
        settled = _settled_signs(learner._labels, label_cells, parsed)
        if settled is not None:
            signs, classes, errors = settled
        else:  # encoding the labels may settle the encoding: keep it as it was, in case
            saved_labels = learner._labels.get_state()
            signs, classes, errors = encode_labels(
                learner, [parsed[cell] for cell in label_cells]
            )
            if errors and engine.on_error == "fail":
                # The per-record path stops at the first bad label, having seen only the labels
                # before it: give it the batch with the encoding as it was.
                learner._labels = BinaryLabels.from_state(saved_labels)
                return False
        rows = np.arange(n)
        if errors:
            keep = np.array([i not in errors for i in range(n)])
            X, signs, rows = X[keep], signs[keep], rows[keep]
        predicted = learner.learn_dense(features, X, signs)

        labelled = signs != 0
        mistakes = (predicted != signs) & labelled
        engine.stats.count_many(mistakes[labelled].tolist(), unlabelled=int((~labelled).sum()))
        batch = records() if errors or engine.outputs.predictions is not None else []
        for i, error in errors.items():
            engine._bad(batch[i], LABEL_OUTSIDE_ENCODING, str(error))
        labels = parsed
        if engine.recent_examples is not None:
            # Rows and raw label cells stay as they are: a scrape builds the dicts it reads.
            if errors or not labelled.all():
                picked = np.flatnonzero(labelled)
                engine.defer_recent(features, X[picked], [label_cells[i] for i in rows[picked]])
            else:
                engine.defer_recent(features, X, label_cells)
        if engine.outputs.predictions is not None:
            for j, i in enumerate(rows.tolist()):
                negative, positive = classes[i]
                prediction = positive if predicted[j] > 0 else negative
                if signs[j]:
                    engine._emit(batch[i], prediction, labels[label_cells[i]], bool(mistakes[j]))
                else:
                    engine._emit(batch[i], prediction)
        engine.next_offsets[key] = end
        return True


    def _learn_multiclass(
        self, dense: Any, key: PositionKey, end: int, records: Callable[[], list[Record]]
    ) -> bool:
        """:meth:`_learn` for the :class:`MulticlassPerceptron`."""
        engine = self.engine
        features, X, cells = dense
        parsed = engine.parser._labels
        labels = list(map(parsed.__getitem__, cells))
        predictions = engine.learner.learn_dense(features, X, labels)
        mistakes = [p != y for p, y in zip(predictions, labels) if y is not None]
        engine.stats.count_many(mistakes, unlabelled=len(labels) - len(mistakes))
        if engine.recent_examples is not None:
            picked = [i for i, y in enumerate(labels) if y is not None]
            if len(picked) == len(labels):
                engine.defer_recent(features, X, cells)
            else:
                engine.defer_recent(features, X[picked], [cells[i] for i in picked])
        if engine.outputs.predictions is not None:
            for record, prediction, y in zip(records(), predictions, labels):
                if y is None:
                    engine._emit(record, prediction)
                else:
                    engine._emit(record, prediction, y, prediction != y)
        engine.next_offsets[key] = end
        return True


def _settled_signs(labels: BinaryLabels, cells: list[bytes], parsed: LabelCache) -> Any:
    """Signs for a batch whose labels all fit an encoding already settled (the usual case):
    one lookup per row instead of the general encoder. ``None`` when that is not the case."""
    if not labels.settled:
        return None
    sign_of: dict[bytes, int] = {}
    for cell in set(cells):
        y = parsed[cell]  # parse_dense only returns label cells that parse
        code = labels._codes.get(y) if y is not None else None
        if code is None:
            return None  # unlabelled rows or a label outside the encoding: the general way
        sign_of[cell] = code
    signs = np.fromiter(map(sign_of.__getitem__, cells), dtype=np.int8, count=len(cells))
    pair = (labels.negative, labels.positive)
    return signs, [pair] * len(cells), {}
