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
from typing import TYPE_CHECKING, Any

from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners._binary_kernel import (
    BinaryKernelModel,
    checked_block,
    predictions,
    run_kernel,
    sparse_block,
)
from stream_perceptron.learners._multiclass_kernel import (
    MulticlassKernelModel,
    checked_multiclass_block,
    sparse_module,
)
from stream_perceptron.learners._multiclass_kernel import run_kernel as run_multiclass
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
    model: MulticlassKernelModel, features: Sequence[Any], X: Any, labels: Sequence[Any]
) -> list[Any]:
    """:meth:`MulticlassPassiveAggressive.learn_dense`'s work (the C extension built): the
    model's classes and cells given to ``kernel_pa_multiclass`` and taken back learned
    (:class:`~stream_perceptron.learners._pa_blocks.PaMultiBlockModel`), each class's new keys
    entering its dict in the order the ``predict_learn_one`` loop adds them."""
    _, features, X = checked_multiclass_block(features, X, labels)
    return run_multiclass(model, features, X, None, None, labels, "kernel_pa_multiclass", False)


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
    model: MulticlassKernelModel, features: Sequence[Any], rows: SparseRows,
    labels: Sequence[Any],
) -> list[Any]:  # fmt: skip
    """:func:`learn_dense_multiclass` of a sparse block (``rows``' slots index ``features``):
    each class's new keys entering its dict in the order the ``predict_learn_one`` loop adds
    them."""
    sparse_module(rows, labels)
    if len(rows) == 0:
        return []
    return run_multiclass(model, list(features), rows.values, rows.indptr, rows.slots, labels,
                          "kernel_pa_multiclass", False)  # fmt: skip
