"""What the linear learners share: the binary rule ``w.x + b`` and the multi-class rule
``argmax_k w_k.x + b_k`` (labels, weights, margins, state), and the hyperparameters of both
perceptrons with the plain and the forgetting average."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from stream_perceptron.learners._base import MulticlassClassifier, StreamClassifier
from stream_perceptron.learners._init_weights import WeightInitializer
from stream_perceptron.learners._maths import class_margins, norm, sigmoid, sparse_dot
from stream_perceptron.learners._state import pairs
from stream_perceptron.learners.labels import BinaryLabels
from stream_perceptron.state import keyed, number

__all__ = [
    "BIAS_MODES",
    "BinaryLinearModel",
    "LinearHyperparameters",
    "MIN_HALF_LIFE",
    "MulticlassLinearModel",
    "RENORMALISE_HALF_LIVES",
    "check_half_life",
]

BIAS_MODES = ("learned", "r2", "none")


class BinaryLinearModel(StreamClassifier):
    """What the binary linear rules ``s = w.x + b`` share (the perceptron and the PA learner):
    labels mapped to -1/+1 by :class:`BinaryLabels`, ``_learn(x, sign)`` returning the score
    before learning, and the model as numbers. ``_score`` is the score predictions use."""

    _labels: BinaryLabels
    _w: dict[Any, float]
    _b: float

    def learn_one(self, x: dict, y: Any) -> None:
        labels = self._labels
        if labels.settled:  # the usual case: the encoding cannot change
            self._learn(x, labels.encode(y))
            return
        sign, setting = labels.propose(y)
        self._learn(x, sign)
        labels.commit(setting)  # once learned: a refused example leaves the encoding open

    def _learn(self, x: dict, y: int) -> float:
        raise NotImplementedError

    def check_label(self, y: Any) -> None:
        self._labels.propose(y)  # raises for a label outside the encoding; changes nothing

    def _plain_score(self, x: dict) -> float:
        return sparse_dot(self._w, x) + self._b

    def _score(self, x: dict) -> float:
        return self._plain_score(x)

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return self._labels.decode(1 if self._score(x) > 0 else -1)

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        p = sigmoid(self._score(x))
        return {self._labels.negative: 1.0 - p, self._labels.positive: p}

    @property
    def weights(self) -> dict[Any, float]:
        """Feature -> weight (a copy)."""
        return dict(self._w)

    @property
    def bias(self) -> float:
        """The learned bias b (the ``bias`` hyperparameter is :attr:`bias_mode`)."""
        return self._b

    @property
    def weight_norm(self) -> float:
        """||w||, the bias excluded."""
        return norm(self._w.values())

    def margin(self, x: dict, y: Any) -> float:
        """Functional margin ``y * (w.x + b)`` of ``(x, y)`` under the current weights."""
        return self._labels.encode_known(y) * self._plain_score(x)

    def geometric_margin(self, x: dict, y: Any) -> float:
        """Signed distance of ``x`` to the hyperplane, positive when on ``y``'s side."""
        n = self.weight_norm
        return self.margin(x, y) / n if n else 0.0

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        """``geometric_margin`` of each example, ||w|| computed once."""
        n = self.weight_norm
        return [self.margin(x, y) / n if n else 0.0 for x, y in examples]

    def _linear_payload(self) -> dict[str, Any]:
        return {"labels": self._labels.get_state(), "weights": pairs(self._w), "bias": self._b}

    def _load_linear_payload(self, state: dict[str, Any]) -> None:
        self._labels = BinaryLabels.from_state(state["labels"])
        self._w = keyed(state["weights"], "weights")
        self._b = number(state["bias"], "bias")


class MulticlassLinearModel(MulticlassClassifier):
    """What the multi-class linear rules ``argmax_k w_k.x + b_k`` share (the multi-class
    perceptron and PA learner): the model as numbers, margins from ``_plain_scores``."""

    _w: dict[Any, dict[Any, float]]
    _b: dict[Any, float]

    def _weight_dicts(self) -> tuple[dict[Any, dict[Any, float]], dict[Any, float]]:
        """The weights and biases, to read (a learner keeping them elsewhere builds them)."""
        return self._w, self._b

    def _plain_scores(self, x: dict) -> dict[Any, float]:
        w, b = self._weight_dicts()
        return {c: sparse_dot(wc, x) + b[c] for c, wc in w.items()}

    @property
    def classes(self) -> list[Any]:
        """Classes in the order first seen."""
        return list(self._w)

    @property
    def weights(self) -> dict[Any, dict[Any, float]]:
        """Class -> (feature -> weight) (a copy)."""
        return {c: dict(wc) for c, wc in self._weight_dicts()[0].items()}

    @property
    def bias(self) -> dict[Any, float]:
        """Class -> bias (a copy)."""
        return dict(self._weight_dicts()[1])

    @property
    def weight_norm(self) -> dict[Any, float]:
        """Class -> ||w_class||."""
        return {c: norm(wc.values()) for c, wc in self._weight_dicts()[0].items()}

    def margin(self, x: dict, y: Any) -> float:
        """Score of ``y`` minus the best other score (``-inf`` when ``y`` is unknown)."""
        return class_margins(self._plain_scores(x), y, self._weight_dicts()[0])[0]

    def geometric_margin(self, x: dict, y: Any) -> float:
        """Distance of ``x`` to the boundary between ``y`` and its best rival, signed."""
        return class_margins(self._plain_scores(x), y, self._weight_dicts()[0])[1]

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        """``geometric_margin`` of each example, each pair of classes' distance computed once."""
        distances: dict[tuple[Any, Any], float] = {}
        w = self._weight_dicts()[0]
        return [class_margins(self._plain_scores(x), y, w, distances)[1] for x, y in examples]


#: How far (in half-lives) the forgetting average's reference time may lag before its
#: accumulators are rescaled: its coefficients reach 2**RENORMALISE_HALF_LIVES at most.
RENORMALISE_HALF_LIVES = 256

#: The shortest half-life the forgetting average can take: ``beta = 2**(-1/N)`` and its inverse
#: must stay finite and non-zero, and one example's coefficient ``2**(1/N)`` no larger than
#: the ``2**RENORMALISE_HALF_LIVES`` the renormalisation keeps the others under.
MIN_HALF_LIFE = 1.0 / RENORMALISE_HALF_LIVES


def check_half_life(value: object) -> str | None:
    """Why ``value`` cannot be an ``average_half_life`` (None when it can): the one rule the
    constructor and the ``--average-half-life`` flag both apply.

    Examples
    --------
    >>> check_half_life(700.0) is None
    True
    >>> check_half_life(1e-20)
    'must be a finite number of examples from 0.00390625 on'

    """
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not MIN_HALF_LIFE <= value < math.inf
    ):
        return f"must be a finite number of examples from {MIN_HALF_LIFE:g} on"
    return None


class LinearHyperparameters:
    """The hyperparameters both perceptrons share, checked and stored under their own names.

    Averaging, kept lazily in ``_u``/``_ub`` beside the weights ``_w``/``_b``. The average
    after ``t`` examples is ``w - u / D(t)``, where an update ``delta`` made at example ``tau``
    adds ``c(tau) * delta`` to ``u``:

    * the plain average of the weight vectors after examples 1..t (Freund and Schapire):
      ``c(tau) = tau - 1``, ``D(t) = t``;
    * the forgetting average (``average_half_life`` N): ``a_t = beta*a_{t-1} + (1-beta)*w_t``
      with ``beta = 2**(-1/N)``, ``a_0 = 0``, which is ``w_t - sum_tau beta**(t+1-tau) *
      delta_tau``: ``c(tau) = beta**(ref - tau)`` and ``D(t) = beta**(ref - t - 1)``, ``ref``
      a reference example (``_avg_ref``) moved up to ``t`` (and ``u`` multiplied by
      ``beta**(t - ref)``) every ``RENORMALISE_HALF_LIVES * N`` examples, so that no
      coefficient passes ``2**256``. An update stays O(features of x); the rescaling is
      O(model) once per 256 half-lives.
    """

    average_half_life: float | None
    _avg_ref: int
    _beta: float

    def _set_hyperparameters(
        self,
        lr: float,
        bias: str,
        init: str,
        seed: int | None,
        averaged: bool,
        average_half_life: float | None = None,
    ) -> None:
        if bias not in BIAS_MODES:
            raise ValueError(f"bias must be one of {BIAS_MODES}, got {bias!r}")
        if not lr > 0:
            raise ValueError(f"lr must be positive, got {lr!r}")
        if average_half_life is not None:
            problem = check_half_life(average_half_life)
            if problem is not None:
                raise ValueError(
                    f"average_half_life {problem} (or None), got {average_half_life!r}"
                )
            if not averaged:
                raise ValueError("average_half_life needs averaged=True")
        self.lr = lr
        self._bias_mode = bias
        self.init = init
        self.seed = seed
        self.averaged = averaged
        self.average_half_life = average_half_life
        self._init = WeightInitializer(init, seed)
        self._avg_ref = 0
        self._beta = 1.0 if average_half_life is None else 2.0 ** (-1.0 / average_half_life)

    def _avg_coef(self, t: int) -> float:
        """``c(t)``: what an update made at example ``t`` adds to ``u``, per unit of change."""
        if self.average_half_life is None:
            return t - 1
        return math.pow(self._beta, self._avg_ref - t)

    def _avg_div(self, t: int) -> float:
        """``D(t)``: the divisor of ``u`` in the average after ``t >= 1`` examples."""
        if self.average_half_life is None:
            return t
        return math.pow(self._beta, self._avg_ref - t - 1)

    def _averaging(self, t: int) -> bool:
        """Whether an update at example ``t`` changes ``u`` (the plain average's ``c(1)`` is 0)."""
        return self.averaged and (t > 1 or self.average_half_life is not None)

    def _renormalise_due(self, t: int) -> bool:
        half_life = self.average_half_life
        return half_life is not None and t - self._avg_ref >= RENORMALISE_HALF_LIVES * half_life

    @staticmethod
    def _rescale(u: dict[Any, float], factor: float) -> None:
        for k, v in u.items():
            u[k] = v * factor
