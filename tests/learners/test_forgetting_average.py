"""The forgetting average (``average_half_life``): the lazy form against a readable eager
reference, weight by weight, across rescalings of its accumulators; its state; its checks."""

from __future__ import annotations

import json
import math

import pytest
from river import datasets

from stream_perceptron import MulticlassPerceptron, Perceptron, native
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.learners._linear import RENORMALISE_HALF_LIVES

PHISHING = list(datasets.Phishing())
SEGMENTS = list(datasets.ImageSegments())


class EagerAverage:
    """a <- beta*a + (1 - beta)*w after every example, over every weight: O(model) per
    example, the definition the lazy form must reproduce."""

    def __init__(self, half_life: float) -> None:
        self.beta = 2.0 ** (-1.0 / half_life)
        self.a: dict = {}

    def step(self, w: dict) -> None:
        beta = self.beta
        for k in self.a.keys() | w.keys():
            self.a[k] = beta * self.a.get(k, 0.0) + (1.0 - beta) * w.get(k, 0.0)


def _flat(model) -> dict:
    """The weights and biases of a learner as one dict (per class for multi-class)."""
    if model._multiclass:
        out = {(c, k): v for c, wc in model.weights.items() for k, v in wc.items()}
        out.update({(c, "<bias>"): b for c, b in model.bias.items()})
        return out
    return {**model.weights, "<bias>": model.bias}


def _flat_average(model) -> dict:
    if model._multiclass:
        out = {(c, k): v for c, wc in model.average_weights.items() for k, v in wc.items()}
        out.update({(c, "<bias>"): b for c, b in model.average_bias.items()})
        return out
    return {**model.average_weights, "<bias>": model.average_bias}


@pytest.mark.parametrize(
    ("make", "rows"),
    [
        (lambda: Perceptron(averaged=True, average_half_life=3), PHISHING),
        (lambda: Perceptron(averaged=True, average_half_life=40, bias="r2"), PHISHING),
        (lambda: Perceptron(averaged=True, average_half_life=2.5, init="random", seed=4),
         PHISHING),
        (lambda: MulticlassPerceptron(averaged=True, average_half_life=5), SEGMENTS),
        (lambda: MulticlassPerceptron(averaged=True, average_half_life=200, bias="none"),
         SEGMENTS),
    ],  # fmt: skip
    ids=["binary-3", "binary-r2-40", "binary-random-2.5", "multi-5", "multi-none-200"],
)
def test_lazy_forgetting_average_equals_the_eager_one_weight_by_weight(make, rows):
    """After every example, every averaged weight and bias equals the eager exponential
    average to 1e-9 of the largest weight so far (float rounding: the lazy form sums the
    same terms in another order), and predict_one gives the sign (argmax) of the eager
    average's score wherever the top scores are not within 1e-9 of each other. The streams
    are long enough to cross a rescaling of the accumulators (every 256 half-lives)."""
    model = make()
    eager = EagerAverage(model.average_half_life)
    scale = 1.0
    renormalised = 0
    for t, (x, y) in enumerate(rows):
        if t:
            scores = _eager_scores(model, eager.a, x)
            ranked = sorted(scores.values(), reverse=True)
            if len(ranked) < 2 or ranked[0] - ranked[1] > 1e-9 * scale:
                best = max(scores, key=scores.__getitem__)
                assert model.predict_one(x) == best, t
        ref = model._avg_ref
        model.learn_one(x, y)
        renormalised += model._avg_ref != ref
        w = _flat(model)
        eager.step(w)
        scale = max([scale, *map(abs, w.values())])
        got = _flat_average(model)
        for k, v in eager.a.items():
            assert abs(got.get(k, 0.0) - v) <= 1e-9 * scale, (t, k)
    assert renormalised == len(rows) // (RENORMALISE_HALF_LIVES * model.average_half_life) >= (
        1 if model.average_half_life < 5 else 0
    )


def _eager_scores(model, a: dict, x: dict) -> dict:
    """The scores (binary: of the classes False/True or 0/1 as the model decodes them) of the
    eager average ``a``."""
    if model._multiclass:
        return {
            c: math.fsum(a.get((c, k), 0.0) * v for k, v in x.items()) + a.get((c, "<bias>"), 0.0)
            for c in model.classes
        }
    s = math.fsum(a.get(k, 0.0) * v for k, v in x.items()) + a.get("<bias>", 0.0)
    labels = model._labels
    return {labels.negative: 0.0, labels.positive: s}


def test_a_long_half_life_is_the_plain_average_and_a_short_one_the_last_weights():
    """What the forgetting average converges to: with a half-life much longer than the stream
    it is (almost) the plain average (up to the scale 1 - beta**t, which changes no
    prediction), with a half-life of a fraction of an example it is (almost) the current
    weights, whose predictions it then makes."""
    plain = Perceptron(averaged=True)
    long = Perceptron(averaged=True, average_half_life=1e9)
    short = Perceptron(averaged=True, average_half_life=0.01)
    current = Perceptron()
    ties = []
    for t, (x, y) in enumerate(PHISHING):
        if current._score(x) == 0.0:
            ties.append(t)  # a tie for the weights: the average's rounding may break it
        elif t:
            assert short.predict_one(x) == current.predict_one(x), t
        assert long.predict_learn_one(x, y) == plain.predict_learn_one(x, y), t
        short.learn_one(x, y)
        current.learn_one(x, y)
    assert len(ties) < 100
    # a starts at 0, so after t examples its weights sum to 1 - beta**t: divided by that,
    # the forgetting average with a half-life far past the stream is the plain average
    t = len(PHISHING)
    total = -math.expm1(t * math.log(long._beta))
    for k, v in plain.average_weights.items():
        assert long.average_weights[k] / total == pytest.approx(v, rel=1e-5, abs=1e-9)


@pytest.mark.parametrize(
    "make",
    [
        lambda: Perceptron(averaged=True, average_half_life=2),
        lambda: MulticlassPerceptron(averaged=True, average_half_life=2, init="random", seed=1),
    ],
)
def test_state_round_trips_across_rescalings(make):
    model = make()
    rows = SEGMENTS if model._multiclass else PHISHING
    for x, y in rows[:700]:
        model.learn_one(x, y)
    assert model._avg_ref > 0
    copy = StreamClassifier.from_state(json.loads(json.dumps(model.get_state())))
    for x, y in rows[700:1250]:
        assert copy.predict_learn_one(x, y) == model.predict_learn_one(x, y)
    assert copy.get_state() == model.get_state()


@pytest.mark.parametrize("make", [lambda: Perceptron(averaged=True), MulticlassPerceptron])
def test_a_version_1_state_still_loads_and_learns_the_same(make):
    """A checkpoint written before version 2 (no average_half_life, no avg_ref) is the same
    model: it continues exactly as the model that wrote it."""
    model = make()
    rows = SEGMENTS if model._multiclass else PHISHING
    for x, y in rows[:300]:
        model.learn_one(x, y)
    state = json.loads(json.dumps(model.get_state()))
    assert state["schema_version"] == 2
    old = {**state, "schema_version": 1}
    old["params"] = {k: v for k, v in state["params"].items() if k != "average_half_life"}
    old.pop("avg_ref")
    copy = StreamClassifier.from_state(old)
    for x, y in rows[300:600]:
        assert copy.predict_learn_one(x, y) == model.predict_learn_one(x, y)
    assert copy.get_state() == model.get_state()


def test_hyperparameter_checks():
    for klass in (Perceptron, MulticlassPerceptron):
        with pytest.raises(ValueError, match="averaged=True"):
            klass(average_half_life=10)
        for bad in (0, -1, math.inf, math.nan, True, "10"):
            with pytest.raises(ValueError):
                klass(averaged=True, average_half_life=bad)
        # the dense kernels take the forgetting average, down to a half-life of 0.01
        assert klass(averaged=True, average_half_life=10).dense_capable == native.has_dense()
        assert not klass(averaged=True, average_half_life=0.005).dense_capable
        state = klass(averaged=True, average_half_life=10).get_state()
        state["avg_ref"] = 5
        with pytest.raises(Exception, match="avg_ref"):
            StreamClassifier.from_state(state)
