"""Iterative parameter mixing (McDonald, Hall & Mann 2010) over learner states.

A mixture is the weighted average of the workers' models, computed on the states of
:meth:`~stream_perceptron.learners.StreamClassifier.get_state` so the learners need not know
about it. Weights and biases are averaged. An averaged perceptron predicts with its running
average ``a = w - u / t`` (``u``: the accumulator of the averaging trick, ``t``: examples
seen). In shared-model mode the mixture's average is made of sums, like one sequential
averaged perceptron's (:func:`history_sums`): each worker's sum of its weights over the steps it
learned since its own last mix (:func:`sums_since`), plus the mixing worker's base average for
the examples before; otherwise the running averages are averaged. Either way the accumulator is
rebuilt for the mixture's ``t``: ``u = t (w - a)``, and the mixed learner predicts with the
mixed average and goes on averaging from there. Multi-class learners mix per class; a class one
worker has not seen counts as the zero vector there (that is what its model holds for it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stream_perceptron.errors import StateError

__all__ = [
    "MixError",
    "divergence",
    "history_sums",
    "mix_states",
    "subtract_sums",
    "sums_since",
]

_MIXABLE = ("Perceptron", "MulticlassPerceptron")


class MixError(StateError):
    """The states cannot be mixed (other learners, other hyperparameters, other labels)."""


def _key(k: Any) -> tuple[bool, Any]:
    # True and 1 are one dict key in Python but distinct features and classes here.
    return (isinstance(k, bool), k)


def _vector(entries: list[list[Any]]) -> dict[tuple[bool, Any], float]:
    return {_key(k): float(v) for k, v in entries}


def _pairs(d: dict[tuple[bool, Any], float]) -> list[list[Any]]:
    return [[k[1], v] for k, v in d.items()]


def _linear_parts(state: dict[str, Any]) -> dict[tuple[bool, Any], dict[str, Any]]:
    """Per class (``None`` for a binary learner): weights, bias, accumulators as dicts."""
    if state["learner"] == "Perceptron":
        entries = [dict(state, label=None)]
    else:
        entries = state["classes"]
    return {
        _key(e["label"]): {
            "label": e["label"],
            "w": _vector(e["weights"]),
            "b": float(e["bias"]),
            "u": _vector(e["avg_weights_acc"]),
            "ub": float(e["avg_bias_acc"]),
        }
        for e in entries
    }


def _check(states: Sequence[dict[str, Any]], weights: Sequence[float]) -> None:
    if not states or len(states) != len(weights):
        raise MixError("mixing needs one weight per state, and at least one state")
    if any(not (isinstance(w, (int, float)) and math.isfinite(w) and w >= 0) for w in weights):
        raise MixError(f"mixing weights must be finite and >= 0, got {list(weights)!r}")
    if not sum(weights) > 0:
        raise MixError("mixing weights sum to 0: nothing to mix")
    first = states[0]
    if first.get("learner") not in _MIXABLE:
        raise MixError(f"a {first.get('learner')!r} cannot be mixed (only {_MIXABLE})")
    if (first.get("params") or {}).get("average_half_life") is not None:
        raise MixError("a forgetting average (average_half_life) cannot be mixed yet")
    for s in states[1:]:
        if s.get("learner") != first["learner"] or s.get("params") != first["params"]:
            raise MixError(
                f"cannot mix a {s.get('learner')}{s.get('params')} into a "
                f"{first['learner']}{first['params']}: every worker must run the same model"
            )


def _labels(states: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The binary label encoding: the settled one (all settled ones must agree)."""
    settled = [s["labels"] for s in states if s["labels"].get("settled")]
    for other in settled[1:]:
        if other != settled[0]:
            raise MixError(f"workers encode labels differently: {settled[0]} and {other}")
    return dict(settled[0] if settled else states[0]["labels"])


def history_sums(state: dict[str, Any]) -> dict[str, Any]:
    """What a perceptron state's running average divides by its ``t``: per class, the sum over
    its history of the weights and bias after each step (``t w - u``; for a learner that does not
    average, ``u`` is 0 and this is ``t w``), as JSON-ready ``{"n": t, "classes": [...]}``.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> p = Perceptron(averaged=True)
    >>> p.learn_one({"x": 1.0}, True); p.learn_one({"x": 2.0}, True)
    >>> history_sums(p.get_state())  # after step 1: w = 1, b = 1; step 2: no mistake
    {'n': 2, 'classes': [{'label': None, 'weights': [['x', 2.0]], 'bias': 2.0}]}

    """
    t = state["n_seen"]
    return {
        "n": t,
        "classes": [
            {
                "label": p["label"],
                "weights": _pairs({k: t * wk - p["u"].get(k, 0.0) for k, wk in p["w"].items()}),
                "bias": t * p["b"] - p["ub"],
            }
            for p in _linear_parts(state).values()
        ],
    }


def sums_since(state: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The sums (:func:`history_sums`) of ``state`` over the steps it learned on top of the model
    whose history sums are ``base``: what a worker's publication adds to a mixture's average."""
    return subtract_sums(history_sums(state), base)


def subtract_sums(sums: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``sums - other`` (both as :func:`history_sums` returns them), class by class, feature by
    feature (a class or feature missing from one side is 0 there).

    Examples
    --------
    >>> a = {"n": 5, "classes": [{"label": None, "weights": [["x", 3.0]], "bias": 2.0}]}
    >>> b = {"n": 2, "classes": [{"label": None, "weights": [["z", 1.0]], "bias": 0.5}]}
    >>> subtract_sums(a, b)
    {'n': 3, 'classes': [{'label': None, 'weights': [['x', 3.0], ['z', -1.0]], 'bias': 1.5}]}

    """
    mine, theirs = _sums_parts(sums), _sums_parts(other)
    classes = []
    for c, (label, w, b) in mine.items():
        _, wo, bo = theirs.get(c, (label, {}, 0.0))
        diff = {k: v - wo.get(k, 0.0) for k, v in w.items()}
        for k, v in wo.items():
            if k not in diff:
                diff[k] = -v
        classes.append({"label": label, "weights": _pairs(diff), "bias": b - bo})
    for c, (label, wo, bo) in theirs.items():
        if c not in mine:
            classes.append({"label": label, "weights": _pairs({k: -v for k, v in wo.items()}),
                            "bias": -bo})  # fmt: skip
    return {"n": int(sums["n"]) - int(other["n"]), "classes": classes}


def _sums_parts(sums: dict[str, Any]) -> dict[tuple[bool, Any], tuple[Any, dict, float]]:
    try:
        return {
            _key(e["label"]): (e["label"], _vector(e["weights"]), float(e["bias"]))
            for e in sums["classes"]
        }
    except (KeyError, TypeError, ValueError) as e:
        raise MixError(f"malformed weight sums: {e!r}") from None


def mix_states(
    states: Sequence[dict[str, Any]],
    weights: Sequence[float],
    *,
    n_seen: int | None = None,
    n_mistakes: int | None = None,
    base: dict[str, Any] | None = None,
    local: Sequence[dict[str, Any] | None] | None = None,
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
    base, local
        The history sums (:func:`history_sums`) of the mixture the mixing worker learned on,
        and per state the sums of its weights over the ``weights[i]`` steps it learned locally
        (:func:`sums_since` its own base; ``None``: its running average times its weight).
        The running averages are then combined as sums, as one sequential averaged perceptron
        would have them: every worker's sum over its own local steps, plus the base's average
        for the ``n_seen - sum(weights)`` other examples, divided by ``n_seen``; not the
        average of the averages, which gives each worker's recent models a third of their
        weight at 3 workers. Each worker's local sums are taken against its *own* base: workers
        mix at their own times, so their bases differ.

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
    _check(states, weights)
    if local is not None and len(local) != len(states):
        raise MixError("mixing needs one local sum (or None) per state")
    total = math.fsum(weights)
    lambdas = [w / total for w in weights]
    t = max(s["n_seen"] for s in states) if n_seen is None else int(n_seen)
    parts = [_linear_parts(s) for s in states]
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
    if base is not None:
        _sum_averages(mixed, parts, states, weights, base, local or [None] * len(states), t)
    classes = []
    for entry in mixed.values():
        w, a = entry["w"], entry["a"]
        # the accumulator that makes w - u / t the mixed average (none before any example)
        u = {k: (t * (w[k] - a[k]) if t else 0.0) for k in w}
        ub = t * (entry["b"] - entry["ab"]) if t else 0.0
        classes.append(
            {
                "label": entry["label"],
                "weights": _pairs(w),
                "bias": entry["b"],
                "avg_weights_acc": _pairs(u),
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
    if first["learner"] == "Perceptron":
        only = classes[0]
        out.update(
            labels=_labels(states),
            weights=only["weights"],
            bias=only["bias"],
            avg_weights_acc=only["avg_weights_acc"],
            avg_bias_acc=only["avg_bias_acc"],
        )
    else:
        out["classes"] = classes
    return out


def _sum_averages(
    mixed: dict[tuple[bool, Any], dict[str, Any]],
    parts: list[dict[tuple[bool, Any], dict[str, Any]]],
    states: Sequence[dict[str, Any]],
    weights: Sequence[float],
    base: dict[str, Any],
    local: Sequence[dict[str, Any] | None],
    t: int,
) -> None:
    """Replace the mixed running averages by ``(rest a_base + sum_i L_i) / t``: ``L_i`` is worker
    i's sum of weights over its ``k_i`` local steps (given, or its average times ``k_i``),
    ``rest = t - sum k_i`` the examples before them, stood for by the base's average."""
    rest = t - math.fsum(weights)
    if not t or rest < 0:
        return
    base_parts = _sums_parts(base)
    t_base = base["n"] or 1
    local_parts = [_sums_parts(sums) if sums is not None else None for sums in local]
    for c, entry in mixed.items():
        _, base_w, base_b = base_parts.get(c, (None, {}, 0.0))
        scale = rest / t_base
        sums = {k: scale * v for k, v in base_w.items()}
        sum_b = scale * base_b
        for part, state, k_i, given in zip(parts, states, weights, local_parts):
            if given is not None:
                _, lw, lb = given.get(c, (None, {}, 0.0))
            else:  # its own running average over its k_i steps
                p = part.get(c)
                if p is None:
                    continue
                t_i = state["n_seen"] or 1
                lw = {k: k_i * (wk - p["u"].get(k, 0.0) / t_i) for k, wk in p["w"].items()}
                lb = k_i * (p["b"] - p["ub"] / t_i)
            for k, v in lw.items():
                sums[k] = sums.get(k, 0.0) + v
            sum_b += lb
        entry["a"] = {k: sums.get(k, 0.0) / t for k in entry["w"]}
        entry["ab"] = sum_b / t


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
    pa, pb = _linear_parts(local), _linear_parts(mixed)
    squares = []
    for c in pa.keys() | pb.keys():
        ea, eb = pa.get(c), pb.get(c)
        wa = ea["w"] if ea else {}
        wb = eb["w"] if eb else {}
        for k in wa.keys() | wb.keys():
            squares.append((wa.get(k, 0.0) - wb.get(k, 0.0)) ** 2)
        squares.append(((ea["b"] if ea else 0.0) - (eb["b"] if eb else 0.0)) ** 2)
    return math.sqrt(math.fsum(squares))
