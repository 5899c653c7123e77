"""The learners' shared arithmetic: sparse dot products and norms (refused when not finite),
scores to probabilities, argmax, the multi-class margins, and the check that keeps boolean and
numeric classes apart."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.lazy_numpy import is_bool

__all__ = [
    "add_scaled",
    "argmax",
    "check_class_kind",
    "class_margins",
    "finite",
    "norm",
    "norm_of",
    "sigmoid",
    "softmax",
    "sparse_dot",
    "sq_norm_of",
    "too_large",
]


def sigmoid(s: float) -> float:
    """Logistic function, clamped like River's so that large scores give exactly 0 or 1."""
    if s < -30:
        return 0.0
    if s > 30:
        return 1.0
    return 1.0 / (1.0 + math.exp(-s))


def softmax(scores: dict[Any, float]) -> dict[Any, float]:
    """Softmax of a dict of scores (numerically stable)."""
    if not scores:
        return {}
    top = max(scores.values())
    exps = {k: math.exp(s - top) for k, s in scores.items()}
    total = sum(exps.values())
    return {k: e / total for k, e in exps.items()}


def norm(v: Iterable[float]) -> float:
    """Euclidean norm of the values."""
    return math.sqrt(math.fsum(value * value for value in v))


_INF = math.inf


def finite(v: Any) -> bool:
    """Whether the number ``v`` is finite (NaN and infinities are not; an int of any size is)."""
    return -_INF < v < _INF


def too_large(what: str) -> ValueTooLargeError:
    """The error of an example the learner refuses: learning it would make ``what`` non-finite."""
    return ValueTooLargeError(f"learning this example would make {what} non-finite")


def norm_of(x: dict) -> float:
    """R of ``x`` as the perceptrons compute it: ``sq += v * v`` in x's order (a plain left
    fold from 0.0, not ``sum()``, which compensates from Python 3.12 on), ``math.sqrt(sq)``.
    Raises :class:`ValueTooLargeError` when it is not finite (a value inf or NaN, squares
    overflowing, an int too large for a float)."""
    return math.sqrt(sq_norm_of(x))


def sq_norm_of(x: dict) -> float:
    """R squared as :func:`norm_of` computes it (before ``math.sqrt``), refused the same way
    (the square root of a finite sum of squares is finite, and only of one)."""
    sq = 0.0
    try:
        for v in x.values():
            sq += v * v
    except OverflowError:
        raise too_large("R (the largest input norm)") from None
    if not -_INF < sq < _INF:
        raise too_large("R (the largest input norm)")
    return sq


def sparse_dot(w: dict, x: dict) -> float:
    """``sum w[k]*v`` over x's keys in ``w``: a left fold from 0.0 in x's order (not ``sum()``,
    which compensates from Python 3.12 on), as every learner computes it."""
    dot = 0.0
    for k, v in x.items():
        wk = w.get(k)
        if wk is not None:
            dot += wk * v
    return dot


def argmax(scores: dict[Any, float]) -> Any:
    """The class of the highest score, the first on ties (``None`` when there is none); ``NaN``
    never beats another score."""
    best, best_score = None, -math.inf
    for c, s in scores.items():
        if best is None or s > best_score:
            best, best_score = c, s
    return best


def add_scaled(speedups: Any, x: dict, *targets: Any) -> bool:
    """``d[k] = d.get(k, 0.0) + a * v`` for every item of ``x`` (in x's order) and every pair
    ``d, a`` of ``targets`` (``d1, a1, d2, a2, ...``: distinct dicts), all or nothing: False,
    nothing written, when a new value would not be finite (or an int product does not fit a
    float). ``speedups``: the C helpers (``None``: this loop, the reference), whose
    ``axpy_finite`` does the same to the last bit."""
    if speedups is not None:
        done = speedups.axpy_finite(x, *targets)
        if done is not None:
            return bool(done)
    updates = []
    try:
        for i in range(0, len(targets), 2):
            d, a = targets[i], targets[i + 1]
            new = [(k, d.get(k, 0.0) + a * v) for k, v in x.items()]
            for _, value in new:
                if not -_INF < value < _INF:
                    return False
            updates.append((d, new))
    except OverflowError:
        return False
    for d, new in updates:
        for k, value in new:
            d[k] = value
    return True


def check_class_kind(classes: dict, y: Any) -> None:
    """Raise :class:`LabelError` when ``y`` is a boolean and an equal class (``1`` for
    ``True``, ``0`` for ``False``) is not, or the other way round: equal dict keys, but the
    README's booleans are their own classes. The class is refused, not merged."""
    if y.__class__ is str or y is None:
        return
    y_bool = is_bool(y)
    if not y_bool:
        try:
            if not (y == 0 or y == 1):
                return
        except (TypeError, ValueError):  # an array-like label: not comparable to a bool
            return
    if y not in classes:
        return
    for c in classes:
        if c == y:
            if is_bool(c) != y_bool:
                raise LabelError(
                    f"label {y!r} ({type(y).__name__}) is equal to the class {c!r}"
                    f" ({type(c).__name__}): booleans and numbers are distinct classes"
                )
            return


def class_margins(
    scores: dict[Any, float],
    y: Any,
    vectors: dict[Any, dict[Any, float]],
    distances: dict[tuple[Any, Any], float] | None = None,
) -> tuple[float, float]:
    """Functional margin (score of ``y`` minus the best other score) and geometric margin (that
    divided by the distance between the two classes' vectors) of a multi-class linear rule.
    ``distances``: a cache of those distances, for many examples under the same vectors."""
    if y not in scores:
        return -math.inf, -math.inf
    if len(scores) < 2:
        return math.inf, math.inf
    rival = max((c for c in scores if c != y), key=scores.__getitem__)
    functional = scores[y] - scores[rival]
    distance = None if distances is None else distances.get((y, rival))
    if distance is None:
        wy, wr = vectors[y], vectors[rival]
        distance = norm(wy.get(k, 0.0) - wr.get(k, 0.0) for k in wy.keys() | wr.keys())
        if distances is not None:
            distances[(y, rival)] = distance
    return functional, (functional / distance if distance else 0.0)
