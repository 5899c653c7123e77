"""Random Fourier features: the map against a hand-computed reference, determinism by seed, the
block path to the bit of the record path, a state without the matrix, and the quality that is
their point (River's Bananas, where every linear model stays under 60 %)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from river import compose, datasets

from stream_perceptron import Perceptron, Preprocessed, RandomFourierFeatures, native
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners import StreamClassifier, fourier
from stream_perceptron.learners.hashing import murmur3_32_reference


def test_the_map_of_a_tiny_case_by_hand():
    # D = 2, gamma = 0.5 (W's entries ~ N(0, 1)), seed 3; a column is drawn from its name's hash
    rff = RandomFourierFeatures(n_components=2, gamma=0.5, seed=3)
    z = rff.transform_one({"a": 1.0, "b": 2.0})
    h_a, h_b = murmur3_32_reference(b"a"), murmur3_32_reference(b"b")
    w_a = np.random.default_rng([3, 1, h_a]).standard_normal(2).tolist()  # column of "a"
    w_b = np.random.default_rng([3, 1, h_b]).standard_normal(2).tolist()
    b = np.random.default_rng([3, 0]).uniform(0, 2 * math.pi, 2).tolist()
    want = [math.sqrt(2 / 2) * math.cos(w_a[i] * 1.0 + w_b[i] * 2.0 + b[i]) for i in range(2)]
    assert list(z) == [0, 1]
    assert list(z.values()) == pytest.approx(want, rel=1e-14, abs=1e-15)
    # b spans [0, 2 pi) and W has variance 2 gamma: the map's constants, not just its shape
    big = RandomFourierFeatures(n_components=50_000, gamma=3.0, seed=0)
    assert 0.0 <= big._b.min() and big._b.max() < 2 * math.pi
    assert np.var(big.column("x")) == pytest.approx(6.0, rel=0.03)


def test_the_kernel_is_approximated():
    rff = RandomFourierFeatures(n_components=20_000, gamma=0.7, seed=5)
    x, x2 = {"u": 0.3, "v": -0.4, "w": 1.0}, {"u": -0.2, "v": 0.1, "w": 0.6}
    z, z2 = rff.transform_one(x), rff.transform_one(x2)
    dist2 = sum((x[k] - x2[k]) ** 2 for k in x)
    assert sum(z[i] * z2[i] for i in z) == pytest.approx(math.exp(-0.7 * dist2), abs=0.02)
    assert sum(v * v for v in z.values()) == pytest.approx(1.0, abs=0.02)


def test_same_seed_same_bits_other_seed_other_map():
    x = {"a": 0.25, "b": -1.5, "c": 3.0}
    z1 = RandomFourierFeatures(16, 1.0, seed=7).transform_one(x)
    z2 = RandomFourierFeatures(16, 1.0, seed=7).transform_one(x)
    z3 = RandomFourierFeatures(16, 1.0, seed=8).transform_one(x)
    assert z1 == z2
    assert z1 != z3
    # a column follows from the name, not from when it was first seen: the order of x's keys,
    # and what was seen before, do not matter to the bit
    rff = RandomFourierFeatures(16, 1.0, seed=7)
    rff.transform_one({"zz": 1.0, "b": 2.0})
    assert rff.transform_one({"c": 3.0, "a": 0.25, "b": -1.5}) == z1


@pytest.mark.parametrize("n", [1, 7, 1000])
def test_a_block_maps_to_the_bits_of_its_rows(n):
    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, 5)) * 3
    features = ["e", "d", "c", "b", "a"]
    rows = RandomFourierFeatures(64, 0.8, seed=1)
    block = RandomFourierFeatures(64, 0.8, seed=1)
    Z = block.transform_block(features, X)
    for i in range(n):
        z = rows.project(dict(zip(features, X[i].tolist())))
        assert np.array(z).tobytes() == Z[i].tobytes()


def test_a_projection_that_is_not_finite_is_refused():
    rff = RandomFourierFeatures(4, 1.0)
    with pytest.raises(ValueTooLargeError):
        rff.project({"a": 1e308, "b": 1e308})
    with pytest.raises(ValueTooLargeError):
        rff.project({"a": 10**400})
    assert rff.transform_one({"a": math.inf}) == {0: 0.0, 1: 0.0, 2: 0.0, 3: 0.0}
    with pytest.raises(ValueTooLargeError):
        rff.transform_block(["a"], np.array([[1.0], [math.inf]]))


def test_the_state_holds_the_seed_and_shape_not_the_matrix():
    model = Preprocessed(Perceptron(averaged=True), scale="standard", rff_components=500,
                         rff_gamma=2.0, rff_seed=9)  # fmt: skip
    bananas = list(datasets.Bananas().take(300))
    for x, y in bananas[:200]:
        model.learn_one(x, y)
    state = json.loads(json.dumps(model.get_state()))
    assert state["rff"] == {"n_components": 500, "gamma": 2.0, "seed": 9}
    assert state["params"]["rff_components"] == 500
    # 500 weights and their averages are in the model; a 2 x 500 matrix would be 1000 more
    assert len(json.dumps(state)) < 80_000
    restored = StreamClassifier.from_state(state)
    for x, y in bananas[200:]:
        assert restored.predict_learn_one(x, y) == model.predict_learn_one(x, y)
    assert restored.get_state() == model.get_state()
    # a map whose recorded params do not match its own state is refused
    state["rff"]["seed"] = 10
    with pytest.raises(ValueError):
        StreamClassifier.from_state(state)


def test_a_model_without_the_map_keeps_its_state_unchanged():
    params = Preprocessed(Perceptron(), scale="standard").get_state()["params"]
    assert params == {"scale": "standard", "hash_bits": None}


def _prequential(model, data):
    right = 0
    for x, y in data:
        right += model.predict_learn_one(x, y) == y
    return right / len(data)


def test_bananas_is_learned_well_above_linear():
    data = list(datasets.Bananas())
    linear = _prequential(Preprocessed(Perceptron(averaged=True), scale="standard"), data)
    mapped = Preprocessed(Perceptron(averaged=True), scale="standard", rff_components=100,
                          rff_gamma=2.0)  # fmt: skip
    accuracy = _prequential(mapped, data)
    assert linear < 0.60
    assert accuracy >= 0.85
    # other seeds of the map land there too: not one lucky draw
    for seed in (1, 2):
        again = Preprocessed(Perceptron(averaged=True), scale="standard", rff_components=100,
                             rff_gamma=2.0, rff_seed=seed)  # fmt: skip
        assert _prequential(again, data) >= 0.85


def test_it_is_a_river_transformer_in_a_pipeline():
    model = compose.Pipeline(RandomFourierFeatures(50, 1.0), Perceptron())
    x = {"a": 1.0}
    model.learn_one(x, True)
    assert model.predict_one(x) in (True, False)
    assert RandomFourierFeatures(50, 1.0).clone().get_state()["n_components"] == 50
    with pytest.raises(ValueError):
        RandomFourierFeatures(0, 1.0)
    with pytest.raises(ValueError):
        RandomFourierFeatures(10, math.inf)


def test_memory_is_bounded_whatever_the_vocabulary():
    from stream_perceptron.learners import fourier

    rff = RandomFourierFeatures(8, 1.0, seed=2)
    first = rff.transform_one({"f0": 1.0, "f1": 2.0})
    for i in range(fourier.COLUMN_CACHE + 10):
        rff.transform_one({f"n{i}": 1.0})
    assert len(rff._columns) <= fourier.COLUMN_CACHE
    assert rff.transform_one({"f0": 1.0, "f1": 2.0}) == first  # drawn again, the same


@pytest.mark.skipif(native.features is None, reason="the C extension is not built")
@pytest.mark.parametrize("seed", range(4))
def test_the_c_kernel_gives_the_bits_of_the_readable_reference(seed, monkeypatch):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 12))
    names = [f"f{j}" for j in range(d - 1)] + [7]  # a hashed bucket's int name too
    X = rng.normal(size=(50, d)) * rng.choice([1e-3, 1.0, 1e3])
    X[rng.random(X.shape) < 0.1] = 0.0
    D = int(rng.choice([1, 3, 64, 257]))
    gamma = float(rng.choice([0.01, 0.5, 4.0]))
    rff = RandomFourierFeatures(D, gamma, seed=seed)
    in_c = rff.transform_block(names, X)
    for i in range(len(X)):
        x = dict(zip(names, X[i].tolist()))
        reference = rff.project_reference(x)
        assert np.array(reference).tobytes() == in_c[i].tobytes()
        assert np.array(rff.project(x)).tobytes() == in_c[i].tobytes()
    # the pure-Python tier (no C): the same bits, block and record
    monkeypatch.setattr(fourier, "_kernel", None)
    plain = RandomFourierFeatures(D, gamma, seed=seed)
    assert plain.transform_block(names, X).tobytes() == in_c.tobytes()
    x = dict(zip(names, X[0].tolist()))
    assert np.array(plain.project(x)).tobytes() == in_c[0].tobytes()


def test_the_reference_is_the_formula():
    rff = RandomFourierFeatures(5, 0.3, seed=2)
    x = {"u": 0.7, "v": -1.1}
    W = np.stack([rff.column("u"), rff.column("v")])
    b = np.random.default_rng([2, 0]).uniform(0, 2 * math.pi, 5)
    want = [math.sqrt(2 / 5) * math.cos(float(W[:, d] @ [0.7, -1.1]) + b[d]) for d in range(5)]
    assert rff.project_reference(x) == pytest.approx(want, rel=1e-13, abs=1e-15)
