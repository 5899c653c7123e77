"""Increments: what a worker learned between two of its commits, and the arithmetic that folds
them into a mixture and moves a worker onto a newer one.

A perceptron's learning is additive: its weights and biases change by sums of updates, and an
averaged perceptron's running average is ``S / t``, the sum ``S`` over its history of the
weights after each step (``S = t w - u``, :func:`~stream_perceptron.sharing.history_sums`)
divided by the examples seen. An increment holds the change of ``w``, of the bias, of ``S``
and of ``t`` between two states of one learner. So:

* the mixture ``v + 1`` is mixture ``v`` plus ``1 / N`` of every increment not in ``v``
  (iterative parameter mixing with uniform, fixed weights over the ``N`` workers of the live
  group: each change enters once, with the weight it had when folded, so the chain is the mean
  of ``N`` perceptrons, whatever the timing of the folds); the sums ``S`` and ``t`` are
  *added*, so the mixture's running average is the mean over every example of the model that
  learned it, as one sequential averaged perceptron's is;
* a worker moves onto a newer mixture by translation: ``state + (new - old - included)``, where
  ``included`` are its own increments the new mixture holds; what it learned since stays on
  top, exactly.
"""

from __future__ import annotations

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
    """The linear form of a perceptron state (binary or multi-class, averaged or not; a plain
    one has no sums: nothing reads its average)."""
    t = state["n_seen"]
    averaged = bool((state.get("params") or {}).get("averaged"))
    parts: Parts = {}
    for c, p in _linear_parts(state).items():
        u = p["u"]
        parts[c] = {
            "label": p["label"],
            "w": dict(p["w"]),
            "b": p["b"],
            "s": {k: t * wk - u.get(k, 0.0) for k, wk in p["w"].items()} if averaged else {},
            "sb": t * p["b"] - p["ub"] if averaged else 0.0,
        }
    return Form(t, parts)


def increment(now: dict[str, Any], then: Form) -> Form:
    """What a learner learned from ``then`` (a form of its earlier state) to ``now``: only the
    features whose weight (or, averaged, weight sum) changed, so a plain perceptron's
    increment is as large as the features its mistakes touched."""
    step = form(now).plus(then, -1.0)
    for p in step.parts.values():
        w, s = p["w"], p["s"]
        for k in [k for k, v in w.items() if v == 0.0 and not s.get(k)]:
            del w[k]
            s.pop(k, None)
        for k in [k for k, v in s.items() if v == 0.0 and k not in w]:
            del s[k]
    return step


def to_state(template: dict[str, Any], f: Form, *, n_seen: int | None = None) -> dict[str, Any]:
    """The learner state of form ``f``: ``template``'s learner, hyperparameters, labels and
    generator; counters from ``f`` (``n_seen``: instead of ``f.t``, for the accumulators
    too)."""
    t = int(round(f.t)) if n_seen is None else int(n_seen)
    averaged = bool((template.get("params") or {}).get("averaged"))
    classes = []
    for p in f.parts.values():
        s = p["s"]
        w = {**p["w"], **{k: 0.0 for k in s if k not in p["w"]}}
        classes.append(
            {
                "label": p["label"],
                "weights": _pairs(w),
                "bias": p["b"],
                "avg_weights_acc": _pairs({k: t * w[k] - s.get(k, 0.0) for k in w})
                if averaged else [],
                "avg_bias_acc": t * p["b"] - p["sb"] if averaged else 0.0,
            }
        )  # fmt: skip
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
    *,
    workers: int = 0,
) -> dict[str, Any]:
    """The next mixture: ``base`` (a learner state) plus, per worker, its increments not in
    ``base`` (``fresh``: per worker a learner state of it, for its labels, hyperparameters and
    norm, and its increments), each worker's weight and bias changes weighted ``1 / N``, the
    sums and counts added.

    ``N`` is ``workers``, the live group's size (at least the workers in ``fresh``). The
    weight of a change is fixed when it is folded and every change is folded once, so the
    mixture after any number of folds is ``w0 + (1/N) sum_i delta_i`` over every change ever
    learned: the mean of ``N`` perceptrons that each started at ``w0`` and learned their own
    shard (McDonald, Hall & Mann 2010, iterative parameter mixing with uniform weights, whose
    mistake bound holds for such fixed convex weights). A worker that learned nothing since
    the last fold adds nothing (its change is zero). The sums ``S`` and ``t`` of the running
    average are added, so the average is over every example, as one sequential averaged
    perceptron's is.

    Raises
    ------
    MixError
        If the workers run other learners or hyperparameters.

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
    >>> mixed.weights, mixed.bias, mixed.n_seen  # x: (1 + (-2)) / 2
    ({'x': -0.5}, 1.0, 3)

    """
    if not fresh:
        return to_state(base, form(base))  # a new state, like every other outcome
    states = [base, *(state for state, _ in fresh)]
    _check(states, [1.0] * len(states))
    share = 1.0 / max(workers, len(fresh))
    mixed = form(base)
    for _, steps in fresh:
        for step in steps:
            mixed = mixed.plus(step, share, sums_coef=1.0)
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
