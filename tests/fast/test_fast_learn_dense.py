"""Perceptron.learn_dense (C) against the pure-Python predict_learn_one loop: same predictions
and state, bit for bit."""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess

import numpy as np
import pytest
from fast_helpers import (
    MODE_IDS,
    MODES,
    assert_same_model,
    check,
    needs_c,
    reference,
    run_fast,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import datasets

from stream_perceptron import MulticlassPerceptron, Perceptron, native
from stream_perceptron.errors import LabelError, ValueTooLargeError
from stream_perceptron.learners.binary_blocks import encode_labels
from stream_perceptron.learners.labels import predicted_label

pytestmark = needs_c

PHISHING = list(datasets.Phishing())
PHISHING_FEATURES = list(PHISHING[0][0])
PHISHING_X = np.array([[x[k] for k in PHISHING_FEATURES] for x, _ in PHISHING], dtype=np.float64)
PHISHING_Y = [y for _, y in PHISHING]


def gaussian(n=3000, d=12, seed=0, noise=0.5, offset=0.3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 10.0, size=d)
    w = rng.normal(size=d)
    y = np.where(X @ w + offset + rng.normal(scale=noise, size=n) > 0, 1, -1)
    return [f"f{j}" for j in range(d)], X, y.tolist()


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_gaussian(mode):
    features, X, y = gaussian()
    model = check(lambda: Perceptron(**mode), features, X, y)
    assert model.n_mistakes > 100


def cancelling(n=600, d=20, seed=0):
    """Values whose sums cancel to exact zeros or not depending on the order of the additions
    and on rounding every product: a reordered sum or an FMA flips ties, hence mistakes."""
    rng = np.random.default_rng(seed)
    X = rng.choice([1e16, -1e16, 1.0, -1.0, 3.0, -7.0, 0.1, -0.3, 0.0, -0.0], size=(n, d))
    return [f"f{j}" for j in range(d)], X, rng.choice([-1, 1], size=n).tolist()


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_cancelling_values(mode):
    for seed in range(3):
        check(lambda: Perceptron(**mode), *cancelling(seed=seed))


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_gaussian_separable_long_gaps_between_mistakes(mode):
    # Few mistakes, far apart: the NumPy kernel's blocks grow to their largest size.
    features, X, y = gaussian(n=20000, d=5, seed=3, noise=0.0, offset=0.0)
    check(lambda: Perceptron(**mode), features, X, y)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_phishing(mode):
    model = check(lambda: Perceptron(**mode), PHISHING_FEATURES, PHISHING_X, PHISHING_Y)
    assert model.n_seen == 1250 and model.n_mistakes > 100


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_after_learning_from_dict_rows(mode):
    """Some features of ``features`` already in _w (and _u), some not, plus foreign ones."""
    features, X, y = gaussian(n=1500, d=6, seed=1)

    def make():
        model = Perceptron(**mode)
        rng = np.random.default_rng(9)
        for t in range(40):
            x = {"f4": float(rng.normal()), "other": float(rng.normal())}
            if t % 3 == 0:
                x["f1"] = float(rng.normal())
            model.learn_one(x, 1 if rng.random() < 0.5 else -1)
        assert "f1" in model._w and "f0" not in model._w and "other" in model._w
        return model

    check(make, features, X, y)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_first_mistake_only_later_keeps_absent_features_out(mode):
    """Rows the model already gets right: absent features must stay absent, then enter in
    ``features`` order after the existing keys at the first mistake."""

    def make():
        model = Perceptron(**mode)
        model.learn_one({"c": 1.0, "zz": 2.0}, 1)  # _w = {c, zz}, b > 0 unless bias none
        return model

    features = ["a", "b", "c", "d"]
    X = np.array([[-5.0, 3.0, 1.0, -0.0]] * 3 + [[0.5, -1.0, -2.0, 4.0]] * 3)
    y = [1, 1, 1, 1, -1, 1]
    check(make, features, X, y)
    model = make()
    run_fast(model, features, X[:3], y[:3])
    assert list(model._w) == ["c", "zz"]  # no mistake yet: nothing added
    run_fast(model, features, X[3:], y[3:])
    assert list(model._w) == ["c", "zz", "a", "b", "d"]


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_consecutive_chunks_equal_one_call(mode):
    features, X, y = gaussian(n=2000, d=8, seed=2)
    rng = np.random.default_rng(4)
    chunks = sorted(set(rng.integers(1, len(X), size=25).tolist()) | {1, 2, 3, 1999})
    check(lambda: Perceptron(**mode), features, X, y, chunks=chunks)
    check(lambda: Perceptron(**mode), PHISHING_FEATURES, PHISHING_X, PHISHING_Y,
          chunks=list(range(1, 1250, 97)))  # fmt: skip


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_unlabelled_rows_are_only_predicted(mode):
    features, X, y = gaussian(n=1500, d=5, seed=6)
    rng = np.random.default_rng(1)
    labels = [None if rng.random() < 0.3 else v for v in y]
    labels[0] = None  # an unlabelled first row: n_seen == 0 when averaged
    model = check(lambda: Perceptron(**mode), features, X, labels)
    assert model.n_seen == sum(v is not None for v in labels)


# -- adversarial values ---------------------------------------------------------------------------

SPECIAL = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 0.1, -0.1, 1e-300, -1e-300, 1e300,
           -1e300, 5e-324, -5e-324, 2.2250738585072014e-308, 1e-160, 1e160, -1e154, 1.7e308,
           1 + 2**-52, 1 - 2**-53, 2**53, 3e-17]  # fmt: skip
values = st.one_of(
    st.sampled_from(SPECIAL),
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-4, 4).map(lambda v: float(round(v * 4) / 4)),  # small dyadic: exact ties
)


CANCELLING = [1e16, -1e16, 1.0, -1.0, 3.0, -7.0, 0.1, -0.3, 0.0, -0.0]


@st.composite
def problems(draw):
    cells = values
    if draw(st.booleans()):
        d = draw(st.integers(1, 5))
    else:  # wide rows of cancelling values: the order of the sum decides ties
        d = draw(st.integers(8, 24))
        cells = st.sampled_from(CANCELLING)
    n = draw(st.integers(1, 30))
    X = np.array(draw(st.lists(st.lists(cells, min_size=d, max_size=d), min_size=n, max_size=n)))
    labels = draw(st.lists(st.sampled_from([-1, 1, None]), min_size=n, max_size=n))
    mode = draw(st.sampled_from(MODES))
    lr = draw(st.sampled_from([mode["lr"], 1e-300, 1e300, 3.0, 1]))
    prior = draw(st.lists(
        st.tuples(st.dictionaries(st.sampled_from(["f0", "f2", "g"]), values, max_size=3),
                  st.sampled_from([-1, 1])),
        max_size=4,
    ))  # fmt: skip
    chunks = draw(st.lists(st.integers(1, max(1, n - 1)), max_size=3))
    return d, X, labels, {**mode, "lr": lr}, prior, sorted(set(chunks))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=problems())
def test_adversarial_values(problem):
    d, X, labels, mode, prior, chunks = problem
    features = [f"f{j}" for j in range(d)]

    def make():
        model = Perceptron(**mode)
        for x, y in prior:
            with contextlib.suppress(ValueTooLargeError):  # refused: the model unchanged
                model.learn_one(x, y)
        return model

    check(make, features, X, labels)
    if chunks and chunks[-1] < len(X):
        check(make, features, X, labels, chunks=chunks)


TIES = [
    # score exactly 0 every time: a tie is a mistake, predicted negative
    (np.array([[1.0, -1.0], [1.0, -1.0], [-1.0, 1.0], [2.0, -2.0]]), [1, -1, 1, -1]),
    # negative zeros everywhere: products and sums of signed zeros
    (np.array([[-0.0, -0.0], [-0.0, 0.0], [0.0, -0.0], [-0.0, -0.0]]), [-1, 1, 1, -1]),
    # huge and tiny magnitudes: updates that would overflow to inf are refused
    (np.array([[1e300, -1e-300], [1.7e308, 1e300], [-1.7e308, -1e300], [1e-300, 1.0]]),
     [1, -1, 1, -1]),
    # cancellation to exactly zero between features, then absorption of small terms
    (np.array([[1e16, 1.0, -1e16], [1e16, 1.0, -1e16], [3.0, 1e-16, -3.0]]), [-1, 1, 1]),
]  # fmt: skip


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("case", range(len(TIES)))
def test_hand_made_corner_cases(case, mode):
    X, y = TIES[case]
    features = [f"f{j}" for j in range(X.shape[1])]
    for repeat in (1, 5):
        check(lambda: Perceptron(**mode), features, np.tile(X, (repeat, 1)), y * repeat)


# -- the tests catch inexact kernels --------------------------------------------------------------


def test_the_c_kernels_compile_without_fma():
    objdump = shutil.which("objdump")
    if objdump is None:
        pytest.skip("objdump is not installed")
    # both extensions hold the rules (_rules.h): the blocks' and the dict API's
    for module, symbol in ((native.dense, "py_kernel_binary"), (native.speedups, "binary_learn")):
        asm = subprocess.run(
            [objdump, "-d", module.__file__], capture_output=True, text=True, check=True
        ).stdout
        assert f"<{symbol}" in asm  # the disassembly is really there
        assert not re.search(r"vfn?m(add|sub)", asm)


# -- API -----------------------------------------------------------------------------------------


def test_dense_capable():
    assert Perceptron().dense_capable
    assert Perceptron(bias="r2", averaged=True, lr=2).dense_capable
    assert not Perceptron(init="random", seed=1).dense_capable
    assert not Perceptron(lr=True).dense_capable

    class Custom(Perceptron):
        def _learn(self, x, y):
            return super()._learn(x, y)

    class Other(Perceptron):  # overrides nothing the kernel reproduces
        def margin(self, x, y):
            return super().margin(x, y)

    class Logged(Other):  # below a class that may take the kernel, the example's entry point
        def learn_one(self, x, y, **kwargs):
            return super().learn_one(x, y, **kwargs)

    assert not Custom().dense_capable
    assert Other().dense_capable
    # the answers are kept per class (learners/_base.py): asked again, in any order, each
    # class still gets its own
    for _ in range(2):
        assert not Logged().dense_capable and Other().dense_capable
        assert not Custom().dense_capable and Perceptron().dense_capable


def test_the_dense_learner_protocol():
    from stream_perceptron import CentroidClassifier
    from stream_perceptron.learners import DenseLearner

    for model in (Perceptron(), MulticlassPerceptron(), CentroidClassifier()):
        assert isinstance(model, DenseLearner)
    assert not CentroidClassifier().dense_capable  # the base class's answer
    with pytest.raises(NotImplementedError):
        CentroidClassifier().learn_dense(["a"], np.zeros((1, 1)), [1])


def test_without_c_nothing_is_dense_capable(monkeypatch):
    monkeypatch.setattr(native, "dense", None)
    for model in (Perceptron(), MulticlassPerceptron()):
        assert not model.dense_capable
        with pytest.raises(RuntimeError, match="C kernel is unavailable"):
            model.learn_dense(["a"], np.zeros((1, 1)), np.array([1]))


def test_rejects_bad_input():
    X = np.zeros((2, 2))
    with pytest.raises(ValueError, match="does not support"):
        Perceptron(init="random").learn_dense(["a", "b"], X, np.array([1, 1]))
    with pytest.raises(ValueError, match="duplicate"):
        Perceptron().learn_dense(["a", "a"], X, np.array([1, 1]))
    with pytest.raises(ValueError, match="shape"):
        Perceptron().learn_dense(["a"], X, np.array([1, 1]))
    with pytest.raises(ValueError, match="shape"):
        Perceptron().learn_dense(["a", "b"], X, np.array([1]))
    with pytest.raises(ValueError, match="signs"):
        Perceptron().learn_dense(["a", "b"], X, np.array([1, 2]))
    with pytest.raises(ValueError, match="signs"):  # not wrapped around to int8's 1
        Perceptron().learn_dense(["a", "b"], X, np.array([1, 257]))
    with pytest.raises(ValueError, match="non-finite"):
        Perceptron().learn_dense(["a", "b"], X + np.nan, np.array([1, 1]))
    model = Perceptron()
    assert (
        model.learn_dense(["a", "b"], np.zeros((0, 2)), np.zeros(0)).size
        == 0
    )
    assert model.get_state() == Perceptron().get_state()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_a_non_finite_value_anywhere_raises_and_leaves_the_model_alone(bad):
    features, X, y = gaussian(n=500, d=4)
    model = Perceptron(averaged=True)
    run_fast(model, features, X[:100], y[:100])
    before = model.get_state()
    X = X[100:].copy()
    X[350, 2] = bad
    with pytest.raises(ValueError, match="non-finite"):
        model.learn_dense(features, X, np.array(y[100:]))
    assert model.get_state() == before


def test_int64_signs_and_non_contiguous_x():
    features, X, y = gaussian(n=300, d=4)
    want = Perceptron(averaged=True)
    expected = reference(want, features, X, y)
    got = Perceptron(averaged=True)
    got._labels.encode(1), got._labels.encode(-1)
    Xf = np.asfortranarray(X)
    preds = got.learn_dense(features, Xf, np.array(y, dtype=np.int64))
    assert preds.tolist() == expected
    assert_same_model(got, want)


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_float32_rows_are_read_as_the_doubles_they_are(mode):
    """float32 X is read in place (no float64 copy): the same predictions and model, bit for
    bit, as the pure-Python loop over the rows converted to float64; a non-finite float32
    value is refused as a float64 one is."""
    features, X, y = gaussian(n=2000, d=8)
    X32 = X.astype(np.float32)
    want = Perceptron(**mode)
    expected = reference(want, features, X32.astype(np.float64), y)
    got = Perceptron(**mode)
    assert run_fast(got, features, X32, y) == expected
    assert_same_model(got, want)
    before = got.get_state()
    X32[5, 1] = np.inf
    with pytest.raises(ValueError, match="non-finite"):
        got.learn_dense(features, X32, np.array(y))
    assert got.get_state() == before


def test_encode_labels_follows_the_encoding_as_it_settles():
    model = Perceptron()
    labels = [None, b"1", b"", 1, b"0", None, b"-1", b"cat", b"1"]
    signs, encodings, errors = encode_labels(model, labels)
    assert signs.tolist() == [0, 1, 0, 1, -1, 0, 0, 0, 1]
    assert encodings == ["bool"] + ["0/1"] * 8  # names: (0, 1) == (False, True) as pairs
    assert sorted(errors) == [6, 7] and all(isinstance(e, LabelError) for e in errors.values())
    assert model._labels.get_state() == {"encoding": "0/1", "settled": True}
    # the same as the row loop: the predictions decode with the encoding of their time
    ref = Perceptron()
    for y in [None, 1, None, 1, 0, None]:
        if y is not None:
            ref._labels.encode(y)
    assert ref._labels.get_state() == model._labels.get_state()


def test_mixed_batch_with_label_errors_as_the_engine_would_run_it():
    features, X, y = gaussian(n=400, d=4, seed=8)
    cells = [str(v).encode() for v in y]
    cells[0], cells[5], cells[9] = b"", b"2", b"true"
    want = Perceptron()
    expected = []
    for row, cell in zip(X.tolist(), cells):
        x = dict(zip(features, row))
        label = None if not cell else int(cell) if cell != b"true" else True
        if label is None:
            expected.append(want.predict_one(x))
            continue
        try:
            expected.append(want.predict_learn_one(x, label))
        except LabelError:
            expected.append("bad")
    got = Perceptron()
    signs, encodings, errors = encode_labels(got, cells)
    signs = np.asarray(signs)  # an int8 array("b")
    keep = np.ones(len(X), bool)
    keep[list(errors)] = False
    preds = got.learn_dense(features, X[keep], signs[keep])
    kept_encodings = [e for i, e in enumerate(encodings) if keep[i]]
    decoded = iter(predicted_label(e, p > 0) for p, e in zip(preds.tolist(), kept_encodings))
    assert ["bad" if i in errors else next(decoded) for i in range(len(X))] == expected
    assert_same_model(got, want)
