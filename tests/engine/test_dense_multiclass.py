"""The engine's dense path for the MulticlassPerceptron: the same model, counts and outputs as
its per-record path (which the learner tests hold to the plain Python loop)."""

from __future__ import annotations

import io
import json
import math
import random

import numpy as np
import pytest

import stream_perceptron.learners._multiclass_model as multiclass_model_module
from connectors import LineSource, MemorySink
from stream_perceptron import MulticlassPassiveAggressive, MulticlassPerceptron, Perceptron
from stream_perceptron.engine import Engine, Outputs
from stream_perceptron.errors import LabelError
from stream_perceptron.formats import make_parser

pytestmark = pytest.mark.skipif(
    not MulticlassPerceptron().dense_capable, reason="needs the C extension"
)


def _rows(seed: int, n: int = 3000, integers: bool = False):
    """Rows of 3 features, classes by region; labels of several types, new classes late."""
    rng = random.Random(seed)
    for i in range(n):
        if integers:  # small integers: many ties between class scores
            x = [rng.randint(-2, 2) for _ in range(3)]
        else:
            x = [rng.gauss(0, 1) for _ in range(3)]
        label = ["red", "green", "blue"][int(x[0] > 0) + int(x[1] > 0.5)]
        if i > n // 2 and x[2] > 1.2:
            label = "late"  # a class that first appears half-way
        if i % 101 == 7:
            label = None  # unlabelled
        yield x, label


def _csv(rows, bad: bool) -> bytes:
    lines = [b"a,b,c,y"]
    for i, (x, label) in enumerate(rows):
        lines.append(",".join([*(repr(v) for v in x), label or ""]).encode())
        if bad and i % 331 == 9:
            lines.append(b"1,oops,2,red")
    return b"".join(line + b"\n" for line in lines)


def _jsonl(rows, bad: bool) -> bytes:
    lines = []
    for i, (x, label) in enumerate(rows):
        lines.append(json.dumps({"a": x[0], "b": x[1], "c": x[2], "y": label}).encode())
        if bad and i % 331 == 9:
            lines.append(b'{"a": 1, "y": ')
    return b"".join(line + b"\n" for line in lines)


def _run(learner, fmt: str, data: bytes, dense: bool, chunk_size: int):
    predictions, dead = MemorySink(), MemorySink()
    engine = Engine(
        learner,
        make_parser(fmt),
        Outputs(predictions=predictions, dead_letters=dead),
        dense=dense,
        keep_recent=40,
    )
    engine.run(LineSource(io.BytesIO(data), chunk_size=chunk_size))
    return engine, predictions.lines, dead.lines


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("integers", [False, True])
@pytest.mark.parametrize("chunk_size", [800, 1 << 16])
def test_dense_multiclass_equals_the_per_record_path(fmt, bias, integers, chunk_size, monkeypatch):
    rows = list(_rows(seed=len(fmt) + chunk_size, integers=integers))
    data = (_csv if fmt == "csv" else _jsonl)(rows, bad=chunk_size < 1000)
    calls = []
    original = MulticlassPerceptron.learn_dense
    monkeypatch.setattr(
        MulticlassPerceptron, "learn_dense", lambda *a: calls.append(1) or original(*a)
    )
    a, preds_a, dead_a = _run(MulticlassPerceptron(bias=bias, lr=0.5), fmt, data, True, chunk_size)
    monkeypatch.setattr(MulticlassPerceptron, "learn_dense", original)
    b, preds_b, dead_b = _run(MulticlassPerceptron(bias=bias, lr=0.5), fmt, data, False, chunk_size)
    assert calls and a._blocks is not None and b._blocks is None
    assert a.learner.get_state() == b.learner.get_state()
    assert list(a.learner._w) == list(b.learner._w)
    assert set(a.learner._w) == {"red", "green", "blue", "late"}
    for c in a.learner._w:
        assert list(a.learner._w[c]) == list(b.learner._w[c])
    assert a.stats.get_state() == b.stats.get_state()
    assert preds_a == preds_b and dead_a == dead_b
    assert a.stats.mistakes > 10 and a.stats.unlabelled > 10


def test_learn_dense_multiclass_equals_the_learn_one_loop():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(500, 4))
    labels = [None if i % 50 == 3 else int(np.argmax(X[i, :3])) for i in range(500)]
    labels[10] = True  # equal to the class 1, but a boolean: refused, not merged into it
    features = ["w", "x", "y", "z"]
    model = MulticlassPerceptron(bias="r2")
    model.learn_one({"w": 0.5, "q": 1.0}, 2)  # a class with weights for other features
    reference = MulticlassPerceptron.from_state(model.get_state())
    before = model.get_state()
    with pytest.raises(LabelError, match="booleans and numbers are distinct classes"):
        model.learn_dense(features, X, labels)
    assert model.get_state() == before  # the block refused whole: nothing learned
    keep = [i for i in range(500) if i != 10]
    got = model.learn_dense(features, X[keep], [labels[i] for i in keep])
    want = []
    for row, y in zip(X.tolist(), labels):
        x = dict(zip(features, row))
        if y is None:
            want.append(reference.predict_one(x))
            continue
        try:
            want.append(reference.predict_learn_one(x, y))
        except LabelError:  # the row loop refuses that row alone
            continue
    assert got == want
    assert model.get_state() == reference.get_state()
    assert [list(w) for w in model._w.values()] == [list(w) for w in reference._w.values()]


def test_not_supported_configurations_use_the_per_record_path():
    learner = MulticlassPerceptron(init="random", seed=3)
    assert not learner.dense_capable
    assert Engine(learner, make_parser("csv"))._blocks is None
    assert Engine(MulticlassPerceptron(), make_parser("csv"))._blocks is not None
    assert Engine(MulticlassPerceptron(averaged=True), make_parser("csv"))._blocks is not None

    class Custom(MulticlassPerceptron):
        def _scores(self, x, w, b):
            return MulticlassPerceptron._scores(x, w, b)

    assert not Custom().dense_capable
    assert Engine(Custom(), make_parser("csv"))._blocks is None
    assert Perceptron().dense_capable  # and its own kernel


def test_r_is_a_plain_left_fold_in_every_tier():
    # 1e16 + 1 + 1 + 1: a plain left fold loses every 1 (1e16 + 1 rounds back to 1e16, ties to
    # even), a compensated sum (Python 3.12's sum(), Neumaier) keeps them: R = 1e8 exactly here,
    # not sqrt(1e16 + 4), and the r2 bias steps (R**2) differ too.
    X = np.array([[1e8, 1.0, 1.0, 1.0], [-1e8, 1.0, -1.0, 1.0], [1e8, -1.0, 1.0, -1.0]] * 4)
    labels = ["a", "b", "c"] * 4
    features = ["w", "x", "y", "z"]
    dense, pure, helpers = (MulticlassPerceptron(bias="r2") for _ in range(3))
    dense.learn_dense(features, X, labels)
    for row, y in zip(X.tolist(), labels):
        helpers.learn_one(dict(zip(features, row)), y)  # the dict API's C helpers
    saved = multiclass_model_module._speedups
    multiclass_model_module._speedups = None  # the pure-Python reference
    try:
        for row, y in zip(X.tolist(), labels):
            pure.learn_one(dict(zip(features, row)), y)
    finally:
        multiclass_model_module._speedups = saved
    assert math.sqrt(math.fsum([1e16, 1.0, 1.0, 1.0])) == math.sqrt(1e16 + 4.0) != 1e8
    assert pure.max_norm == 1e8
    for model in (dense, helpers):
        assert model.max_norm == pure.max_norm
        assert model.get_state() == pure.get_state()


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("variant", ["pa", "pa1", "pa2"])
@pytest.mark.parametrize("chunk_size", [800, 1 << 16])
def test_multiclass_passive_aggressive_blocks_equal_the_per_record_path(
    fmt, variant, chunk_size, monkeypatch
):
    rows = list(_rows(seed=len(fmt) + chunk_size + len(variant)))
    data = (_csv if fmt == "csv" else _jsonl)(rows, bad=chunk_size < 1000)
    calls = []
    original = MulticlassPassiveAggressive.learn_dense
    monkeypatch.setattr(
        MulticlassPassiveAggressive, "learn_dense", lambda *a: calls.append(1) or original(*a)
    )

    def make() -> MulticlassPassiveAggressive:
        return MulticlassPassiveAggressive(C=0.1, variant=variant)

    a, preds_a, dead_a = _run(make(), fmt, data, True, chunk_size)
    monkeypatch.setattr(MulticlassPassiveAggressive, "learn_dense", original)
    b, preds_b, dead_b = _run(make(), fmt, data, False, chunk_size)
    assert calls and a._blocks is not None and b._blocks is None
    assert a.learner.get_state() == b.learner.get_state()
    assert set(a.learner._w) == {"red", "green", "blue", "late"}
    for c in a.learner._w:
        assert list(a.learner._w[c]) == list(b.learner._w[c])
    assert a.stats.get_state() == b.stats.get_state()
    assert preds_a == preds_b and dead_a == dead_b
