"""Averaging against brute force, mini-batches against learn_one loops, state round trips."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from river import datasets

from stream_perceptron import CentroidClassifier, MulticlassPerceptron, Perceptron
from stream_perceptron.errors import StateError
from stream_perceptron.learners import StreamClassifier

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
