"""What the metrics and the live page show of a model, computed once at read time (never in the
learning loop): its largest weights, biases, norms, R, and the theory's margin and mistake bound
over the window of recent examples."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from typing import Any

from stream_perceptron.lazy_numpy import np
from stream_perceptron.learners.preprocessed import Preprocessed

__all__ = ["MARGIN_BINS", "MARGIN_QUANTILES", "ModelView", "margin_summary", "model_view",
           "per_class", "top_weights"]  # fmt: skip

#: the quantiles of the recent margins shown (metrics and page)
MARGIN_QUANTILES = (0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 1.0)
#: bins of the page's margin histogram, between the smallest and the largest recent margin
MARGIN_BINS = 20


def per_class(value: Any) -> dict[str, Any]:
    """A binary learner's float as {"": value}; a multi-class dict keyed by class text."""
    if isinstance(value, dict):
        return {str(c): v for c, v in value.items()}
    return {"": value}


def top_weights(weights: dict, k: int) -> tuple[list[tuple[str, str, float]], int]:
    """The ``k`` weights largest in absolute value as (class, feature, weight), and the number
    of non-zero weights.

    Examples
    --------
    >>> top_weights({"a": 0.5, "b": -2.0, "c": 0.0}, 1)
    ([('', 'b', -2.0)], 2)
    >>> top_weights({"x": {"a": 1.0}, "y": {"a": -3.0, "b": 2.0}}, 2)
    ([('y', 'a', -3.0), ('y', 'b', 2.0)], 3)

    """
    entries: list[tuple[str, str, float]] = []
    for c, wc in per_class(weights).items():
        if isinstance(wc, dict):
            entries += [(c, str(f), w) for f, w in wc.items() if w != 0.0]
        elif wc != 0.0:  # a binary learner: wc is one weight, c its feature
            entries.append(("", c, wc))
    return heapq.nlargest(k, entries, key=lambda e: abs(e[2])), len(entries)


@dataclass
class ModelView:
    """A model as the metrics and the live page show it."""

    top: list[tuple[str, str, float]]  # (class, feature, weight), largest |weight| first
    nonzero: int
    bias: dict[str, float]  # per class ("" for a binary model)
    weight_norm: dict[str, float]
    radius: float  # R: the largest input norm seen
    classes: int
    margin_min: float | None  # over the recent window, when it is classified correctly
    mistake_bound: float | None  # (R_window / margin_min)^2
    #: the recent window's geometric margins: quantiles ``[(q, margin)]``, the share on the wrong
    #: side of the hyperplane (margin <= 0) and a histogram ``(edges, counts)``; None without
    #: a window
    margin_quantiles: list[tuple[float, float]] | None = None
    wrong_side: float | None = None
    margin_histogram: tuple[list[float], list[int]] | None = None


def margin_summary(
    margins: list[float],
) -> tuple[list[tuple[float, float]], float, tuple[list[float], list[int]]] | None:
    """Quantiles (numpy's, linear), the share <= 0 and a :data:`MARGIN_BINS`-bin histogram of
    the finite ``margins`` (None if there is none).

    >>> q, wrong, (edges, counts) = margin_summary([-0.5, 0.25, 0.5, 1.0])
    >>> q[0], q[3], wrong, sum(counts), edges[0], edges[-1]
    ((0.0, -0.5), (0.5, 0.375), 0.25, 4, -0.5, 1.0)
    """
    finite = np.asarray(margins, dtype=float)
    finite = finite[np.isfinite(finite)]
    if not finite.size:
        return None
    quantiles = np.quantile(finite, MARGIN_QUANTILES).tolist()
    counts, edges = np.histogram(finite, bins=MARGIN_BINS)
    return (list(zip(MARGIN_QUANTILES, quantiles)), float(np.mean(finite <= 0)),
            (edges.tolist(), counts.tolist()))  # fmt: skip


def model_view(learner: Any, recent: list[tuple[Any, Any]], max_weights: int) -> ModelView:
    """The view of ``learner`` (call with the engine's lock held); ``recent``: the engine's
    window of labelled examples, a dense row kept as ``((names, values), y)``."""
    top, nonzero = top_weights(learner.weights, max_weights)
    margin_min = bound = None
    summary = None
    if recent:
        examples = [
            (x if isinstance(x, dict) else dict(zip(x[0], x[1].tolist())), y) for x, y in recent
        ]
        model = learner
        if isinstance(learner, Preprocessed):  # margins and R where the model learns: scaled
            examples = [(learner.transform_one(x), y) for x, y in examples]
            model = learner.model
        try:
            margins = model.geometric_margins(examples)
        except ValueError:  # a label the model cannot score
            margins = []
        summary = margin_summary(margins)
        smallest = min(margins, default=0.0)
        if smallest > 0 and not math.isinf(smallest):
            radius = max(math.sqrt(sum(v * v for v in x.values())) for x, _ in examples)
            margin_min, bound = smallest, (radius / smallest) ** 2
    return ModelView(
        top=top,
        nonzero=nonzero,
        bias=per_class(learner.bias),
        weight_norm=per_class(learner.weight_norm),
        radius=learner.max_norm,
        classes=len(learner.classes) if learner._multiclass else 2,  # River: multi-class or not
        margin_min=margin_min,
        mistake_bound=bound,
        margin_quantiles=None if summary is None else summary[0],
        wrong_side=None if summary is None else summary[1],
        margin_histogram=None if summary is None else summary[2],
    )
