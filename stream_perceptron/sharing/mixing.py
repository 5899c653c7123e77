"""Iterative parameter mixing (McDonald, Hall & Mann 2010) over learner states.

A mixture is the weighted average of the workers' models, computed on the states of
:meth:`~stream_perceptron.learners.StreamClassifier.get_state` so the learners need not know
about it. Weights and biases are averaged. An averaged perceptron predicts with its running
average ``a = w - u / t`` (``u``: the accumulator of the averaging trick, ``t``: examples
seen), so the running averages are averaged too and the accumulator is rebuilt for the
mixture's ``t``: ``u = t (w - a)``; the mixed learner predicts with the mixed average and goes
on averaging from there. (Shared-model mode folds increments instead, which add the averages'
sums as one sequential learner would: :mod:`~stream_perceptron.sharing.increments`.)
Multi-class learners mix per class; a class one worker has not seen counts as the zero vector
there (that is what its model holds for it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stream_perceptron.sharing.layouts import MixError, layout_of, linear_parts, pairs_of

__all__ = ["MixError", "check_mixable", "divergence", "mix_states"]

def check_mixable(states: Sequence[dict[str, Any]], weights: Sequence[float]) -> None:
    if not states or len(states) != len(weights):
        raise MixError("mixing needs one weight per state, and at least one state")
    if any(not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0) for w in weights):
        raise MixError(f"mixing weights must be finite and >= 0, got {list(weights)!r}")
    if not sum(weights) > 0:
        raise MixError("mixing weights sum to 0: nothing to mix")
    first = states[0]
    layout_of(first)  # a MixError for a learner whose states do not mix
    if (first.get("params") or {}).get("average_half_life") is not None:
        raise MixError("a forgetting average (average_half_life) cannot be mixed yet")
    for s in states[1:]:
        if s.get("learner") != first["learner"] or s.get("params") != first["params"]:
            raise MixError(
                f"cannot mix a {s.get('learner')}{s.get('params')} into a "
                f"{first['learner']}{first['params']}: every worker must run the same model"
            )


def mix_states(
    states: Sequence[dict[str, Any]],
    weights: Sequence[float],
    *,
    n_seen: int | None = None,
    n_mistakes: int | None = None,
) -> dict[str, Any]:
    """The weighted average of learner states, as a learner state.

    Parameters
    ----------
    states
        :meth:`~stream_perceptron.learners.StreamClassifier.get_state` of perceptrons (binary
        or multi-class, averaged or not) with the same hyperparameters.
    weights
        One weight >= 0 per state (shared-model mode: the examples each worker learned since
        the last mix); they are normalised.
    n_seen, n_mistakes
        The mixture's counters (shared-model mode: the exact cluster-wide counts); default the
        largest of the states'. ``n_seen`` is also the ``t`` of the averaging accumulators.
    Returns
    -------
    dict
        A state that :meth:`~stream_perceptron.learners.StreamClassifier.from_state` loads;
        features and classes in the order they first appear in ``states``; the generator
        state (random init) of the first state.

    Raises
    ------
    MixError
        If the states cannot be mixed.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> a, b = Perceptron(), Perceptron()
    >>> a.learn_one({"x": 1.0}, True); b.learn_one({"x": -2.0, "z": 1.0}, True)
    >>> mixed = Perceptron.from_state(mix_states([a.get_state(), b.get_state()], [1, 3], n_seen=2))
    >>> mixed.weights, mixed.bias, mixed.n_seen
    ({'x': -1.25, 'z': 0.75}, 1.0, 2)

    """
    check_mixable(states, weights)
    total = math.fsum(weights)
    lambdas = [w / total for w in weights]
    t = max(s["n_seen"] for s in states) if n_seen is None else int(n_seen)
    parts = [linear_parts(s) for s in states]
    mixed: dict[tuple[bool, Any], dict[str, Any]] = {}
    for lam, part, state in zip(lambdas, parts, states):
        t_i = state["n_seen"] or 1  # what average_weights divides by
        for c, p in part.items():
            m = mixed.setdefault(c, {"label": p["label"], "w": {}, "b": 0.0, "a": {}, "ab": 0.0})
            w, a = m["w"], m["a"]
            u = p["u"]
            for k, wk in p["w"].items():
                w[k] = w.get(k, 0.0) + lam * wk
                a[k] = a.get(k, 0.0) + lam * (wk - u.get(k, 0.0) / t_i)
            m["b"] += lam * p["b"]
            m["ab"] += lam * (p["b"] - p["ub"] / t_i)
    classes = []
    for entry in mixed.values():
        w, a = entry["w"], entry["a"]
        # the accumulator that makes w - u / t the mixed average (none before any example)
        u = {k: (t * (w[k] - a[k]) if t else 0.0) for k in w}
        ub = t * (entry["b"] - entry["ab"]) if t else 0.0
        classes.append(
            {
                "label": entry["label"],
                "weights": pairs_of(w),
                "bias": entry["b"],
                "avg_weights_acc": pairs_of(u),
                "avg_bias_acc": ub,
            }
        )
    first = states[0]
    out: dict[str, Any] = {
        "schema_version": first["schema_version"],
        "learner": first["learner"],
        "params": dict(first["params"]),
        "n_seen": t,
        "n_mistakes": (
            max(s["n_mistakes"] for s in states) if n_mistakes is None else int(n_mistakes)
        ),
        "max_norm": max(float(s["max_norm"]) for s in states),
        "rng": first["rng"],
    }
    layout = layout_of(first)
    layout.merge_labels(out, states)
    layout.write(out, classes)
    return out


def divergence(local: dict[str, Any], mixed: dict[str, Any]) -> float:
    """Euclidean norm of the difference between two perceptron states' weights and biases (all
    classes; a feature or class missing from one side counts as 0 there).

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> a, b = Perceptron(), Perceptron()
    >>> a.learn_one({"x": 3.0}, True)
    >>> divergence(a.get_state(), b.get_state())  # sqrt(3**2 + 1**2): weight and bias
    3.1622776601683795

    """
    pa, pb = linear_parts(local), linear_parts(mixed)
    squares = []
    for c in pa.keys() | pb.keys():
        ea, eb = pa.get(c), pb.get(c)
        wa = ea["w"] if ea else {}
        wb = eb["w"] if eb else {}
        for k in wa.keys() | wb.keys():
            squares.append((wa.get(k, 0.0) - wb.get(k, 0.0)) ** 2)
        squares.append(((ea["b"] if ea else 0.0) - (eb["b"] if eb else 0.0)) ** 2)
    return math.sqrt(math.fsum(squares))
