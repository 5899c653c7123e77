"""Increments: what a worker learned between two of its commits, and the arithmetic that folds
them into a mixture and moves a worker onto a newer one.

A perceptron's learning is additive: its weights and biases change by sums of updates, and an
averaged perceptron's running average is ``S / t``, the sum ``S`` over its history of the
weights after each step, kept as ``S = t w - u`` (Daume's form: the accumulator ``u`` sums each
update times the count before it). An increment holds the change of ``w``, of the bias, of
``u`` and of ``t`` between two states of one learner, and ``t0``, the learner's count where it
begins. Every part changes only where an update touched, so an increment is as large as the
features its mistakes touched, averaged or not. So:

* the mixture ``v + 1`` is mixture ``v`` plus ``1 / N`` of every increment's weight and bias
  change not in ``v`` (iterative parameter mixing with uniform, fixed weights over the ``N``
  workers of the live group: each change enters once, with the weight it had when folded, so
  the chain is the mean of ``N`` perceptrons, whatever the timing of the folds), and ``t``
  added. The sum ``S`` gains, per increment, the worker's weights summed over the examples it
  learned: ``dt`` times its weights where the increment began plus ``t1 dw - du`` (``t1`` its
  count where it ends: each update counted for the examples after it). Its weights where it
  began are the mixture it was on (the increment's ``base_version``) plus its own increments
  that mixture did not hold yet (``P``); so the worker sends ``x = dt P + t1 dw - du`` and the
  fold adds ``dt`` times that mixture's weights: mixture ``v``'s less the steps of the mixtures
  since (``lag``, each mixture record carries its step). Written back as the accumulator, ``u'
  = t' w' - S'`` is ``u + sum over increments of (dt lag + (t'/N) dw - x)``: sparse, since
  ``t' w`` and ``S`` move alike where nothing changed. The mixture's running average is over
  every example, each with the weights of the model that learned it, as one sequential
  averaged perceptron's is (with one worker, exactly that learner's);
* a worker moves onto a newer mixture by translation: ``state + (new - old - included)``, where
  ``included`` are its own increments the new mixture holds; what it learned since stays on
  top, exactly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from stream_perceptron.sharing.layouts import (
    MixError,
    key_of,
    layout_of,
    linear_parts,
    pairs_of,
    vector_of,
)
from stream_perceptron.sharing.mixing import check_mixable

__all__ = [
    "Form",
    "credited",
    "fold",
    "fold_step",
    "form",
    "history",
    "increment",
    "share_of",
    "to_state",
    "translate",
    "with_history",
]

#: per class (``None`` for a binary learner): label, weights, bias, accumulators of the average
Parts = dict[tuple[bool, Any], dict[str, Any]]


class Form:
    """A learner state in the linear form increments are made of: ``t`` and, per class,
    ``w``, ``b``, ``u`` (the average's accumulators of the weights) and ``ub`` (of the bias);
    an increment's ``t0``: the learner's count where it begins."""

    __slots__ = ("t", "parts", "t0", "x")

    def __init__(self, t: float, parts: Parts, t0: float = 0.0, x: Parts | None = None) -> None:
        self.t = t
        self.parts = parts
        self.t0 = t0
        #: an averaged increment's sum of the worker's weights over its examples, less ``dt``
        #: times its mixture's (per class: ``w`` for the weights, ``b`` for the bias)
        self.x = x

    def plus(self, other: Form, coef: float = 1.0) -> Form:
        """``self + coef * other``, every part alike."""
        return self._plus(other, coef, coef, 0.0, coef)

    def fold_in(self, step: Form, share: float, t_end: float, lag: Form | None,
                *, inplace: bool = False) -> Form:  # fmt: skip
        """``self`` (a mixture) with the increment ``step`` folded in: its weight and bias
        changes times ``share`` (``1 / N``), its examples added, and its accumulators so that
        the mixture's sum of weights over its history (``t w - u``) gains the worker's over the
        increment's examples (see the module's docstring): ``t_end`` is the mixture's count
        once the whole fold is in, ``lag`` the steps of the mixtures made since the one the
        increment began on; ``inplace``: ``self`` changed and returned (no copy of a large
        mixture per increment)."""
        if step.x is None:  # a plain learner's: no running average, the weights alone
            return self._plus(step, share, 0.0, 0.0, 1.0, inplace=inplace)
        mixed = self._plus(step, share, 0.0, t_end * share, 1.0, inplace=inplace)
        mixed = mixed._plus(Form(0.0, step.x), 0.0, 0.0, -1.0, 0.0, inplace=True)
        if lag is not None:
            mixed = mixed._plus(lag, 0.0, 0.0, step.t, 0.0, inplace=True)
        return mixed

    def _plus(self, other: Form, wc: float, uc: float, uwc: float, tc: float,
              *, inplace: bool = False) -> Form:  # fmt: skip
        """``w + wc dw``, ``u + uc du + uwc dw`` (biases alike), ``t + tc dt``; ``inplace``:
        into ``self``'s parts, returning ``self``."""
        parts = self.parts if inplace else {
            c: {"label": p["label"], "w": dict(p["w"]), "b": p["b"], "u": dict(p["u"]),
                "ub": p["ub"]}
            for c, p in self.parts.items()
        }  # fmt: skip
        for c, q in other.parts.items():
            p = parts.setdefault(c, {"label": q["label"], "w": {}, "b": 0.0, "u": {}, "ub": 0.0})
            w, u = p["w"], p["u"]
            if wc:
                for k, v in q["w"].items():
                    w[k] = w.get(k, 0.0) + wc * v
            if uc:
                for k, v in q["u"].items():
                    u[k] = u.get(k, 0.0) + uc * v
            if uwc:
                for k, v in q["w"].items():
                    u[k] = u.get(k, 0.0) + uwc * v
            p["b"] += wc * q["b"]
            p["ub"] += uc * q["ub"] + uwc * q["b"]
        if inplace:
            self.t += tc * other.t
            return self
        return Form(self.t + tc * other.t, parts, self.t0)

    def encode(self) -> dict[str, Any]:
        """JSON-ready."""
        classes = []
        for c, p in self.parts.items():
            entry = {"label": p["label"], "weights": pairs_of(p["w"]), "bias": p["b"],
                     "acc": pairs_of(p["u"]), "bias_acc": p["ub"]}  # fmt: skip
            if self.x is not None:
                x = self.x.get(c, {"w": {}, "b": 0.0})
                entry.update(sums=pairs_of(x["w"]), sums_bias=x["b"])
            classes.append(entry)
        return {"n": int(round(self.t)), "t0": int(round(self.t0)), "classes": classes}

    @classmethod
    def decode(cls, data: dict[str, Any]) -> Form:
        """From :meth:`encode`; raises :class:`MixError` if malformed (or an earlier
        release's increment, which held the weights' history sums: they cannot be folded
        into this release's mixtures without the weights they started from)."""
        try:
            if any("sum_bias" in e for e in data["classes"]):
                raise MixError(
                    "an increment of an earlier release (history sums of the weights): not "
                    "folded; let that release's leader fold its increments before upgrading"
                )
            t0 = data.get("t0", 0)
            if type(t0) is not int or t0 < 0:
                raise ValueError(f"t0 is {t0!r}, not a count")
            parts: Parts = {}
            x: Parts | None = None
            for e in data["classes"]:
                c = key_of(e["label"])
                parts[c] = {"label": e["label"], "w": vector_of(e["weights"]),
                            "b": float(e["bias"]), "u": vector_of(e["acc"]),
                            "ub": float(e["bias_acc"])}  # fmt: skip
                if "sums" in e:
                    x = {} if x is None else x
                    x[c] = {"label": e["label"], "w": vector_of(e["sums"]),
                            "b": float(e["sums_bias"]), "u": {}, "ub": 0.0}  # fmt: skip
            return cls(int(data["n"]), parts, t0, x)
        except (KeyError, TypeError, ValueError) as e:
            raise MixError(f"malformed increment: {e!r}") from None


def form(state: dict[str, Any]) -> Form:
    """The linear form of a perceptron state (binary or multi-class, averaged or not; a plain
    one has no accumulators: nothing reads its average)."""
    averaged = bool((state.get("params") or {}).get("averaged"))
    parts: Parts = {}
    for c, p in linear_parts(state).items():
        parts[c] = {
            "label": p["label"],
            "w": dict(p["w"]),
            "b": p["b"],
            "u": dict(p["u"]) if averaged else {},
            "ub": p["ub"] if averaged else 0.0,
        }
    return Form(state["n_seen"], parts)


def increment(now: dict[str, Any], then: Form, pending: Sequence[Form] = ()) -> Form:
    """What a learner learned from ``then`` (a form of its earlier state) to ``now``: only the
    features whose weight or accumulator changed, so an increment is as large as the features
    its mistakes touched; its ``t0`` is ``then``'s count. An averaged learner's increment also
    holds ``x = dt P + t1 dw - du``, ``P`` the sum of ``pending``'s weight changes (its own
    increments the mixture it is on does not hold yet)."""
    step = form(now).plus(then, -1.0)
    step.t0 = then.t
    for p in step.parts.values():
        w, u = p["w"], p["u"]
        for k in [k for k, v in w.items() if v == 0.0 and not u.get(k)]:
            del w[k]
            u.pop(k, None)
        for k in [k for k, v in u.items() if v == 0.0 and k not in w]:
            del u[k]
    if (now.get("params") or {}).get("averaged"):
        step.x = _sums(step, pending)
    return step


def _sums(step: Form, pending: Sequence[Form]) -> Parts:
    """``dt P + t1 dw - du`` per class (``P``: ``pending``'s weight changes, summed)."""
    dt, t1 = step.t, step.t0 + step.t
    x: Parts = {}
    for f in pending:
        for c, q in f.parts.items():
            p = x.setdefault(c, {"label": q["label"], "w": {}, "b": 0.0, "u": {}, "ub": 0.0})
            for k, v in q["w"].items():
                p["w"][k] = p["w"].get(k, 0.0) + dt * v
            p["b"] += dt * q["b"]
    for c, q in step.parts.items():
        p = x.setdefault(c, {"label": q["label"], "w": {}, "b": 0.0, "u": {}, "ub": 0.0})
        w = p["w"]
        for k, v in q["w"].items():
            w[k] = w.get(k, 0.0) + t1 * v
        for k, v in q["u"].items():
            w[k] = w.get(k, 0.0) - v
        p["b"] += t1 * q["b"] - q["ub"]
    return x


def history(f: Form) -> Form:
    """An averaged learner's sums of its weights and bias over its history, ``S = t w - u``
    per class, in a form's ``w`` and ``b`` (its ``t`` zero, no accumulators)."""
    parts: Parts = {}
    for c, p in f.parts.items():
        w, u = p["w"], p["u"]
        parts[c] = {"label": p["label"], "w": {k: f.t * w.get(k, 0.0) - u.get(k, 0.0)
                                              for k in w.keys() | u.keys()},
                    "b": f.t * p["b"] - p["ub"], "u": {}, "ub": 0.0}  # fmt: skip
    return Form(0.0, parts)


def with_history(f: Form, sums: Form) -> Form:
    """``f`` with its accumulators set so that its history sums (:func:`history`) are
    ``sums``'s: ``u = t w - S``; weights, biases and count unchanged."""
    parts: Parts = {}
    for c in f.parts.keys() | sums.parts.keys():
        p = f.parts.get(c) or {"label": sums.parts[c]["label"], "w": {}, "b": 0.0}
        q = sums.parts.get(c) or {"w": {}, "b": 0.0}
        w, s = p["w"], q["w"]
        parts[c] = {"label": p["label"], "w": dict(w), "b": p["b"],
                    "u": {k: f.t * w.get(k, 0.0) - s.get(k, 0.0) for k in w.keys() | s.keys()},
                    "ub": f.t * p["b"] - q["b"]}  # fmt: skip
    return Form(f.t, parts, f.t0, f.x)


def credited(step: Form, start: Form) -> Form:
    """An averaged increment's sums of the weights (and bias) over its examples, as the fold
    credits them: ``x + dt`` times ``start``'s weights, ``start`` the mixture the increment
    began on (a form like :func:`history`'s)."""
    total = Form(0.0, {})._plus(start, step.t, 0.0, 0.0, 0.0)
    if step.x is not None:
        total = total._plus(Form(0.0, step.x), 1.0, 0.0, 0.0, 0.0)
    return total


def to_state(template: dict[str, Any], f: Form, *, n_seen: int | None = None) -> dict[str, Any]:
    """The learner state of form ``f``: ``template``'s learner, hyperparameters, labels and
    generator; counters from ``f`` (``n_seen``: instead of ``f.t``, for the accumulators
    too)."""
    t = int(round(f.t)) if n_seen is None else int(n_seen)
    averaged = bool((template.get("params") or {}).get("averaged"))
    classes = []
    for p in f.parts.values():
        u = p["u"]
        w = {**p["w"], **{k: 0.0 for k in u if k not in p["w"]}}
        classes.append(
            {
                "label": p["label"],
                "weights": pairs_of(w),
                "bias": p["b"],
                "avg_weights_acc": pairs_of({k: u.get(k, 0.0) for k in w}) if averaged else [],
                "avg_bias_acc": p["ub"] if averaged else 0.0,
            }
        )  # fmt: skip
    out = {k: v for k, v in template.items() if k not in ("weights", "bias", "classes",
                                                           "avg_weights_acc", "avg_bias_acc")}
    out["n_seen"] = t
    layout_of(template).write(out, classes)
    return out


def share_of(workers: int, folding: int) -> float:
    """The weight ``1 / N`` of a change folded in: ``N`` the live group's size, at least the
    workers whose increments are folded."""
    return 1.0 / max(workers, folding, 1)


def fold_step(fresh: Sequence[Sequence[Form]], share: float) -> Form:
    """The change of the weights and biases a fold makes (``share`` of every increment's),
    sparse: what a mixture record carries as its ``step``."""
    step = Form(0.0, {})
    for steps in fresh:
        for f in steps:
            step._plus(f, share, 0.0, 0.0, 0.0, inplace=True)
    return step


def fold(
    base: dict[str, Any],
    fresh: Sequence[tuple[dict[str, Any], Sequence[Form]]],
    *,
    workers: int = 0,
    lags: Sequence[Sequence[Form | None]] = (),
) -> dict[str, Any]:
    """The next mixture: ``base`` (a learner state) plus, per worker, its increments not in
    ``base`` (``fresh``: per worker a learner state of it, for its labels, hyperparameters and
    norm, and its increments), each worker's weight and bias changes weighted ``1 / N``, the
    counts added, the sums of the running average over every example (:meth:`Form.fold_in`).

    ``N`` is ``workers``, the live group's size (at least the workers in ``fresh``). The
    weight of a change is fixed when it is folded and every change is folded once, so the
    mixture after any number of folds is ``w0 + (1/N) sum_i delta_i`` over every change ever
    learned: the mean of ``N`` perceptrons that each started at ``w0`` and learned their own
    shard (McDonald, Hall & Mann 2010, iterative parameter mixing with uniform weights, whose
    mistake bound holds for such fixed convex weights). A worker that learned nothing since
    the last fold adds nothing (its change is zero). The running average is over every
    example, each with the weights of the model that learned it, as one sequential averaged
    perceptron's is (with one worker, exactly that learner's). ``lags``: per worker, per
    increment, the steps of the mixtures made since the one it began on (``None``: none, or
    unknown; then taken as none).

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
    check_mixable(states, [1.0] * len(states))
    share = share_of(workers, len(fresh))
    mixed = form(base)
    t_end = base["n_seen"] + sum(step.t for _, steps in fresh for step in steps)
    for i, (_, steps) in enumerate(fresh):
        for j, step in enumerate(steps):
            lag = lags[i][j] if i < len(lags) and j < len(lags[i]) else None
            mixed = mixed.fold_in(step, share, t_end, lag, inplace=True)  # its own copy
    out = to_state(base, mixed)
    layout_of(base).merge_labels(out, states)
    out["max_norm"] = max(float(s["max_norm"]) for s in states)
    return out


def translate(
    state: dict[str, Any], by: Sequence[tuple[float, Form]], *, labels_from: Sequence[dict] = ()
) -> dict[str, Any]:
    """``state + sum(coef * f)`` (weights, biases, accumulators and counts alike): a worker moving
    onto a newer mixture, or starting from one with its own increments the mixture lacks."""
    f = form(state)
    for coef, other in by:
        f = f.plus(other, coef)
    out = to_state(state, f)
    if labels_from:
        layout_of(state).merge_labels(out, [state, *labels_from])
    if labels_from:
        out["max_norm"] = max(float(s["max_norm"]) for s in [state, *labels_from])
    return out
