"""Glue of the passive-aggressive learners' C kernels (``kernel_pa_binary``,
``kernel_pa_multiclass`` in ``_dense.c``).

:func:`learn_dense` predicts-then-learns every row of a dense float64 matrix and leaves the
model exactly as the ``predict_learn_one`` loop over ``dict(zip(features, row))`` would, to the
last bit: the same predictions, updates, weights (same keys, same insertion order), bias,
counters and ``max_norm``; :func:`learn_sparse` the same over sparse rows. The binary
learner's rule is ``_rules.h``'s ``pa_rule_row`` (``PassiveAggressive._learn``, the reference,
in the same order), run over the cells its model gives and takes back
(:class:`~stream_perceptron.learners._pa_blocks.PaBlockModel`), as the binary perceptron's
(:mod:`~stream_perceptron.learners._binary_kernel`). A labelled row ``_learn`` would refuse
(``sq``, the bias or a weight not finite) stops the kernel: :func:`learn_dense` raises
:class:`~stream_perceptron.errors.ValueTooLargeError` (``row``: its index) and gives nothing
back. A sign of ``0`` marks an unlabelled row, only predicted.

:func:`learn_dense_multiclass` and :func:`learn_sparse_multiclass` do the same for the
multi-class learner (``kernel_pa_multiclass``, dense or sparse rows): a sparse
row's folds over its own items, in its order, and the new keys of each weight dict written in
the order the row loop adds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from stream_perceptron import native
from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._binary_kernel import (
    BinaryKernelModel,
    checked_block,
    predictions,
    refusal,
    run_kernel,
    sparse_block,
)
from stream_perceptron.learners._multiclass_kernel import (
    checked_multiclass_block,
    class_arrays,
    class_codes,
    sparse_module,
    write_sparse_classes,
)
from stream_perceptron.learners._pa_blocks import VARIANT_CODES

if TYPE_CHECKING:
    from stream_perceptron.formats.sparse_rows import SparseRows

__all__ = [
    "VARIANT_CODES",
    "learn_dense",
    "learn_dense_multiclass",
    "learn_sparse",
    "learn_sparse_multiclass",
]



class MulticlassPaKernelModel(Protocol):
    """What this glue reads and sets of a multi-class passive-aggressive learner (its fields:
    that rule is not yet behind methods, as the binary learners' are; see issue 43)."""

    C: float
    variant: str
    _w: dict[Any, dict[Any, float]]
    _b: dict[Any, float]
    _bias_mode: str
    _max_norm: float
    _n_seen: int
    _n_mistakes: int


def learn_dense(
    model: BinaryKernelModel, features: Sequence[Any], X: Any, signs: Any
) -> np.ndarray:
    """:meth:`PassiveAggressive.learn_dense`'s work (the C extension built)."""
    features, X, signs = checked_block(features, X, signs)
    n = X.shape[0]
    preds = bytearray(n)  # int8 predictions, written by the kernel
    if n:
        run_kernel("kernel_pa_binary", model, features, X, None, None, signs, preds, X.shape[1])
    return predictions(preds, X)


def learn_dense_multiclass(
    model: MulticlassPaKernelModel, features: Sequence[Any], X: Any, labels: Sequence[Any]
) -> list[Any]:
    """:meth:`MulticlassPassiveAggressive.learn_dense`'s work (the C extension built)."""
    _, features, X = checked_multiclass_block(features, X, labels)
    return _learn_multiclass(model, features, X, None, None, labels)


def _learn_multiclass(
    model: MulticlassPaKernelModel, names: list[Any], X: Any, indptr: Any, slots: Any,
    labels: Sequence[Any],
) -> list[Any]:  # fmt: skip
    """``kernel_pa_multiclass`` over a block (dense: ``indptr`` None; sparse: ``X`` the CSR
    values), the model's classes as arrays of ``names``' cells, each class's new keys then
    entering its dict in the order the ``predict_learn_one`` loop adds them."""
    c = native.dense
    assert c is not None  # checked by the callers
    n, m = len(labels), len(names)
    known = len(model._w)
    classes, codes = class_codes(list(model._w), labels)
    k = len(classes)
    W, present = class_arrays(list(model._w.values()), names, k)
    had = present.copy()
    bias = np.zeros(k)
    bias[:known] = [model._b[cl] for cl in model._w]
    joined, n_joined = np.empty((2 * k, m), dtype=np.int64), np.zeros(2 * k, dtype=np.int64)
    preds = np.empty(n, dtype=np.int64)
    rule = (
        VARIANT_CODES[model.variant], float(model.C), model._bias_mode == "learned",
        float(model._max_norm), int(model._n_seen), int(model._n_mistakes), known,
    )  # fmt: skip
    empty = np.empty(0)
    rule, _, stopped, why = c.kernel_pa_multiclass(
        X, indptr, slots, codes, W, empty, bias, np.zeros(k), present, joined, n_joined, preds,
        empty, n, m, k, rule,
    )  # fmt: skip
    if stopped >= 0:  # the kernel stopped at that row: nothing is written back
        if why == 2:
            raise ValueError("rows have non-finite values")
        raise refusal(int(stopped))
    _, _, _, max_norm, n_seen, n_mistakes, n_active = rule
    every = np.ones(k, dtype=np.uint8)  # unmoved classes keep their values
    write_sparse_classes(model, classes[known:n_active], classes[:n_active], names, W, bias,
                         every[:n_active], had, joined, n_joined)  # fmt: skip
    model._max_norm = float(max_norm)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    named = [None, *classes]
    return list(map(named.__getitem__, (preds + 1).tolist()))


_SIGN_BYTES = b"\x00\x01\xff"  # 0, +1, -1 as int8


def _sparse_signs(signs: Any, n: int) -> Any:
    """``signs`` as the sparse kernel reads them: an int8 buffer of ``n`` -1/0/+1 (the block
    path's, as it is; anything else through NumPy); ValueError otherwise."""
    view = None if isinstance(signs, (list, tuple)) else memoryview(signs)
    if view is None or view.format != "b" or view.ndim != 1:
        signs = np.asarray(signs)
        if signs.ndim != 1 or not np.isin(signs, (-1, 0, 1)).all():
            raise ValueError("signs must be -1, +1 (or 0 for an unlabelled row)")
        view = memoryview(signs.astype(np.int8))
    if len(view) != n:
        raise ValueError(f"signs has shape ({len(view)},), expected ({n},)")
    if view.cast("B").tobytes().translate(None, _SIGN_BYTES):
        raise ValueError("signs must be -1, +1 (or 0 for an unlabelled row)")
    return view


def learn_sparse(model: BinaryKernelModel, features: Sequence[Any], rows: SparseRows,
                 signs: Any) -> Any:  # fmt: skip
    """:func:`learn_dense` of a sparse block (``rows``' slots index ``features``): the model
    left exactly as the ``predict_learn_one`` loop over each row's dict would leave it, new
    keys entering ``_w`` in the order that loop adds them. Returns the int8 predictions as a
    ``memoryview``."""
    return sparse_block("kernel_pa_binary", model, features, rows, _sparse_signs(signs, len(rows)))


def learn_sparse_multiclass(
    model: MulticlassPaKernelModel, features: Sequence[Any], rows: SparseRows,
    labels: Sequence[Any],
) -> list[Any]:  # fmt: skip
    """:func:`learn_dense_multiclass` of a sparse block (``rows``' slots index ``features``):
    each class's new keys entering its dict in the order the ``predict_learn_one`` loop adds
    them."""
    sparse_module(rows, labels)
    if len(rows) == 0:
        return []
    return _learn_multiclass(model, list(features), rows.values, rows.indptr, rows.slots, labels)
