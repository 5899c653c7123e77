"""Averaging against brute force, mini-batches against learn_one loops, state round trips."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from river import datasets

from stream_perceptron import CentroidClassifier, MulticlassPerceptron, Perceptron
from stream_perceptron.errors import StateError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.learners._maths import softmax

PHISHING = list(datasets.Phishing())
SEGMENTS = list(datasets.ImageSegments().take(600))


@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("init", ["zeros", "random"])
def test_binary_averaging_equals_brute_force_average(bias, init):
    model = Perceptron(bias=bias, init=init, seed=5, averaged=True)
    features = list(PHISHING[0][0])
    total = np.zeros(len(features) + 1)
    for t, (x, y) in enumerate(PHISHING[:400], start=1):
        model.learn_one(x, y)
        w = model.weights
        total += [w.get(f, 0.0) for f in features] + [model.bias]
        if t % 50 == 0:
            avg = total / t
            got = [model.average_weights.get(f, 0.0) for f in features] + [model.average_bias]
            assert np.allclose(got, avg, rtol=1e-9, atol=1e-9)
    x = PHISHING[500][0]
    expected = sum(avg[j] * x.get(f, 0.0) for j, f in enumerate(features)) + avg[-1]
    assert model.predict_one(x) == (expected > 0)


def test_multiclass_averaging_equals_brute_force_average():
    model = MulticlassPerceptron(averaged=True)
    totals: dict = {}
    for t, (x, y) in enumerate(SEGMENTS, start=1):
        model.learn_one(x, y)
        for c, wc in model.weights.items():
            acc = totals.setdefault(c, {"b": 0.0, "first": t})
            acc["b"] += model.bias[c]
            for k, v in wc.items():
                acc[k] = acc.get(k, 0.0) + v
    t = len(SEGMENTS)
    for c, acc in totals.items():
        assert math.isclose(model.average_bias[c], acc["b"] / t, rel_tol=1e-9, abs_tol=1e-9)
        for k, wk in model.average_weights[c].items():
            assert math.isclose(wk, acc.get(k, 0.0) / t, rel_tol=1e-9, abs_tol=1e-9)


def _learners():
    return [
        Perceptron(),
        Perceptron(bias="r2", averaged=True),
        Perceptron(init="random", seed=1, bias="none"),
        MulticlassPerceptron(),
        MulticlassPerceptron(init="random", seed=2, averaged=True),
        CentroidClassifier(),
    ]


def _stream(model):
    return SEGMENTS if model._multiclass else PHISHING[:600]


@pytest.mark.parametrize("model", _learners(), ids=repr)
def test_learn_many_equals_learn_one_loop(model):
    one, many = model.clone(), model.clone()
    stream = _stream(model)
    for start in range(0, len(stream), 97):
        chunk = stream[start : start + 97]
        for x, y in chunk:
            one.learn_one(x, y)
        many.learn_many(pd.DataFrame([x for x, _ in chunk]), pd.Series([y for _, y in chunk]))
    assert many.get_state() == one.get_state()
    X = pd.DataFrame([x for x, _ in stream[:50]])
    assert list(many.predict_many(X)) == [one.predict_one(x) for x, _ in stream[:50]]


@pytest.mark.parametrize("model", _learners(), ids=repr)
def test_state_round_trips_mid_stream(model):
    stream = _stream(model)
    half = len(stream) // 2
    for x, y in stream[:half]:
        model.learn_one(x, y)
    state = json.loads(json.dumps(model.get_state()))
    copy = StreamClassifier.from_state(state)
    assert type(copy) is type(model)
    assert copy.get_state() == model.get_state()
    for x, y in stream[half:]:
        assert copy.predict_proba_one(x) == model.predict_proba_one(x)
        model.learn_one(x, y)
        copy.learn_one(x, y)
    assert copy.get_state() == model.get_state()


def test_random_init_is_reproducible_and_random():
    a, b, c = (Perceptron(init="random", seed=s) for s in (7, 7, 8))
    for x, y in PHISHING[:20]:
        for m in (a, b, c):
            m.learn_one(x, y)
    assert a.weights == b.weights
    assert a.weights != c.weights
    assert a.weights != Perceptron().weights


def test_from_state_rejects_other_versions_and_classes():
    state = Perceptron().get_state()
    with pytest.raises(StateError, match="schema_version"):
        Perceptron.from_state({**state, "schema_version": 99})
    with pytest.raises(StateError, match="not a MulticlassPerceptron"):
        MulticlassPerceptron.from_state(state)
    with pytest.raises(StateError, match="corrupt"):
        Perceptron.from_state({**state, "weights": "garbage"})


def _exact_average_argmax(totals: dict, t: int, x: dict) -> tuple[object, Fraction]:
    """Argmax of the exactly averaged scores (Fractions) and its gap to the runner-up."""
    scores = {
        c: sum((acc.get(k, Fraction(0)) * Fraction(v) for k, v in x.items()), Fraction(0))
        / t
        + acc["b"] / t
        for c, acc in totals.items()
    }
    ranked = sorted(scores.items(), key=lambda cs: cs[1], reverse=True)
    gap = ranked[0][1] - ranked[1][1] if len(ranked) > 1 else Fraction(10**9)
    return ranked[0][0], gap


def test_multiclass_averaged_predictions_equal_an_exact_running_average():
    """Every prequential prediction of the averaged multi-class learner (the C helpers' lazy
    form, w - u/t per feature of x) is the argmax of the running average of all weight
    vectors, summed exactly with Fractions: the lazy form differs from it only by float
    rounding, so a prediction may differ only where the exact top two scores are within
    1e-9 of each other (none does on this stream)."""
    model = MulticlassPerceptron(averaged=True)
    totals: dict = {}
    close = 0
    for t, (x, y) in enumerate(SEGMENTS[:300]):
        if t:
            want, gap = _exact_average_argmax(totals, t, x)
            got = model.predict_one(x)
            if gap > Fraction(1, 10**9):
                assert got == want, t
            else:
                close += 1
        model.learn_one(x, y)
        for c, wc in model.weights.items():
            acc = totals.setdefault(c, {"b": Fraction(0)})
            acc["b"] += Fraction(model.bias[c])
            for k, v in wc.items():
                acc[k] = acc.get(k, Fraction(0)) + Fraction(v)
    assert close < 3 and model.n_mistakes > 20


def test_averaged_scores_are_the_exact_average_to_float_rounding():
    """The lazy averaged score ``s - (u.x + ub) / t`` (C helpers and Python, bit for bit the
    same) is within the forward error bound of float summation of the exact rational score
    of the averaged weights ``w - u/t``: each dot of n terms is off by at most about n * eps *
    (the sum of the terms' magnitudes) (Higham, recursive summation), so the bound used is
    4 * (n + 2) * eps * (sum |w v| + |b| + (sum |u v| + |ub|) / t)."""
    from stream_perceptron.learners import _multiclass_model as mc

    model = MulticlassPerceptron(averaged=True)
    for x, y in SEGMENTS[:200]:
        model.learn_one(x, y)
    t = model.n_seen
    eps = np.finfo(float).eps
    speedups = mc._speedups
    for x, _ in SEGMENTS[200:260]:
        got = model._average_scores(x)
        assert model.predict_proba_one(x) == softmax(got)
        try:
            mc._speedups = None
            assert list(model._average_scores(x).items()) == list(got.items())
        finally:
            mc._speedups = speedups
        for c, wc in model._w.items():
            uc, n = model._u[c], len(x)
            exact = sum(
                ((Fraction(wc[k]) - Fraction(uc.get(k, 0.0)) / t) * Fraction(v)
                 for k, v in x.items() if k in wc),
                Fraction(model._b[c]) - Fraction(model._ub[c]) / t,
            )  # fmt: skip
            scale = (
                sum(abs(wc[k] * v) for k, v in x.items() if k in wc) + abs(model._b[c])
                + (sum(abs(uc.get(k, 0.0) * v) for k, v in x.items()) + abs(model._ub[c])) / t
            )  # fmt: skip
            assert abs(Fraction(got[c]) - exact) <= 4 * (n + 2) * eps * scale, c
