"""The native multi-class perceptron and the centroid baseline."""

from __future__ import annotations

import math

import numpy as np
import pytest
from river import datasets, linear_model, multiclass

from stream_perceptron import CentroidClassifier, MulticlassPerceptron
from stream_perceptron.synthetic import separable_multiclass


def test_hand_worked_two_step_update():
    model = MulticlassPerceptron(lr=0.5)
    # Step 1: no class known, predicted None -> mistake; w_A += 0.5*x, b_A += 0.5.
    model.learn_one({"u": 2.0, "v": 0.0}, "A")
    assert model.weights == {"A": {"u": 1.0, "v": 0.0}}
    assert model.bias == {"A": 0.5}
    # Step 2: predicted A (the only class), label B -> w_B += 0.5*x, w_A -= 0.5*x.
    model.learn_one({"u": 0.0, "v": 4.0}, "B")
    assert model.weights == {"A": {"u": 1.0, "v": -2.0}, "B": {"u": 0.0, "v": 2.0}}
    assert model.bias == {"A": 0.0, "B": 0.5}
    assert model.n_mistakes == 2
    # Scores now: x=(1,0): A=1, B=0.5 -> A; x=(0,1): A=-2, B=2.5 -> B.
    assert model.predict_one({"u": 1.0}) == "A"
    assert model.predict_one({"v": 1.0}) == "B"
    # A correct prediction changes nothing.
    before = model.get_state()
    model.learn_one({"u": 1.0}, "A")
    after = model.get_state()
    assert after["classes"] == before["classes"] and after["n_seen"] == before["n_seen"] + 1


def test_ties_go_to_the_class_seen_first():
    model = MulticlassPerceptron(bias="none")
    model.learn_one({"a": 1.0}, "first")
    model.learn_one({"b": 1.0}, "second")
    assert model.predict_one({"c": 1.0}) == "first"  # all scores 0


def test_prequential_mistakes_equal_updates():
    model = MulticlassPerceptron()
    mistakes = 0
    for x, y in datasets.ImageSegments().take(500):
        mistakes += model.predict_one(x) != y
        model.learn_one(x, y)
    assert model.n_mistakes == mistakes


def _prequential_accuracy(model, stream):
    right = n = 0
    for x, y in stream:
        right += model.predict_one(x) == y
        model.learn_one(x, y)
        n += 1
    return right / n


def test_image_segments_at_least_as_accurate_as_river_one_vs_rest():
    ours = _prequential_accuracy(MulticlassPerceptron(), datasets.ImageSegments())
    ovr = multiclass.OneVsRestClassifier(linear_model.Perceptron())
    theirs = _prequential_accuracy(ovr, datasets.ImageSegments())
    assert ours >= theirs, (ours, theirs)


def test_native_multiclass_beats_one_vs_rest_on_separable_data():
    data = list(separable_multiclass(5000, gap=0.5, seed=0))
    ours = _prequential_accuracy(MulticlassPerceptron(), data)
    ovr = _prequential_accuracy(multiclass.OneVsRestClassifier(linear_model.Perceptron()), data)
    assert ours > 0.85
    assert ours > ovr + 0.05, (ours, ovr)


def test_classes_of_any_hashable_type_appear_on_the_fly():
    model = MulticlassPerceptron()
    for x, y in [({"a": 1.0}, 3), ({"b": 1.0}, "x"), ({"c": 1.0}, True)]:
        model.learn_one(x, y)
    assert model.classes == [3, "x", True]
    assert math.isclose(sum(model.predict_proba_one({"a": 1.0}).values()), 1.0)


def test_centroid_is_the_nearest_running_mean():
    rng = np.random.default_rng(1)
    model = CentroidClassifier()
    points = {c: [] for c in "abc"}
    for _ in range(300):
        c = "abc"[int(rng.integers(3))]
        v = rng.normal(size=3) + {"a": 0, "b": 3, "c": -3}[c]
        points[c].append(v)
        model.learn_one({j: float(v[j]) for j in range(3)}, c)
    means = {c: np.mean(points[c], axis=0) for c in "abc"}
    for c in "abc":
        assert np.allclose([model.means[c][j] for j in range(3)], means[c])
    for _ in range(200):
        q = rng.normal(scale=4.0, size=3)
        nearest = min("abc", key=lambda c: np.linalg.norm(q - means[c]))
        assert model.predict_one({j: float(q[j]) for j in range(3)}) == nearest


def test_centroid_midpoint_rule_versus_the_notes_bias():
    # mu_C = (4, 0) and mu_X = (2, 0): the midpoint is x1 = 3.
    model = CentroidClassifier()
    model.learn_one({"x1": 4.0}, "C")
    model.learn_one({"x1": 2.0}, "X")
    mu_c, mu_x = np.array([4.0]), np.array([2.0])
    query = np.array([2.8])  # nearer to mu_X
    correct = (mu_c - mu_x) @ (query - (mu_c + mu_x) / 2) > 0
    notes = (mu_c - mu_x) @ query - 0.5 * np.sum((mu_c - mu_x) ** 2) > 0
    assert not correct and notes  # the notes' rule puts 2.8 on C's side: wrong
    assert model.predict_one({"x1": 2.8}) == "X"
    assert model.predict_one({"x1": 3.2}) == "C"
    # With mu_X at the origin the two rules agree (the notes' special case).
    assert model.bias["C"] == pytest.approx(-8.0) and model.bias["X"] == pytest.approx(-2.0)


def test_centroid_counts_prequential_mistakes():
    model = CentroidClassifier()
    model.learn_one({"a": 1.0}, "p")  # predicted None: mistake
    model.learn_one({"a": 1.0}, "p")  # right
    model.learn_one({"a": -1.0}, "q")  # predicted p: mistake
    assert (model.n_seen, model.n_mistakes) == (3, 2)
