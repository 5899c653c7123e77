"""The plausibility checks of model-topic records: how far a perceptron's weights can move in
``n`` updates (the bound ``|w| <= lr R n``), on a mixture's or an increment's weights."""

from __future__ import annotations

import math
from typing import Any

from stream_perceptron.sharing import MixError
from stream_perceptron.sharing.increments import Form
from stream_perceptron.sharing.layouts import layout_of
from stream_perceptron.sharing.records import RecordFormatError

__all__ = ["as_delta", "check_bound"]

#: relative slack of the weight bound (rounding of sums of many updates)
_SLACK = 1e-6


def as_delta(state: dict[str, Any]) -> dict[str, Any]:
    """A learner state's weights, biases and averaging accumulators in the increments'
    encoding (to check them)."""
    try:
        classes = layout_of(state).entries(state)
    except MixError as e:
        raise RecordFormatError(str(e)) from None
    return {
        "n": state["n_seen"],
        "classes": [{"label": c["label"], "weights": c["weights"], "bias": c["bias"],
                     "acc": c.get("avg_weights_acc", []), "bias_acc": c.get("avg_bias_acc", 0.0)}
                    for c in classes],
    }  # fmt: skip


def check_bound(step: Form, described: dict[str, Any], n: int, what: str) -> None:
    """Refuse weights a perceptron cannot reach in ``n`` updates: each update moves a class's
    weights by ``lr * x`` (``|x| <= R``, the largest input norm) and its bias by ``lr`` (``R**2``
    with ``bias="r2"``), so after ``n`` examples ``|w| <= lr R n`` and ``|b| <= lr n`` (``R**2
    n``) on top of the initial weights (zero, or small normal draws)."""
    params = described.get("params") or {}
    try:
        lr = abs(float(params.get("lr", 1.0)))
        r = float(described.get("max_norm", 0.0))
    except (TypeError, ValueError):
        raise RecordFormatError(f"{what}: lr or max_norm is not a number") from None
    if not (math.isfinite(lr) and math.isfinite(r) and r >= 0):
        raise RecordFormatError(f"{what}: lr or max_norm is not finite", "non_finite")
    bias_step = r * r if params.get("bias") == "r2" else lr
    for p in step.parts.values():
        numbers = [*p["w"].values(), *p["u"].values(), p["b"], p["ub"]]
        if not all(map(math.isfinite, numbers)):
            raise RecordFormatError(
                f"{what}: a weight, bias or accumulator is not finite", "non_finite"
            )
        start = math.sqrt(len(p["w"])) if params.get("init") == "random" else 0.0
        norm = math.sqrt(math.fsum(v * v for v in p["w"].values()))
        if norm > (lr * r * n + start) * (1 + _SLACK) + _SLACK:
            raise RecordFormatError(
                f"{what}: weights of norm {norm:.6g} after {n} examples of norm <= {r:.6g} "
                f"(at most {lr * r * n + start:.6g})", "implausible",
            )  # fmt: skip
        if abs(p["b"]) > bias_step * n * (1 + _SLACK) + _SLACK:
            raise RecordFormatError(
                f"{what}: a bias of {p['b']:.6g} after {n} examples (at most "
                f"{bias_step * n:.6g})", "implausible",
            )  # fmt: skip
