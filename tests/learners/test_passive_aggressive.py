"""Passive-aggressive learners against River's PAClassifier and a readable multi-class
reference, their state, and what they refuse."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from river import datasets, linear_model
from river.datasets import synth

from stream_perceptron import MulticlassPassiveAggressive, PassiveAggressive
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners import StreamClassifier

PHISHING = list(datasets.Phishing())
HYPERPLANE = list(synth.Hyperplane(seed=42, n_features=10, noise_percentage=0.05).take(3000))
SEGMENTS = list(datasets.ImageSegments().take(800))
MODES = {"pa": 0, "pa1": 1, "pa2": 2}


def _close(a: float, b: float, scale: float) -> bool:
    return abs(a - b) <= 1e-12 * max(1.0, scale)


@pytest.mark.parametrize("stream", ["phishing", "hyperplane"])
@pytest.mark.parametrize(
    ("variant", "C", "bias"),
    list(itertools.product(("pa", "pa1", "pa2"), (0.01, 1.0), ("learned", "none"))),
)
def test_binary_equals_river_pa_classifier(stream, variant, C, bias):
    """Every weight and the bias after every example within 1e-12 (relative to the largest
    weight) of River's PAClassifier(C, mode, learn_intercept=bias == "learned"), and the same
    predictions wherever the score is not within 1e-9 of 0 (River predicts through a sigmoid,
    so a score within about 1e-16 of 0 is its tie). Not bit for bit: River's norm is NumPy's
    (a BLAS dot, then sqrt, then squared) and its dot product sums in the longer dict's
    order; ours are left folds in x's order."""
    rows = PHISHING if stream == "phishing" else HYPERPLANE
    ours = PassiveAggressive(C=C, variant=variant, bias=bias)
    river = linear_model.PAClassifier(C=C, mode=MODES[variant], learn_intercept=bias == "learned")
    compared = 0
    for t, (x, y) in enumerate(rows):
        score = ours._score(x)
        got = ours.predict_learn_one(x, y)
        want = river.predict_one(x)
        river.learn_one(x, y)
        if abs(score) > 1e-9 and t:
            assert got == want, t
            compared += 1
        scale = max([abs(w) for w in river.weights.values()] + [abs(river.intercept)])
        assert _close(ours.bias, river.intercept, scale), t
        for k, w in river.weights.items():
            assert _close(ours.weights.get(k, 0.0), w, scale), (t, k)
    assert compared > 0.95 * len(rows)
    assert ours.n_mistakes > 20


def _reference_multiclass(rows, C, variant, bias):
    """Crammer et al. 2006, section 7, written out: returns the predictions and the model."""
    w: dict = {}
    b: dict = {}
    predictions = []
    for x, y in rows:
        scores = {c: sum(w[c].get(k, 0.0) * v for k, v in x.items()) + b[c] for c in w}
        predictions.append(max(scores, key=scores.__getitem__) if scores else None)
        if y not in w:
            w[y], b[y] = {}, 0.0
            scores[y] = 0.0
        others = {c: s for c, s in scores.items() if c != y}
        if not others:
            continue
        r = max(others, key=others.__getitem__)
        loss = max(0.0, 1.0 - (scores[y] - scores[r]))
        sq = 2.0 * sum(v * v for v in x.values())
        tau = {
            "pa": loss / sq if sq else 0.0,
            "pa1": min(C, loss / sq) if sq else 0.0,
            "pa2": loss / (sq + 1.0 / (2.0 * C)),
        }[variant]
        for k, v in x.items():
            w[y][k] = w[y].get(k, 0.0) + tau * v
            w[r][k] = w[r].get(k, 0.0) - tau * v
        if bias == "learned":
            b[y] += tau
            b[r] -= tau
    return predictions, w, b


@pytest.mark.parametrize(
    ("variant", "C", "bias"),
    list(itertools.product(("pa", "pa1", "pa2"), (0.01, 1.0), ("learned", "none"))),
)
def test_multiclass_equals_the_readable_reference(variant, C, bias):
    model = MulticlassPassiveAggressive(C=C, variant=variant, bias=bias)
    got = [model.predict_learn_one(x, y) for x, y in SEGMENTS]
    want, w, b = _reference_multiclass(SEGMENTS, C, variant, bias)
    assert sum(g != e for g, e in zip(got, want)) <= 2  # ties broken by float rounding only
    scale = max(abs(v) for wc in w.values() for v in wc.values())
    for c in w:
        assert abs(model.bias[c] - b[c]) <= 1e-9 * scale
        for k, v in w[c].items():
            assert abs(model.weights[c].get(k, 0.0) - v) <= 1e-9 * scale
    assert list(model.classes) == list(w)


@pytest.mark.parametrize(
    "model",
    [PassiveAggressive(C=0.1, variant="pa2"), MulticlassPassiveAggressive(variant="pa")],
    ids=repr,
)
def test_state_round_trips_mid_stream(model):
    rows = SEGMENTS if model._multiclass else PHISHING
    for x, y in rows[:300]:
        model.learn_one(x, y)
    state = json.loads(json.dumps(model.get_state()))
    copy = StreamClassifier.from_state(state)
    assert copy.get_state() == model.get_state()
    for x, y in rows[300:600]:
        assert copy.predict_learn_one(x, y) == model.predict_learn_one(x, y)
    assert copy.get_state() == model.get_state()


def test_hyperparameters_are_checked():
    for bad in (dict(C=0), dict(C=math.inf), dict(C=True), dict(variant="pa3"), dict(bias="r2")):
        with pytest.raises(ValueError):
            PassiveAggressive(**bad)
        with pytest.raises(ValueError):
            MulticlassPassiveAggressive(**bad)


@pytest.mark.parametrize("klass", [PassiveAggressive, MulticlassPassiveAggressive])
def test_an_update_that_would_overflow_is_refused_whole(klass):
    """A norm past float's range, and a step that overflows (PA on a tiny x: loss / ||x||^2
    with ||x||^2 subnormal), are refused with the model left exactly as it was."""
    model = klass(variant="pa")
    model.learn_one({"a": 1.0}, True)
    model.learn_one({"a": -1.0}, False)
    before = json.dumps(model.get_state())
    with pytest.raises(ValueTooLargeError):
        model.learn_one({"a": 1e200, "b": 1e-200}, False)
    with pytest.raises(ValueTooLargeError):
        model.learn_one({"b": 1e-160}, True)
    assert json.dumps(model.get_state()) == before
