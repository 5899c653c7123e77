"""Increments: what a worker learned between two of its commits, and the arithmetic that folds
them into a mixture and moves a worker onto a newer one.

A perceptron's learning is additive: its weights and biases change by sums of updates, and an
averaged perceptron's running average is ``S / t``, the sum ``S`` over its history of the
weights after each step (``S = t w - u``, :func:`~stream_perceptron.sharing.history_sums`)
divided by the examples seen. An increment holds the change of ``w``, of the bias, of ``S``
and of ``t`` between two states of one learner. So:

* the mixture ``v + 1`` is mixture ``v`` plus, per worker, the *weighted average* of the
  workers' increments not in ``v`` (iterative parameter mixing: each worker's local model is
  ``base + delta``, and the mixture of the local models is ``base + sum_i lambda_i delta_i``,
  with ``lambda_i`` the worker's share of the examples); the sums ``S`` and ``t`` are *added*, so
  the mixture's running average is the mean over every example of the model that learned it, as
  one sequential averaged perceptron's is;
* a worker moves onto a newer mixture by translation: ``state + (new - old - included)``, where
  ``included`` are its own increments the new mixture holds; what it learned since stays on
  top, exactly.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from stream_perceptron.sharing.mixing import (
    MixError,
    _check,
    _key,
    _labels,
    _linear_parts,
    _pairs,
    _vector,
)

__all__ = ["Form", "fold", "form", "increment", "translate", "to_state"]

#: per class (``None`` for a binary learner): label, weights, bias, weight sums, bias sum
Parts = dict[tuple[bool, Any], dict[str, Any]]


class Form:
    """A learner state in the linear form increments are made of: ``t`` and, per class,
    ``w``, ``b``, ``s`` (the history sums of the weights) and ``sb`` (of the bias)."""

    __slots__ = ("t", "parts")

    def __init__(self, t: float, parts: Parts) -> None:
        self.t = t
        self.parts = parts

    def plus(self, other: Form, coef: float = 1.0, *, sums_coef: float | None = None) -> Form:
        """``self + coef * other`` for the weights and biases, ``self + sums_coef * other``
        (default ``coef``) for the sums and ``t``."""
        sc = coef if sums_coef is None else sums_coef
        parts = {
            c: {"label": p["label"], "w": dict(p["w"]), "b": p["b"], "s": dict(p["s"]),
                "sb": p["sb"]}
            for c, p in self.parts.items()
        }  # fmt: skip
        for c, q in other.parts.items():
            p = parts.setdefault(c, {"label": q["label"], "w": {}, "b": 0.0, "s": {}, "sb": 0.0})
            w, s = p["w"], p["s"]
            for k, v in q["w"].items():
                w[k] = w.get(k, 0.0) + coef * v
            for k, v in q["s"].items():
                s[k] = s.get(k, 0.0) + sc * v
            p["b"] += coef * q["b"]
            p["sb"] += sc * q["sb"]
        return Form(self.t + sc * other.t, parts)

    def encode(self) -> dict[str, Any]:
        """JSON-ready."""
        return {
            "n": int(round(self.t)),
            "classes": [
                {"label": p["label"], "weights": _pairs(p["w"]), "bias": p["b"],
                 "sums": _pairs(p["s"]), "sum_bias": p["sb"]}
                for p in self.parts.values()
            ],
        }  # fmt: skip

    @classmethod
    def decode(cls, data: dict[str, Any]) -> Form:
        """From :meth:`encode`; raises :class:`MixError` if malformed."""
        try:
            return cls(
                int(data["n"]),
                {
                    _key(e["label"]): {
                        "label": e["label"],
                        "w": _vector(e["weights"]),
                        "b": float(e["bias"]),
                        "s": _vector(e["sums"]),
                        "sb": float(e["sum_bias"]),
                    }
                    for e in data["classes"]
                },
            )
        except (KeyError, TypeError, ValueError) as e:
            raise MixError(f"malformed increment: {e!r}") from None


def form(state: dict[str, Any]) -> Form:
    """The linear form of a perceptron state (binary or multi-class, averaged or not)."""
    t = state["n_seen"]
    parts: Parts = {}
    for c, p in _linear_parts(state).items():
        u = p["u"]
        parts[c] = {
            "label": p["label"],
            "w": dict(p["w"]),
            "b": p["b"],
            "s": {k: t * wk - u.get(k, 0.0) for k, wk in p["w"].items()},
            "sb": t * p["b"] - p["ub"],
        }
    return Form(t, parts)


def increment(now: dict[str, Any], then: Form) -> Form:
    """What a learner learned from ``then`` (a form of its earlier state) to ``now``."""
    return form(now).plus(then, -1.0)


def to_state(template: dict[str, Any], f: Form, *, n_seen: int | None = None) -> dict[str, Any]:
    """The learner state of form ``f``: ``template``'s learner, hyperparameters, labels and
    generator; counters from ``f`` (``n_seen``: instead of ``f.t``, for the accumulators
    too)."""
    t = int(round(f.t)) if n_seen is None else int(n_seen)
    classes = []
    for p in f.parts.values():
        s = p["s"]
        w = {**p["w"], **{k: 0.0 for k in s if k not in p["w"]}}
        classes.append(
            {
                "label": p["label"],
                "weights": _pairs(w),
                "bias": p["b"],
                "avg_weights_acc": _pairs({k: t * w[k] - s.get(k, 0.0) for k in w}),
                "avg_bias_acc": t * p["b"] - p["sb"],
            }
        )
    out = {k: v for k, v in template.items() if k not in ("weights", "bias", "classes",
                                                           "avg_weights_acc", "avg_bias_acc")}
    out["n_seen"] = t
    if template["learner"] == "Perceptron":
        only = classes[0] if classes else {"weights": [], "bias": 0.0, "avg_weights_acc": [],
                                           "avg_bias_acc": 0.0}  # fmt: skip
        out.update(
            weights=only["weights"], bias=only["bias"],
            avg_weights_acc=only["avg_weights_acc"], avg_bias_acc=only["avg_bias_acc"],
        )  # fmt: skip
    else:
        out["classes"] = classes
    return out


def fold(
    base: dict[str, Any],
    fresh: Sequence[tuple[dict[str, Any], Sequence[Form]]],
) -> dict[str, Any]:
    """The next mixture: ``base`` (a learner state) plus, per worker, its increments not in
    ``base`` (``fresh``: per worker a learner state of it, for its labels, hyperparameters and
    norm, and its increments), weights and biases by the workers' shares of the examples, sums
    and counts added.

    Raises
    ------
    MixError
        If the workers run other learners or hyperparameters, or encode labels differently.

    Examples
    --------
    >>> from stream_perceptron import Perceptron
    >>> base = Perceptron().get_state()
    >>> a, b = Perceptron(), Perceptron()
    >>> a.learn_one({"x": 1.0}, True)
    >>> b.learn_one({"x": -2.0}, True); b.learn_one({"x": 1.0}, False)
    >>> step_a = increment(a.get_state(), form(base))
    >>> step_b = increment(b.get_state(), form(base))
    >>> mixed = Perceptron.from_state(fold(base, [(a.get_state(), [step_a]),
    ...                                           (b.get_state(), [step_b])]))
    >>> b.weights, b.bias  # its second example was no mistake
    ({'x': -2.0}, 1.0)
    >>> mixed.weights, mixed.bias, mixed.n_seen  # x: (1 * 1 + 2 * (-2)) / 3
    ({'x': -1.0}, 1.0, 3)

    """
    if not fresh:
        return to_state(base, form(base))  # a new state, like every other outcome
    states = [base, *(state for state, _ in fresh)]
    _check(states, [1.0] * len(states))
    per_worker = []
    for _, steps in fresh:
        total = Form(0, {})
        for step in steps:
            total = total.plus(step)
        per_worker.append(total)
    examples = math.fsum(f.t for f in per_worker)
    mixed = form(base)
    for f in per_worker:
        share = f.t / examples if examples else 1.0 / len(per_worker)
        mixed = mixed.plus(f, share, sums_coef=1.0)
    out = to_state(base, mixed)
    if base["learner"] == "Perceptron":
        out["labels"] = _labels(states)
    out["max_norm"] = max(float(s["max_norm"]) for s in states)
    return out


def translate(
    state: dict[str, Any], by: Sequence[tuple[float, Form]], *, labels_from: Sequence[dict] = ()
) -> dict[str, Any]:
    """``state + sum(coef * f)`` (weights, biases, sums and counts alike): a worker moving
    onto a newer mixture, or starting from one with its own increments the mixture lacks."""
    f = form(state)
    for coef, other in by:
        f = f.plus(other, coef)
    out = to_state(state, f)
    if state["learner"] == "Perceptron" and labels_from:
        out["labels"] = _labels([state, *labels_from])
    if labels_from:
        out["max_norm"] = max(float(s["max_norm"]) for s in [state, *labels_from])
    return out
