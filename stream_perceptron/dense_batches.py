"""The engine's vectorised path: a whole batch of plain CSV lines through the exact kernel.

Used automatically when the learner and the batch allow it; any batch it cannot take whole
(a bad line, a skipped line, a Kafka batch) goes the per-record way. Both paths leave the same
model, counts and outputs: ``tests/fast`` and ``tests/engine/test_dense_batches.py`` check it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from connectors import Record
from stream_perceptron import fast
from stream_perceptron.formats.base import LABEL_OUTSIDE_ENCODING, LabelCache
from stream_perceptron.learners.labels import BinaryLabels

__all__ = ["DenseBatches"]


class DenseBatches:
    """Processes batches of an engine whose parser has ``parse_dense`` and whose learner
    :func:`stream_perceptron.fast.supports`."""

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    @staticmethod
    def usable(engine: Any) -> bool:
        return hasattr(engine.parser, "parse_dense") and fast.supports(engine.learner)

    def process(self, batch: list[Record]) -> bool:
        """Process ``batch`` whole and return True, or return False having changed nothing."""
        engine = self.engine
        first, last = batch[0].position, batch[-1].position
        if first.partition is not None or engine.parser.header_pending:
            return False
        key = (first.source, None)
        if first.offset < engine._skip_before.get(key, 0):
            return False
        if any(record.error is not None for record in batch):
            return False
        dense = engine.parser.parse_dense([record.value for record in batch])
        if dense is None:
            return False
        features, X, label_cells = dense
        learner = engine.learner
        saved_labels = learner._labels.get_state()
        signs, classes, errors = _settled_signs(learner._labels, label_cells) or fast.encode_labels(
            learner, label_cells
        )
        if errors and engine.on_error == "fail":
            # The per-record path stops at the first bad label, having seen only the labels
            # before it: give it the batch with the encoding as it was.
            learner._labels = BinaryLabels.from_state(saved_labels)
            return False
        rows = np.arange(len(batch))
        if errors:
            keep = np.array([i not in errors for i in range(len(batch))])
            X, signs, rows = X[keep], signs[keep], rows[keep]
        predicted = fast.learn_dense(learner, features, X, signs)

        labelled = signs != 0
        mistakes = (predicted != signs) & labelled
        engine.stats.count_many(mistakes[labelled].tolist(), unlabelled=int((~labelled).sum()))
        for i, error in errors.items():
            engine._bad(batch[i], LABEL_OUTSIDE_ENCODING, str(error))
        labels = engine.parser._labels
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
        engine.next_offsets[key] = last.offset + 1
        return True


def _settled_signs(labels: BinaryLabels, cells: list[bytes]) -> Any:
    """Signs for a batch whose labels all fit an encoding already settled (the usual case):
    one lookup per row instead of the general encoder. ``None`` when that is not the case."""
    if not labels.settled:
        return None
    sign_of: dict[bytes, int] = {}
    parsed = LabelCache()
    for cell in set(cells):
        y = parsed[cell]  # parse_dense only returns UTF-8 label cells
        code = labels._codes.get(y) if y is not None else None
        if code is None:
            return None  # unlabelled rows or a label outside the encoding: the general way
        sign_of[cell] = code
    signs = np.fromiter(map(sign_of.__getitem__, cells), dtype=np.int8, count=len(cells))
    pair = (labels.negative, labels.positive)
    return signs, [pair] * len(cells), {}
