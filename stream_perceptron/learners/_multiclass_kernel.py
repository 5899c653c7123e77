"""Glue of the multi-class perceptron's C kernel: a block's cells from the model, the kernel, back.

Call it through :meth:`MulticlassPerceptron.learn_dense
<stream_perceptron.learners.MulticlassPerceptron.learn_dense>`. The rule is ``_rules.h``'s
``multi_rule_row``, which the dict API (``_speedups.c``) runs too: the operations of
``MulticlassPerceptron._learn`` / ``predict_one`` (the reference), averaged or not,
``init="zeros"``, in the same order: each class's score a left fold from ``+0.0`` over the
row's items (a weight missing from the class's dict is ``0.0`` in the arrays: a left fold from
``+0.0`` gives the same sum whether such a term is skipped or added as ``0.0*v``, ``v``
finite), R's sum of squares ``sq += v * v`` likewise, the argmax the first class on ties. A
dense row is the row whose slots are the block's features in order; a sparse row
(:class:`~stream_perceptron.formats.sparse_rows.SparseRows`) lists its own. The model (a
:class:`MulticlassKernelModel`) gives its classes, the cells of the block's features as arrays
and its rule's fields, and takes them back learned: each class's new keys enter its dicts in
the order the ``predict_learn_one`` loop adds them.

A row that ``_learn`` would refuse (:class:`~stream_perceptron.errors.ValueTooLargeError`: R,
a bias or a weight non-finite; :class:`~stream_perceptron.errors.LabelError`: ``True`` and
``1`` as classes) makes :func:`learn_dense` raise that error, the model as it was before the
call: nothing is given back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from stream_perceptron import native
from stream_perceptron.lazy_numpy import bool_types, np
from stream_perceptron.learners._binary_kernel import (  # the same configurations: supported
    refusal,
    supported,
)
from stream_perceptron.learners._maths import check_class_kind

if TYPE_CHECKING:
    from stream_perceptron.formats.sparse_rows import SparseRows

__all__ = ["supported", "learn_dense", "learn_sparse", "run_kernel", "class_codes",
           "check_kinds", "checked_multiclass_block", "sparse_module", "MulticlassKernelModel"]


class MulticlassKernelModel(Protocol):
    """What the multi-class perceptron's kernel needs of a model: its classes in order, its rule
    (the C ``MultiRule``'s fields), the cells of a block's features, and both given back
    learned. The model keeps its fields to itself."""

    def block_classes(self) -> list[Any]: ...

    def block_rule(self) -> tuple[Any, ...]: ...

    def block_cells(self, names: list[Any], n_classes: int) -> tuple[np.ndarray, ...]: ...

    def commit_block(
        self, names: list[Any], classes: list[Any], cells: tuple[np.ndarray, ...],
        joined: list[np.ndarray], factors: list[float], rule: tuple[Any, ...],
    ) -> None: ...  # fmt: skip


def check_kinds(classes: list[Any], labels: Sequence[Any], distinct: dict[Any, None]) -> None:
    """Raise the :class:`~stream_perceptron.errors.LabelError` the row loop would raise for a
    boolean label equal to a number class (``True`` and ``1``) or the other way round, the
    classes growing as the rows bring them. ``distinct``: ``dict.fromkeys(labels)``. Free
    unless a label or class equals 0 or 1; then one pass over the labels' types."""
    if not any(map(_zero_or_one, distinct)) and not any(map(_zero_or_one, classes)):
        return
    types = set(map(type, labels))
    bools = not types.isdisjoint(bool_types())
    if not bools and not any(isinstance(c, bool_types()) for c in classes):
        return
    seen = dict.fromkeys(classes)
    for y in labels:
        if y is not None:
            check_class_kind(seen, y)
            if y not in seen:
                seen[y] = None


def checked_multiclass_block(
    features: Sequence[Any], X: Any, labels: Sequence[Any]
) -> tuple[Any, list[Any], np.ndarray]:
    """A multi-class block as the kernels take it: ``(the C module, the feature names as a list,
    X as a C-contiguous float64 matrix)``; RuntimeError without the C extension, ValueError
    for a block of other shapes or with a name twice."""
    c = native.dense
    if c is None:
        raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
    features = list(features)
    X = np.ascontiguousarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[1] != len(features) or len(labels) != X.shape[0]:
        raise ValueError(f"X has shape {X.shape}: {len(features)} features, {len(labels)} labels?")
    if len(set(features)) != len(features):
        raise ValueError("duplicate feature names")
    return c, features, X


def class_codes(classes: list[Any], labels: Sequence[Any]) -> tuple[list[Any], np.ndarray]:
    """The kernels' class codes of ``labels`` (-1: ``None``, unlabelled) and the classes they
    index: the model's ``classes`` (in its order), then the new ones, in the order their first
    rows come (the order the row loop adds them in). Raises the row loop's
    :class:`~stream_perceptron.errors.LabelError` for ``True`` against ``1`` (see
    :func:`check_kinds`)."""
    classes = list(classes)
    distinct = dict.fromkeys(labels)  # distinct labels, in the order they first come
    check_kinds(classes, labels, distinct)
    index = {c: i for i, c in enumerate(classes)}
    code_of: dict[Any, int] = {}
    for y in distinct:
        if y is None:
            code_of[y] = -1
        elif y in index:
            code_of[y] = index[y]
        else:  # a new class: added when its first row is learned, so in this order
            index[y] = code_of[y] = len(classes)
            classes.append(y)
    codes = np.fromiter(map(code_of.__getitem__, labels), dtype=np.int64, count=len(labels))
    return classes, codes


def _zero_or_one(y: Any) -> bool:
    if y is None or y.__class__ is str:
        return False
    try:
        return bool(y == 0 or y == 1)
    except (TypeError, ValueError):
        return False


def learn_dense(
    model: MulticlassKernelModel, features: Sequence[Any], X: np.ndarray, labels: Sequence[Any]
) -> list[Any]:
    """:meth:`MulticlassPerceptron.learn_dense`'s work, for a model whose ``dense_capable`` is
    true."""
    _, features, X = checked_multiclass_block(features, X, labels)
    return run_kernel(model, features, X, None, None, labels)


def run_kernel(
    model: MulticlassKernelModel, names: list[Any], X: Any, indptr: Any, slots: Any,
    labels: Sequence[Any], kernel: str = "kernel_multiclass", forgetting: bool | None = None,
) -> list[Any]:  # fmt: skip
    """The C kernel ``kernel`` (``kernel_multiclass``, ``kernel_pa_multiclass``) over a block
    (dense: ``indptr`` None; sparse: ``X`` the CSR values), the model's classes and cells
    given to it and, learned, back to the model; the model unchanged when the kernel stops at a
    row (ValueError, or :func:`refusal`). ``forgetting``: room for the renormalisations'
    factors (None: the perceptron's rule says, its half-life). Returns the predictions (None:
    no class yet)."""
    c = native.dense
    assert c is not None  # checked by the callers
    n, m = len(labels), len(names)
    classes, codes = class_codes(model.block_classes(), labels)
    k = len(classes)
    cells = model.block_cells(names, k)
    W, U, b, ub, present = cells
    had = present.copy()
    joined, n_joined = np.empty((2 * k, m), dtype=np.int64), np.zeros(2 * k, dtype=np.int64)
    preds = np.empty(n, dtype=np.int64)
    rule = model.block_rule()
    if forgetting is None:
        forgetting = rule[4] > 0  # the perceptron's half-life
    factors = np.empty(n if forgetting else 0)
    rule, n_factors, stopped, why = getattr(c, kernel)(
        X, indptr, slots, codes, W, U, b, ub, present, joined, n_joined, preds, factors, n, m,
        k, rule,
    )  # fmt: skip
    if stopped >= 0:  # the kernel stopped at that row: nothing is given back
        if why == 2:
            raise ValueError("rows have non-finite values")
        raise refusal(int(stopped))
    counts = n_joined.tolist()
    model.commit_block(names, classes, (W, U, b, ub, had),
                       [joined[i, : counts[i]] for i in range(2 * k)],
                       factors[:n_factors].tolist(), rule)  # fmt: skip
    named = [None, *classes]
    return list(map(named.__getitem__, (preds + 1).tolist()))


# -- sparse blocks ---------------------------------------------------------------------------


def sparse_module(rows: SparseRows, labels: Sequence[Any]) -> Any:
    """The C module, for a sparse block of ``rows`` and one label a row: RuntimeError without
    the C extension, ValueError for as many labels as rows."""
    c = native.dense
    if c is None:
        raise RuntimeError(f"the C kernel is unavailable: {native.dense_error}")
    if len(labels) != len(rows):
        raise ValueError(f"{len(rows)} rows, {len(labels)} labels")
    return c


def learn_sparse(
    model: MulticlassKernelModel, features: Sequence[Any], rows: SparseRows, labels: Sequence[Any]
) -> list[Any]:
    """:func:`learn_dense` of a sparse block (``rows``' slots index ``features``): the model
    left exactly as the ``predict_learn_one`` loop over each row's dict would leave it, each
    class's new keys entering its dicts in the order that loop adds them."""
    sparse_module(rows, labels)
    if len(rows) == 0:
        return []
    return run_kernel(model, list(features), rows.values, rows.indptr, rows.slots, labels)
