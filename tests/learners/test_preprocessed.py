"""Preprocessed learners: standardisation against River's StandardScaler, MurmurHash3 against
scikit-learn's, the hashed model's bounded size, and the state round trip."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
from river import compose, datasets, preprocessing
from sklearn.utils import murmurhash3_32

from stream_perceptron import MulticlassPerceptron, Perceptron, Preprocessed
from stream_perceptron.errors import ValueTooLargeError
from stream_perceptron.learners import StreamClassifier, hashing
from stream_perceptron.learners.hashing import FeatureHasher, murmur3_32, murmur3_32_reference
from stream_perceptron.learners.scaling import Standardizer


def _gaussian_rows(n: int = 600, d: int = 5, seed: int = 0) -> list[tuple[dict, bool]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 50.0, size=d) + rng.uniform(-20, 20, size=d)
    w = rng.normal(size=d)
    return [
        ({f"f{j}": float(v) for j, v in enumerate(row) if rng.random() > 0.2}, bool(row @ w > 0))
        for row in X
    ]


def test_standardizer_is_rivers_standard_scaler():
    """Same running statistics to the bit (River's update, in the same order), and the values
    River's learn_one-then-transform_one gives (to rounding: River takes var ** 0.5, we sqrt)."""
    ours, river = Standardizer(), preprocessing.StandardScaler()
    for x, _ in _gaussian_rows():
        got, pending = ours.transform(x)
        ours.commit(pending)
        river.learn_one(x)
        want = river.transform_one(x)
        assert list(got) == list(x)
        for k in x:
            n, mean, var = ours.stats(k)
            assert (n, mean, var) == (river.counts[k], river.means[k], river.vars[k])
            if n == 1:
                assert got[k] == want[k] == 0.0
            else:
                assert math.isclose(got[k], want[k], rel_tol=1e-14, abs_tol=1e-300)


def test_constant_features_pass_through_and_absent_ones_stay_absent():
    scaler = Standardizer()
    seen = []
    for x in [{"colour=red": 1.0, "t": 1.0}, {"colour=red": 1.0, "t": 3.0}, {"t": 2.0}]:
        got, pending = scaler.transform(x)
        scaler.commit(pending)
        seen.append(got)
    # first sight: 0.0; an indicator seen twice with the same value: passed through
    assert seen[0] == {"colour=red": 0.0, "t": 0.0}
    assert seen[1] == {"colour=red": 1.0, "t": 1.0}  # t: (3 - 2) / 1
    assert seen[2] == {"t": 0.0}  # mean 2: the indicator is not counted when absent
    assert scaler.stats("colour=red") == (2, 1.0, 0.0)


def test_learns_as_rivers_pipeline():
    """Preprocessed(..., scale="standard").learn_one is River's StandardScaler() | model."""
    for klass, data in ((Perceptron, datasets.Phishing()), (MulticlassPerceptron,
                                                            datasets.ImageSegments())):  # fmt: skip
        ours = Preprocessed(klass(averaged=True), scale="standard")
        river = compose.Pipeline(preprocessing.StandardScaler(), klass(averaged=True))
        for x, y in data:
            ours.learn_one(x, y)
            river.learn_one(x, y)
        inner = river[klass.__name__]
        assert ours.n_mistakes == inner.n_mistakes
        a, b = ours.model.average_weights, inner.average_weights
        flat_a = a if klass is Perceptron else {(c, k): v for c in a for k, v in a[c].items()}
        flat_b = b if klass is Perceptron else {(c, k): v for c in b for k, v in b[c].items()}
        assert flat_a.keys() == flat_b.keys()
        for k in flat_a:
            assert math.isclose(flat_a[k], flat_b[k], rel_tol=1e-9, abs_tol=1e-9)


def test_scaling_reaches_the_issue_accuracy_on_image_segments():
    model = Preprocessed(MulticlassPerceptron(averaged=True), scale="standard")
    right = sum(model.predict_learn_one(x, y) == y for x, y in datasets.ImageSegments())
    assert right / 2310 >= 0.87


def test_predict_then_learn_is_predict_one_then_learn_one():
    a = Preprocessed(Perceptron(averaged=True), scale="standard", hash_bits=4)
    b = Preprocessed(Perceptron(averaged=True), scale="standard", hash_bits=4)
    for x, y in _gaussian_rows(300):
        assert a.predict_learn_one(x, y) == b.predict_one(x)
        b.learn_one(x, y)
    assert a.get_state() == b.get_state()


@pytest.mark.parametrize("seed", range(3))
def test_murmur3_is_scikit_learns(seed):
    rng = random.Random(seed)
    alphabet = "abcxyz=_0123456789éß€😀 "
    for _ in range(2000):
        name = "".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
        data = name.encode("utf-8")
        want = murmurhash3_32(data, seed=0, positive=True)
        assert murmur3_32_reference(data) == want
        assert murmur3_32(data) == want
        assert murmur3_32_reference(data, 42) == murmurhash3_32(data, seed=42, positive=True)


def test_hasher_buckets_are_the_low_bits_and_collisions_add_up():
    hasher = FeatureHasher(3)
    x = {f"w{i}": float(i + 1) for i in range(20)}
    got, names = hasher.transform(x)
    want: dict[int, float] = {}
    for k, v in x.items():
        b = murmurhash3_32(k, seed=0, positive=True) & 7
        want[b] = want[b] + v if b in want else v
    assert got == want and list(got) == list(want)
    hasher.commit(names)
    assert hasher.merged == 20 - len(want)
    for b in got:
        assert murmurhash3_32(hasher.name_of(b), positive=True) & 7 == b


def test_hashed_model_size_is_bounded(monkeypatch):
    """All-distinct feature names: weights, statistics, the name cache and the saved state stop
    growing once the buckets are full."""
    monkeypatch.setattr(hashing, "NAME_CACHE", 64)
    model = Preprocessed(Perceptron(averaged=True), scale="standard", hash_bits=8)
    rng = random.Random(0)
    sizes = []
    for i in range(30_000):
        x = {f"u{i}_{j}": rng.uniform(-1, 1) for j in range(5)}
        model.predict_learn_one(x, rng.random() < 0.5)
        if i in (3_000, 29_999):
            sizes.append(len(json.dumps(model.get_state())))
    assert len(model.model.weights) <= 256 and len(model.scaler) <= 256
    assert len(model.hasher._names) <= 64
    assert sizes[1] < sizes[0] * 1.05
    assert model.hasher.collisions > 0
    named = [k for k in model.weights if isinstance(k, str)]
    assert named and all(k.startswith("u29") for k in named[-5:])


@pytest.mark.parametrize("prep", [dict(scale="standard"), dict(hash_bits=6, scale="standard")])
def test_state_round_trip_continues_exactly(prep):
    rows = _gaussian_rows(800)
    whole = Preprocessed(Perceptron(averaged=True), **prep)
    for x, y in rows:
        whole.predict_learn_one(x, y)
    half = Preprocessed(Perceptron(averaged=True), **prep)
    for x, y in rows[:400]:
        half.predict_learn_one(x, y)
    restored = StreamClassifier.from_state(json.loads(json.dumps(half.get_state())))
    assert isinstance(restored, Preprocessed)
    for x, y in rows[400:]:
        restored.predict_learn_one(x, y)
    assert restored.get_state() == whole.get_state()
    assert repr(restored) == repr(whole)


def _transform_both(rows: list[dict], strict: bool = True) -> tuple[list, list]:
    """Standardizer.transform with its C helper and with the Python reference, row by row."""
    from stream_perceptron.learners import scaling

    if scaling._speedup is None:
        pytest.skip("the C extension is not built")
    out = []
    for speedup in (scaling._speedup, None):
        saved, scaling._speedup = scaling._speedup, speedup
        try:
            scaler, got = Standardizer(), []
            for x in rows:
                try:
                    values, pending = scaler.transform(x, strict)
                except (ValueTooLargeError, OverflowError) as e:
                    got.append(type(e).__name__)
                    continue
                if strict:  # a prediction (not strict) never commits
                    scaler.commit(pending)
                got.append([(k, type(v), repr(v)) for k, v in values.items()])
            got.append(scaler.get_state())
            out.append(got)
        finally:
            scaling._speedup = saved
    return out[0], out[1]


@pytest.mark.parametrize("strict", [True, False])
def test_the_c_dict_transform_is_the_reference(strict):
    """Ints (passed through as the same int when constant), bools and numpy floats (the Python
    loop), -0.0, huge ints, overflowing statistics: the C helper gives the reference's values,
    types and errors."""
    rng = random.Random(1)
    pool = [0, 1, 3, -2, 0.5, -0.0, 1e308, -1e308, 1e-310, True, np.float64(2.5), 10**400, 7]
    rows = []
    for _ in range(3000):
        keys = rng.sample(["a", "b", "c", "d", 5, "e"], rng.randrange(0, 6))
        rows.append({k: rng.choice(pool) if k != "e" else 4 for k in keys})
    with np.errstate(over="ignore", invalid="ignore"):  # numpy scalars overflowing, as meant
        got, want = _transform_both(rows, strict)
    assert got == want
    assert "ValueTooLargeError" in want if strict else "OverflowError" in want
