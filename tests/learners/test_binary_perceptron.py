"""The binary perceptron against independent references and the lecture notes' theory."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from river import datasets, linear_model
from sklearn.linear_model import Perceptron as SkPerceptron

from stream_perceptron import Perceptron
from stream_perceptron.errors import LabelError


def test_same_weights_as_river_on_the_whole_phishing_stream():
    ours, river = Perceptron(), linear_model.Perceptron()
    for x, y in datasets.Phishing():
        assert ours.predict_one(x) == river.predict_one(x)
        ours.learn_one(x, y)
        river.learn_one(x, y)
    assert ours.n_seen == 1250
    assert ours.n_mistakes > 100  # the stream is not separable: plenty of updates to compare
    assert ours.weights == river.weights  # exact, to the last bit
    assert ours.bias == river.intercept


def test_same_weights_as_scikit_learn_one_example_per_partial_fit():
    # scikit-learn's Perceptron is SGD on the hinge loss with threshold 0 and eta0=1: its
    # dloss is -y when y*p <= 0, so a tie (p = 0) is a mistake there too, as here and in River.
    names = [f"f{j}" for j in range(6)]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = (X @ rng.normal(size=6) + 0.3 + rng.normal(scale=0.5, size=400) > 0).astype(int)
    sk = SkPerceptron(eta0=1.0, shuffle=False, tol=None, penalty=None, fit_intercept=True)
    ours = Perceptron()
    for row, label in zip(X, y):
        sk.partial_fit(row.reshape(1, -1), [label], classes=[0, 1])
        ours.learn_one(dict(zip(names, row.tolist())), int(label))
    for j, name in enumerate(names):
        assert math.isclose(ours.weights[name], sk.coef_[0][j], rel_tol=1e-12, abs_tol=1e-12)
    assert math.isclose(ours.bias, sk.intercept_[0], rel_tol=1e-12, abs_tol=1e-12)


def _weights_of(model):
    return model.weights.get(1, 0.0), model.weights.get(2, 0.0), model.bias


def test_lecture_notes_worked_example():
    model = Perceptron(lr=0.1)
    state = model.get_state()
    state["weights"] = [[1, 0.2], [2, 0.0]]
    state["bias"] = -0.1
    model = Perceptron.from_state(state)
    model.learn_one({1: 1.0, 2: 1.0}, -1)
    assert np.allclose(_weights_of(model), (0.1, -0.1, -0.2))
    model.learn_one({1: 2.0, 2: 1.0}, 1)
    assert np.allclose(_weights_of(model), (0.3, 0.0, -0.1))
    assert model.n_mistakes == 2


def _mistakes_per_pass(table, passes=20):
    model = Perceptron()
    counts = []
    for _ in range(passes):
        before = model.n_mistakes
        for x, y in table:
            model.learn_one(x, y)
        counts.append(model.n_mistakes - before)
    return model, counts


BOOL = list(itertools.product([0.0, 1.0], repeat=2))


@pytest.mark.parametrize(
    "table",
    [
        [({"a": a, "b": b}, bool(a and b)) for a, b in BOOL],
        [({"a": a, "b": b}, bool(a or b)) for a, b in BOOL],
        [({"a": 0.0}, True), ({"a": 1.0}, False)],
    ],
    ids=["AND", "OR", "NOT"],
)
def test_linearly_separable_boolean_functions_are_learned(table):
    model, counts = _mistakes_per_pass(table)
    assert counts[-1] == 0 and counts[-2] == 0
    assert counts.index(0) <= 10  # AND needs 8 passes from zero weights with lr=1
    assert all(model.predict_one(x) == y for x, y in table)


def test_xor_keeps_making_mistakes_every_pass():
    table = [({"a": a, "b": b}, bool(a) != bool(b)) for a, b in BOOL]
    _, counts = _mistakes_per_pass(table, passes=50)
    assert min(counts) >= 1


def test_tie_is_a_mistake_and_zero_score_predicts_negative():
    model = Perceptron()
    assert model.predict_one({"a": 1.0}) is False
    model.learn_one({"a": 1.0}, False)  # score 0, y=-1: y*s = 0 <= 0 -> update
    assert model.n_mistakes == 1
    assert model.weights == {"a": -1.0} and model.bias == -1.0


def test_bias_modes():
    x = {"a": 3.0, "b": 4.0}  # norm 5
    r2 = Perceptron(bias="r2")
    r2.learn_one(x, True)
    assert r2.bias == 25.0 and r2.max_norm == 5.0
    none = Perceptron(bias="none", lr=0.5)
    none.learn_one(x, True)
    assert none.bias == 0.0 and none.weights == {"a": 1.5, "b": 2.0}


@pytest.mark.parametrize(
    ("labels", "encoding", "predicted"),
    [
        ([True, False], "bool", {True, False}),
        ([1, 0, 1], "0/1", {0, 1}),
        ([1, -1, 1], "-1/+1", {-1, 1}),
    ],
)
def test_predicts_in_the_callers_label_encoding(labels, encoding, predicted):
    model = Perceptron()
    xs = [{"a": 1.0}, {"a": -1.0}, {"a": 2.0}]
    for x, y in zip(xs, labels):
        model.learn_one(x, y)
    assert model._labels.encoding == encoding
    got = {model.predict_one(x) for x in xs}
    assert got == predicted
    assert set(model.predict_proba_one(xs[0])) == predicted


def test_a_third_label_raises_naming_label_and_encoding():
    model = Perceptron()
    model.learn_one({"a": 1.0}, 0)
    model.learn_one({"a": 2.0}, 1)
    with pytest.raises(LabelError, match=r"label 2 .*0/1"):
        model.learn_one({"a": 1.0}, 2)
    with pytest.raises(ValueError, match="'cat'"):
        model.learn_one({"a": 1.0}, "cat")
    assert model.n_seen == 2


def test_learn_one_neither_mutates_nor_keeps_x():
    model = Perceptron()
    x = {"a": 1.0, "b": -2.0}
    model.learn_one(x, True)
    assert x == {"a": 1.0, "b": -2.0}
    x["a"] = 100.0
    assert model.weights["a"] == 1.0


def test_margins():
    model = Perceptron(bias="none")
    model.learn_one({"a": 3.0, "b": 4.0}, True)  # w = (3, 4)
    assert model.margin({"a": 1.0, "b": 0.0}, True) == 3.0
    assert model.margin({"a": 1.0, "b": 0.0}, False) == -3.0
    assert model.geometric_margin({"a": 1.0, "b": 0.0}, True) == pytest.approx(0.6)


def test_lr_only_scales_the_model_with_zero_init_and_a_learned_bias():
    """README, "What lr does": with zero initial weights and a learned bias, lr scales every
    weight and the bias. lr = 0.5 (a power of two, exact scaling) makes the same predictions
    and mistakes on Phishing as lr = 1, with weights exactly halved; lr = 0.3 first differs
    where lr = 1 scores exactly 0 (a tie) and lr = 0.3 a rounding residue: floating-point
    tie-breaking. With bias="r2" the bias step does not scale with lr, and lr matters."""
    rows = list(datasets.Phishing())

    def run(**params):
        model = Perceptron(**params)
        return model, [model.predict_learn_one(x, y) for x, y in rows]

    one, p1 = run(lr=1.0)
    half, p05 = run(lr=0.5)
    assert p05 == p1 and half.n_mistakes == one.n_mistakes
    assert sum(p == y for p, (_, y) in zip(p1, rows)) == 1045  # 83.60 %, River's figure
    assert half.weights == {k: w / 2 for k, w in one.weights.items()}
    assert half.bias == one.bias / 2
    assert run(lr=0.5, averaged=True)[1] == run(lr=1.0, averaged=True)[1]

    a, b = Perceptron(lr=1.0), Perceptron(lr=0.3)
    for x, y in rows:
        sa, sb = a._score(x), b._score(x)
        if (sa > 0) != (sb > 0):  # the first row where they part: a tie under lr = 1
            assert sa == 0.0 and abs(sb) < 1e-12
            break
        a.learn_one(x, y)
        b.learn_one(x, y)
    else:
        raise AssertionError("lr = 0.3 never parted from lr = 1: no tie to break here")

    right = [
        sum(p == y for p, (_, y) in zip(run(lr=lr, bias="r2")[1], rows)) for lr in (1.0, 0.01)
    ]
    assert right[0] - right[1] > 200  # 82.3 % against 51.5 %: lr matters with bias="r2"
