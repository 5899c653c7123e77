"""Glue of the multi-class perceptron's C kernel: the model's dicts to arrays, the kernel, back.

Call it through :meth:`MulticlassPerceptron.learn_dense
<stream_perceptron.learners.MulticlassPerceptron.learn_dense>`. The kernel (``_dense.c``) does
the operations of ``MulticlassPerceptron._learn`` / ``predict_one`` (the reference), averaged
or not, ``init="zeros"``, in the same order: each class's score a left fold from ``+0.0``
over the features (a weight missing from the class's dict is ``0.0`` in the arrays: a left
fold from ``+0.0`` gives the same sum whether such a term is skipped or added as ``0.0*v``,
``v`` finite), R's sum of squares ``sq += v * v`` likewise, the argmax the first class on ties.
A row that ``_learn`` would refuse (:class:`~stream_perceptron.errors.ValueTooLargeError`: R,
a bias or a weight non-finite; :class:`~stream_perceptron.errors.LabelError`: ``True`` and
``1`` as classes) makes :func:`learn_dense` raise that error, the model as it was before the
call: nothing is written back.

:func:`learn_sparse` does the same for a block of sparse rows
(:class:`~stream_perceptron.formats.sparse_rows.SparseRows`; ``kernel_multiclass_sparse``): a
row's folds over its own items, in its order; the kernel also tells, per class, which of the
block's features each dict has and the order in which new ones joined it, so that each class's
dicts get their new keys in the order the ``predict_learn_one`` loop adds them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from stream_perceptron import native
from stream_perceptron.lazy_numpy import bool_types, np
from stream_perceptron.learners._binary_kernel import (  # the same configurations: supported
    BIAS_CODES,
    refusal,
    rescale_outside,
    supported,
)
from stream_perceptron.learners._maths import check_class_kind

if TYPE_CHECKING:
    from stream_perceptron.formats.sparse_rows import SparseRows

__all__ = ["supported", "learn_dense", "learn_sparse", "class_codes", "check_kinds",
           "write_classes", "checked_multiclass_block", "sparse_module", "class_arrays",
           "write_sparse", "write_sparse_classes"]


class MulticlassKernelModel(Protocol):
    """What this glue reads and sets of a multi-class perceptron (its fields: the multi-class
    rule is not yet behind methods, as the binary learners' block_rule/block_cells/
    commit_block are; see issue 43)."""

    lr: Any
    averaged: bool
    average_half_life: float | None
    _w: dict[Any, dict[Any, float]]
    _u: dict[Any, dict[Any, float]]
    _b: dict[Any, float]
    _ub: dict[Any, float]
    _bias_mode: str
    _beta: float
    _avg_ref: int
    _max_norm: float
    _n_seen: int
    _n_mistakes: int
    _memo: Any

    def _add_class(self, c: Any) -> None: ...


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


def write_classes(
    model: Any, added: list[Any], classes: list[Any], features: list[Any], W: np.ndarray,
    bias: np.ndarray, updated: np.ndarray,
) -> None:  # fmt: skip
    """A multi-class kernel's model back into the learner's dicts: the classes it ``added`` (in
    order), then the weights and bias of each class it moved (``updated``; existing keys keep
    their place, new ones follow in ``features`` order)."""
    for cl in added:
        model._add_class(cl)
    for i in np.flatnonzero(updated).tolist():
        wc = model._w[classes[i]]
        for k, v in zip(features, W[i].tolist()):
            wc[k] = v
        model._b[classes[i]] = float(bias[i])


def _zero_or_one(y: Any) -> bool:
    if y is None or y.__class__ is str:
        return False
    try:
        return bool(y == 0 or y == 1)
    except (TypeError, ValueError):
        return False


def _write_rescaled(
    model: MulticlassKernelModel,
    classes: list[Any],
    features: list[Any],
    U: np.ndarray,
    u_updated: np.ndarray,
    factors: list[float],
) -> None:
    """After the kernel renormalised the forgetting average (``factors``, in order): the
    accumulators the kernel did not write back (of the classes that did not learn) take the
    kernel's values where the dict has the feature, and those of features outside the block
    are multiplied by each factor in turn, as ``_renormalise`` does to every entry."""
    for i, cl in enumerate(classes):
        rescale_outside(model._u[cl], features, U[i], bool(u_updated[i]), factors)


def learn_dense(
    model: MulticlassKernelModel, features: Sequence[Any], X: np.ndarray, labels: Sequence[Any]
) -> list[Any]:
    """:meth:`MulticlassPerceptron.learn_dense`'s work, for a model whose ``dense_capable`` is
    true."""
    c, features, X = checked_multiclass_block(features, X, labels)
    n, d = X.shape
    classes, codes = class_codes(list(model._w), labels)
    averaged = bool(model.averaged)
    W = np.zeros((len(classes), d))
    bias = np.zeros(len(classes))
    U = np.zeros((len(classes) if averaged else 0, d))
    ubias = np.zeros(len(classes) if averaged else 0)
    for i, cl in enumerate(model._w):
        wc = model._w[cl]
        W[i] = [wc.get(k, 0.0) for k in features]
        bias[i] = model._b[cl]
        if averaged:
            uc = model._u[cl]
            U[i] = [uc.get(k, 0.0) for k in features]
            ubias[i] = model._ub[cl]
    updated = np.zeros(len(classes), dtype=np.uint8)
    u_updated = np.zeros(len(classes), dtype=np.uint8)
    preds = np.empty(n, dtype=np.int64)
    known = len(model._w)
    half_life = model.average_half_life
    factors = np.empty(n if half_life is not None else 0)
    n_active, max_norm, n_seen, n_mistakes, refused, avg_ref, n_factors = c.kernel_multiclass(
        X, codes, W, bias, updated, U, ubias, u_updated, averaged, known, float(model.lr),
        BIAS_CODES[model._bias_mode], float(model._max_norm), int(model._n_seen),
        int(model._n_mistakes), preds, n, d, len(classes),
        0.0 if half_life is None else float(half_life), float(model._beta),
        int(model._avg_ref), factors,
    )  # fmt: skip
    if refused >= 0:  # the kernel stopped at that row: nothing is written back
        raise refusal(int(refused))
    write_classes(model, classes[known:n_active], classes, features, W, bias, updated)
    if averaged:
        for i in range(n_active):
            model._ub[classes[i]] = float(ubias[i])
        for i in np.flatnonzero(u_updated).tolist():
            uc = model._u[classes[i]]
            for k, v in zip(features, U[i].tolist()):
                uc[k] = v
        if n_factors:
            _write_rescaled(model, classes[:n_active], features, U, u_updated,
                            factors[:n_factors].tolist())  # fmt: skip
        model._avg_ref = int(avg_ref)
    model._max_norm = float(max_norm)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    model._memo = None
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


def class_arrays(
    dicts: Sequence[dict[Any, float]], names: list[Any], n_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """What a sparse kernel takes of the dicts of a model's classes: ``(values, present)``,
    ``n_classes`` rows of ``len(names)`` (one a class; those past ``dicts``, the classes the
    block brings, empty), each dict's value of each name (``0.0`` where it has none) and
    whether it has the name (uint8)."""
    values = np.zeros((n_classes, len(names)))
    present = np.zeros((n_classes, len(names)), dtype=np.uint8)
    for i, d in enumerate(dicts):
        if d:
            values[i] = [d.get(k, 0.0) for k in names]
            present[i] = [k in d for k in names]
    return values, present


def write_sparse(d: dict[Any, float], names: list[Any], values: Any, had: Any, new: Any) -> None:
    """A sparse kernel's values (float64, one a name) into the dict ``d``: the names it had
    (``had``, uint8 flags) keep their place, the new ones (``new``: slots in the order they
    joined) follow in that order."""
    row = values.tolist()
    for j in np.flatnonzero(np.frombuffer(had, dtype=np.uint8)).tolist():
        d[names[j]] = row[j]
    for j in new.tolist():
        d[names[j]] = row[j]


def write_sparse_classes(
    model: Any, added: list[Any], classes: list[Any], names: list[Any], W: np.ndarray,
    bias: np.ndarray, updated: np.ndarray, had: np.ndarray, new: np.ndarray, n_new: np.ndarray,
) -> None:  # fmt: skip
    """:func:`write_classes` of a sparse kernel: the classes it ``added`` (in order), then the
    weights (:func:`write_sparse`, ``had`` before the kernel, ``new`` and ``n_new`` of each
    class its new slots) and bias of each class it moved."""
    for cl in added:
        model._add_class(cl)
    for i in np.flatnonzero(updated).tolist():
        write_sparse(model._w[classes[i]], names, W[i], had[i], new[i, : n_new[i]])
        model._b[classes[i]] = float(bias[i])


def learn_sparse(
    model: MulticlassKernelModel, features: Sequence[Any], rows: SparseRows, labels: Sequence[Any]
) -> list[Any]:
    """:func:`learn_dense` of a sparse block (``rows``' slots index ``features``): the model
    left exactly as the ``predict_learn_one`` loop over each row's dict would leave it, each
    class's new keys entering its dicts in the order that loop adds them."""
    c = sparse_module(rows, labels)
    names = list(features)
    n, m = len(rows), len(names)
    if n == 0:
        return []
    known = len(model._w)
    classes, codes = class_codes(list(model._w), labels)
    k = len(classes)
    averaged = bool(model.averaged)
    W, present = class_arrays(list(model._w.values()), names, k)
    bias = np.zeros(k)
    bias[:known] = [model._b[cl] for cl in model._w]
    if averaged:
        U, u_present = class_arrays([model._u[cl] for cl in model._w], names, k)
        ubias = np.zeros(k)
        ubias[:known] = [model._ub[cl] for cl in model._w]
    else:
        U, u_present, ubias = np.zeros((0, m)), np.zeros((0, m), dtype=np.uint8), np.zeros(0)
    had, u_had = present.copy(), u_present.copy()
    w_new = np.empty((k, m), dtype=np.int32)
    u_new = np.empty((k if averaged else 0, m), dtype=np.int32)
    n_new = np.zeros(2 * k, dtype=np.int64)  # per class: new weights, then new accumulators
    updated = np.zeros(k, dtype=np.uint8)
    u_updated = np.zeros(k, dtype=np.uint8)
    preds = np.empty(n, dtype=np.int64)
    half_life = model.average_half_life
    factors = np.empty(n if half_life is not None else 0)
    (n_active, max_norm, n_seen, n_mistakes, refused, avg_ref, n_factors,
     finite) = c.kernel_multiclass_sparse(
        rows.indptr, rows.slots, rows.values, codes, W, bias, updated, U, ubias, u_updated,
        present, u_present, w_new, u_new, n_new, averaged, known, float(model.lr),
        BIAS_CODES[model._bias_mode], float(model._max_norm), int(model._n_seen),
        int(model._n_mistakes), preds, n, m, k, 0.0 if half_life is None else float(half_life),
        float(model._beta), int(model._avg_ref), factors,
    )  # fmt: skip
    if not finite:
        raise ValueError("rows have non-finite values")
    if refused >= 0:  # the kernel stopped at that row: nothing is written back
        raise refusal(int(refused))
    write_sparse_classes(model, classes[known:n_active], classes, names, W, bias, updated, had,
                         w_new, n_new)  # fmt: skip
    if averaged:
        for i in range(n_active):
            model._ub[classes[i]] = float(ubias[i])
        for i in np.flatnonzero(u_updated).tolist():
            write_sparse(model._u[classes[i]], names, U[i], u_had[i], u_new[i, : n_new[k + i]])
        if n_factors:
            _write_rescaled(model, classes[:n_active], names, U, u_updated,
                            factors[:n_factors].tolist())  # fmt: skip
        model._avg_ref = int(avg_ref)
    model._max_norm = float(max_norm)
    model._n_seen = int(n_seen)
    model._n_mistakes = int(n_mistakes)
    model._memo = None
    named = [None, *classes]
    return list(map(named.__getitem__, (preds + 1).tolist()))
