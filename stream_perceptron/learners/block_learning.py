"""A parsed block learned whole: the labels encoded (binary: as signs, each distinct label cell
once), ``learn_dense`` called, the encoding put back when the block is refused, and what the
engine needs of the result (mistakes, rows for the window and the outputs) as columns.

The learners' ``learn_block`` methods are these functions (``BinaryBlocks``: the binary ones;
``MulticlassClassifier``: the multi-class ones; ``Preprocessed``: its model's), so the engine's
block path asks a learner for one thing and never looks at its class.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from stream_perceptron import native
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.formats.base import DenseBatch
from stream_perceptron.formats.label_cells import LabelCells
from stream_perceptron.formats.sparse_rows import SparseRows
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners.labels import predicted_label

__all__ = ["BlockResult", "BlockRows", "learn_binary_block", "learn_multiclass_block"]

#: ``(feature names, values, raw label cells)`` of a block's labelled rows, for the window
WindowRows = tuple[list[str], Any, Sequence[bytes]]


@dataclass(frozen=True)
class BlockRows:
    """A learned block's rows for the prediction outputs: ``kept`` the block's rows they are
    (``None``: every row, in order), each either as ``(shown, labels, wrong)`` lists or coded:
    row ``i`` is the case ``cases[codes[i]]``, a ``(prediction, label, mistake)``."""

    kept: list[int] | None = None
    shown: list[Any] = field(default_factory=list)
    labels: list[Any] = field(default_factory=list)
    wrong: list[bool] = field(default_factory=list)
    codes: list[int] | None = None
    cases: list[tuple[Any, Any, bool]] = field(default_factory=list)


@dataclass(frozen=True)
class BlockResult:
    """What learning a block did: ``mistakes`` of its labelled rows in order, ``unlabelled``
    rows only predicted, ``bad_labels`` the rows refused for a label outside the encoding
    (row -> error; neither predicted nor learned: dead letters), and two callables the engine
    calls only when it needs them: ``window_rows`` (the labelled rows) and ``rows`` (every
    predicted row, for the outputs)."""

    mistakes: list[bool]
    unlabelled: int
    bad_labels: dict[int, LabelError]
    window_rows: Callable[[], WindowRows]
    rows: Callable[[], BlockRows]


class _BinaryBlockLearner(Protocol):
    label_encoding: dict[str, Any]

    def encode_block(
        self, keys: Sequence[Hashable], label_of: Mapping[Any, Any], *,
        atomic: bool = False, ids: Any = None,
    ) -> tuple[Any, list[str], dict[int, LabelError]] | None: ...  # fmt: skip

    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> Any: ...


class _MulticlassBlockLearner(Protocol):
    def learn_dense(self, features: Sequence[Any], X: Any, labels: Any, /) -> Any: ...


def learn_binary_block(
    learner: _BinaryBlockLearner, dense: DenseBatch, label_of: Mapping[Any, Any],
    atomic: bool = False,
) -> BlockResult | None:  # fmt: skip
    """A binary learner's ``learn_block``: ``None`` (the learner as it was) when the block is
    not learned whole: a label outside the encoding with ``atomic`` (the row loop stops
    there), or a row the model refuses (non-finite)."""
    features, X, label_cells = dense
    n = len(label_cells)
    encoding = learner.label_encoding
    if isinstance(label_cells, LabelCells):  # each distinct cell encoded once
        ids = label_cells.ids
        encoded = learner.encode_block(label_cells.distinct, label_of, atomic=atomic, ids=ids)
    else:
        encoded = learner.encode_block(label_cells, label_of, atomic=atomic)
    if encoded is None:
        return None
    signs, encodings, errors = encoded
    kept: list[int] | None = None  # the rows learned, when some are refused
    if errors:
        kept = [i for i in range(n) if i not in errors]
        X, signs = _rows_of(X, kept), np.asarray(signs)[kept]
    try:
        predicted = learner.learn_dense(features, X, signs)
    except ValueTooLargeError:
        # the model is as it was; the per-record path refuses that row alone
        learner.label_encoding = encoding
        return None
    # the labelled rows' mistakes in order, and the unlabelled rows (in C: no NumPy here; the
    # kernels that learn_dense ran are of the same extension)
    assert native.dense is not None
    mistakes, unlabelled = native.dense.mistakes(predicted, signs)

    def window_rows() -> WindowRows:
        # Rows and raw label cells stay as they are: a scrape builds the dicts it reads.
        if errors or unlabelled:
            picked = [i for i, sign in enumerate(memoryview(signs).tolist()) if sign]
            rows = picked if kept is None else [kept[i] for i in picked]
            return features, _rows_of(X, picked), [label_cells[i] for i in rows]
        return features, X, label_cells

    def block_rows() -> BlockRows:
        sign = np.asarray(signs)
        up = np.asarray(predicted) > 0
        wrong = (np.asarray(predicted) != sign) & (sign != 0)
        cells = label_cells if kept is None else [label_cells[i] for i in kept]
        # predictions decode as the record path's (predicted_label), by encoding name
        if encodings.count(encodings[0]) != len(encodings):  # the encoding settled in the block
            rows = zip(kept or range(n), up.tolist())
            shown = [predicted_label(encodings[i], p) for i, p in rows]
            labels = list(map(label_of.__getitem__, cells))
            return BlockRows(kept, shown, labels, wrong.tolist())
        # A row's case follows from its label cell (a kept row is unlabelled exactly when its
        # cell parses to None), whether it predicted positive, and whether that was a mistake:
        # codes by numpy, no Python per row but the cell lookup.
        if isinstance(cells, LabelCells):  # distinct cells in the order first seen
            ids = dict.fromkeys(cells.distinct)
            cell_ids = np.asarray(cells.ids).astype(np.intp)
        else:
            ids = {cell: i for i, cell in enumerate(dict.fromkeys(cells))}
            cell_ids = np.fromiter(map(ids.__getitem__, cells), np.intp, count=len(cells))
        codes = (cell_ids * 2 + up) * 2 + wrong
        negative, positive = (predicted_label(encodings[0], p) for p in (False, True))
        cases = [
            (shown, label_of[cell], wrong)
            for cell in ids
            for shown in (negative, positive)
            for wrong in (False, True)
        ]
        return BlockRows(kept, codes=codes.tolist(), cases=cases)

    return BlockResult(mistakes, unlabelled, errors, window_rows, block_rows)


def _rows_of(X: Any, rows: list[int]) -> Any:
    """The rows ``rows`` of a block's ``X``, dense (a NumPy copy) or sparse."""
    return X.take(rows) if isinstance(X, SparseRows) else np.asarray(X)[rows]


def learn_multiclass_block(
    learner: _MulticlassBlockLearner, dense: DenseBatch, label_of: Mapping[Any, Any]
) -> BlockResult | None:
    """A multi-class learner's ``learn_block``: ``None`` (the learner as it was) when a row is
    refused (a label the learner cannot take, or non-finite)."""
    features, X, cells = dense
    if not isinstance(X, SparseRows):  # the dense kernels' glue is NumPy's (a scanner's: a view)
        X = np.asarray(X)
    if isinstance(cells, LabelCells):  # each distinct cell parsed once, then a list index
        values = list(map(label_of.__getitem__, cells.distinct))
        labels = list(map(values.__getitem__, cells.ids.tolist()))
        unlabelled = None in values
    else:
        labels = list(map(label_of.__getitem__, cells))
        unlabelled = None in labels
    try:
        predictions = learner.learn_dense(features, X, labels)
    except (ValueTooLargeError, LabelError):
        return None  # the per-record path refuses that row alone
    if unlabelled:
        mistakes = [p != y for p, y in zip(predictions, labels) if y is not None]
    else:  # a C-level map, the same comparisons
        mistakes = list(map(operator.ne, predictions, labels))

    def window_rows() -> WindowRows:
        if len(mistakes) == len(labels):
            return features, X, cells
        picked = [i for i, y in enumerate(labels) if y is not None]
        return features, _rows_of(X, picked), [cells[i] for i in picked]

    def block_rows() -> BlockRows:
        wrong = [y is not None and p != y for p, y in zip(predictions, labels)]
        return BlockRows(None, list(predictions), labels, wrong)

    return BlockResult(mistakes, len(labels) - len(mistakes), {}, window_rows, block_rows)
