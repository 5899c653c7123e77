"""The centroid method: a running mean per class, predict the nearest mean."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from stream_perceptron.errors import StateError
from stream_perceptron.learners._base import MulticlassClassifier
from stream_perceptron.learners._maths import (
    argmax,
    check_class_kind,
    class_margins,
    finite,
    norm,
    softmax,
    too_large,
)
from stream_perceptron.learners._state import class_entries, pairs, registered, to_json_key
from stream_perceptron.state import count, keyed, number

__all__ = ["CentroidClassifier"]


@registered
class CentroidClassifier(MulticlassClassifier):
    """Streaming nearest-centroid classifier, the lecture notes' baseline.

    Keeps, per class, the sum and count of its examples, so the mean ``mu_k`` costs O(non-zero
    features) per example. Predicts the class of the nearest mean, which is the linear rule
    ``argmax_k mu_k.x - ||mu_k||^2 / 2``. For two classes C and X it is the midpoint rule
    ``(mu_C - mu_X).(x - (mu_C + mu_X)/2) > 0``, whose bias is ``-(||mu_C||^2 - ||mu_X||^2)/2``;
    the notes' bias ``-||mu_C - mu_X||^2 / 2`` equals it only in special cases (e.g.
    ``mu_X = 0``). Ties go to the class seen first.

    Attributes
    ----------
    means
        Class -> mean vector.
    weights
        Class -> weight vector of the equivalent linear rule (the mean).
    bias
        Class -> bias of the equivalent linear rule (``-||mu||^2 / 2``).
    n_mistakes
        Prequential mistakes: examples whose prediction before learning was wrong.

    Examples
    --------
    >>> from stream_perceptron import CentroidClassifier
    >>> model = CentroidClassifier()
    >>> for x, y in [({"a": 0.0}, "low"), ({"a": 2.0}, "low"), ({"a": 10.0}, "high")]:
    ...     model.learn_one(x, y)
    >>> model.means
    {'low': {'a': 1.0}, 'high': {'a': 10.0}}
    >>> model.predict_one({"a": 5.4}), model.predict_one({"a": 5.6})
    ('low', 'high')

    """

    _bias_mode = "midpoint"

    def __init__(self) -> None:
        self._sums: dict[Any, dict[Any, float]] = {}
        self._counts: dict[Any, int] = {}
        self._sq_norms: dict[Any, float] = {}  # ||sum_k||^2, kept incrementally
        self._init_counters()

    def _learn(self, x: dict, y: Any) -> Any:
        """Predict ``x``, learn ``(x, y)``, return the prediction made before learning.

        The new sum, squared norm and R are computed and checked before anything is stored:
        when one would not be finite, :class:`ValueTooLargeError`, the model as it was. A
        boolean label equal to a number class (``True`` and ``1``) raises
        :class:`LabelError`. A score that overflows is not stored; ``NaN`` never beats
        another score (the first class wins when all are ``NaN``)."""
        check_class_kind(self._sums, y)
        try:
            y_hat = self.predict_one(x)
        except OverflowError:  # an int past float: learning would refuse it too
            raise too_large("a class sum or R") from None
        s = self._sums.get(y)
        try:
            sq = math.fsum(v * v for v in x.values())
            r = math.sqrt(sq)
            cross = 0.0
            new = []
            for k, v in x.items():
                old = s.get(k, 0.0) if s is not None else 0.0
                cross += old * v
                new.append((k, old + v))
            sq_norm = (self._sq_norms[y] if s is not None else 0.0) + (2.0 * cross + sq)
        except (OverflowError, ValueError):
            raise too_large("a class sum or R") from None
        if not (finite(r) and finite(sq_norm) and all(finite(v) for _, v in new)):
            raise too_large("a class sum or R")
        if s is None:
            s = self._sums[y] = {}
            self._counts[y] = 0
            self._sq_norms[y] = 0.0
        for k, v in new:
            s[k] = v
        self._counts[y] += 1
        self._sq_norms[y] = sq_norm
        self._n_seen += 1
        if y_hat != y:
            self._n_mistakes += 1
        if r > self._max_norm:
            self._max_norm = r
        return y_hat

    def _scores(self, x: dict) -> dict[Any, float]:
        scores = {}
        for c, s in self._sums.items():
            n = self._counts[c]
            dot = 0.0
            for k, v in x.items():
                sk = s.get(k)
                if sk is not None:
                    dot += sk * v
            scores[c] = dot / n - self._sq_norms[c] / (2.0 * n * n)
        return scores

    def predict_one(self, x: dict, **kwargs: Any) -> Any:
        return argmax(self._scores(x))

    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict[Any, float]:
        return softmax(self._scores(x))

    @property
    def classes(self) -> list[Any]:
        """Classes in the order first seen."""
        return list(self._sums)

    @property
    def means(self) -> dict[Any, dict[Any, float]]:
        """Class -> mean vector."""
        return {c: {k: v / self._counts[c] for k, v in s.items()} for c, s in self._sums.items()}

    @property
    def weights(self) -> dict[Any, dict[Any, float]]:
        """Class -> weights of the equivalent linear rule (the class mean)."""
        return self.means

    @property
    def bias(self) -> dict[Any, float]:
        """Class -> bias of the equivalent linear rule, ``-||mu||^2 / 2``."""
        return {c: -self._sq_norms[c] / (2.0 * n * n) for c, n in self._counts.items()}

    @property
    def weight_norm(self) -> dict[Any, float]:
        """Class -> ||mu_class||."""
        return {c: norm(m.values()) for c, m in self.means.items()}

    def margin(self, x: dict, y: Any) -> float:
        """Score of ``y`` minus the best other score."""
        return class_margins(self._scores(x), y, self.means)[0]

    def geometric_margin(self, x: dict, y: Any) -> float:
        """Distance of ``x`` to the perpendicular bisector between ``y``'s mean and its rival's."""
        return class_margins(self._scores(x), y, self.means)[1]

    def geometric_margins(self, examples: Iterable[tuple[dict, Any]]) -> list[float]:
        """``geometric_margin`` of each example, the means and their distances computed once."""
        means = self.means
        distances: dict[tuple[Any, Any], float] = {}
        return [class_margins(self._scores(x), y, means, distances)[1] for x, y in examples]

    def _state_payload(self) -> dict[str, Any]:
        return {
            "classes": [
                {
                    "label": to_json_key(c),
                    "sums": pairs(s),
                    "count": self._counts[c],
                    "sum_sq_norm": self._sq_norms[c],
                }
                for c, s in self._sums.items()
            ]
        }

    def _load_payload(self, state: dict[str, Any]) -> None:
        for c, entry, field in class_entries(state):
            self._sums[c] = keyed(entry["sums"], f"{field}.sums")
            # a class is there once learned: at least one example (its mean divides by it)
            self._counts[c] = count(entry["count"], f"{field}.count", self._n_seen, "n_seen", 1)
            self._sq_norms[c] = number(entry["sum_sq_norm"], f"{field}.sum_sq_norm", 0.0)
        if sum(self._counts.values()) != self._n_seen:
            raise StateError(f"the classes' counts add up to {sum(self._counts.values())}, "
                             f"not n_seen {self._n_seen}")  # fmt: skip
