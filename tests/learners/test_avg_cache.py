"""``_speedups.AvgCache``: the averaged multi-class scores from a dense copy of the model.

The cache must give exactly what the module's ``avg_class_argmax`` gives (itself held to the
pure-Python loops in test_speedups.py) and what the readable reference computes here from the
dicts, after any change of the model's dicts in place (a weight changed, added or removed, a
class's dict replaced, a class added, a bias changed), and decline (None) what it does not
handle. The learner uses it for ``predict_one`` and ``predict_learn_one`` when averaged.
"""

from __future__ import annotations

import copy
import math
import pickle
import struct
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import stream_perceptron.learners.multiclass as multiclass_module
from stream_perceptron import MulticlassPerceptron

try:
    from stream_perceptron import _speedups
except ImportError:
    _speedups = None

pytestmark = pytest.mark.skipif(_speedups is None, reason="the C extension is not built")

# The cache reads the dicts' version tags (PEP 509), gone from Python 3.12: it declines there.
HANDLES = sys.version_info < (3, 12)


def bits(v: Any) -> Any:
    if type(v) is float:
        return ("f", "nan" if v != v else struct.pack("<d", v).hex())
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, [bits(u) for u in v])
    if isinstance(v, dict):
        return ("dict", [(bits(k), bits(u)) for k, u in v.items()])
    return (type(v).__name__, repr(v))


def reference_scores(w: dict, b: dict, u: dict, ub: dict, t: float, x: dict) -> Any:
    """``MulticlassPerceptron._average_scores``' pure-Python loop: (class, score) pairs."""
    for c, wc in w.items():
        uc = u[c]
        dot = udot = 0.0
        for k, v in x.items():
            wk = wc.get(k)
            if wk is not None:
                dot += wk * v
                uk = uc.get(k)
                if uk is not None:
                    udot += uk * v
        yield c, (dot + b[c]) - (udot + ub[c]) / t


def reference(w: dict, b: dict, u: dict, ub: dict, t: float, x: dict) -> Any:
    """``(a_hat, (y_hat, r))`` as MulticlassPerceptron's pure-Python code computes them:
    ``_argmax(_average_scores(x))``, ``_argmax(_scores(x, w, b))`` and R's left fold."""
    best = abest = None
    best_score = abest_score = -math.inf
    for c, wc in w.items():
        uc = u[c]
        dot = udot = 0.0
        for k, v in x.items():
            wk = wc.get(k)
            if wk is not None:
                dot += wk * v
                uk = uc.get(k)
                if uk is not None:
                    udot += uk * v
        s = dot + b[c]
        a = s - (udot + ub[c]) / t
        if best is None or s > best_score:
            best, best_score = c, s
        if abest is None or a > abest_score:
            abest, abest_score = c, a
    sq = 0.0
    for v in x.values():
        sq += v * v
    return abest, (best, math.sqrt(sq))


KEYS = st.sampled_from(["a", "b", "c", 0, 7])
CLASSES = st.sampled_from(["red", "blue", "green", 0, 1, True])
FINITE = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.floats(-4, 4),
    st.sampled_from([0.0, -0.0, 1.0, -1.0, 5e-324, 1e308, -1e308]),
    st.integers(-5, 5),
)
WEIGHTS = st.one_of(FINITE.map(float), st.sampled_from([math.inf, -math.inf, math.nan]))
XS = st.dictionaries(KEYS, FINITE, min_size=1, max_size=5)
OPS = st.one_of(
    st.tuples(st.just("query"), XS, st.booleans()),
    st.tuples(st.just("set w"), st.integers(0, 9), KEYS, WEIGHTS),
    st.tuples(st.just("set u"), st.integers(0, 9), KEYS, WEIGHTS),
    st.tuples(st.just("del w"), st.integers(0, 9), KEYS, st.none()),
    st.tuples(st.just("new w dict"), st.integers(0, 9), KEYS, WEIGHTS),
    st.tuples(st.just("set b"), st.integers(0, 9), st.none(), WEIGHTS),
    st.tuples(st.just("set ub"), st.integers(0, 9), st.none(), WEIGHTS),
    st.tuples(st.just("add class"), CLASSES, KEYS, WEIGHTS),
    st.tuples(st.just("same x again"), st.none(), st.none(), st.none()),
)


def apply(op: tuple, w: dict, b: dict, u: dict, ub: dict) -> None:
    kind, i, k, v = op
    classes = list(w)
    if kind == "add class":
        if i not in w:
            w[i], b[i], u[i], ub[i] = {k: v}, 0.0, {}, 0.0
        return
    if not classes:
        return
    c = classes[i % len(classes)]
    if kind == "set w":
        w[c][k] = v
    elif kind == "set u":
        u[c][k] = v
    elif kind == "del w":
        w[c].pop(k, None)
    elif kind == "new w dict":
        w[c] = {**w[c], k: v}
    elif kind == "set b":
        b[c] = v
    elif kind == "set ub":
        ub[c] = v


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(OPS, min_size=1, max_size=40), t=st.sampled_from([1, 2, 7, 1.5, 1e300]))
@example(  # an accumulator changed alone
    ops=[("query", {"a": 1.0}, False), ("set u", 0, "a", 10.0), ("query", {"a": 1.0}, False)],
    t=2,
)
@example(  # a bias changed alone, then an averaging bias
    ops=[("query", {"a": 1.0}, False), ("set b", 0, None, 3.0), ("same x again",) + (None,) * 3,
         ("set ub", 0, None, 8.0), ("same x again",) + (None,) * 3],
    t=2,
)  # fmt: skip
def test_the_cache_gives_the_module_kernel_and_the_reference_after_any_change(ops, t):
    w: dict = {"red": {"a": 1.0}}
    b: dict = {"red": 0.5}
    u: dict = {"red": {"a": 2.0, "z": 1.0}}
    ub: dict = {"red": -1.0}
    cache = _speedups.AvgCache()
    handled = 0
    last_x: dict = {"a": 1.0}
    for op in ops:
        if op[0] == "query":
            last_x, snapshot = op[1], op[2]
        elif op[0] == "same x again":
            snapshot = False
        else:
            apply(op, w, b, u, ub)
            continue
        got = cache.avg_class_argmax(w, b, u, ub, t, last_x, snapshot)
        want = _speedups.avg_class_argmax(w, b, u, ub, t, last_x, snapshot)
        assert want is not None
        if got is None:
            assert not HANDLES, "declined keys, values and weights it handles"
            continue
        handled += 1
        assert bits(got) == bits(want)
        a_hat, (y_hat, r, *snap) = got
        assert bits((a_hat, (y_hat, r))) == bits(reference(w, b, u, ub, t, last_x))
        if snapshot:
            assert snap == [tuple(z for kv in last_x.items() for z in kv)]
        scores = cache.avg_class_scores(w, b, u, ub, t, last_x)
        assert bits(list(scores.items())) == bits(list(reference_scores(w, b, u, ub, t, last_x)))
        assert bits(scores) == bits(_speedups.avg_class_scores(w, b, u, ub, t, last_x))
    assert handled or not HANDLES or all(op[0] not in ("query", "same x again") for op in ops)


@pytest.mark.skipif(not HANDLES, reason="the cache declines on Python 3.12+")
def test_what_the_cache_declines_and_takes_back():
    w, b, u, ub = {"red": {"a": 1.0}, "blue": {}}, {"red": 0.0, "blue": 0.0}, {}, {}
    u.update({"red": {"a": 1.0}, "blue": {}})
    ub.update({"red": 0.0, "blue": 0.0})
    cache = _speedups.AvgCache()
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"a": 1.0}) == ("red", ("red", 1.0))
    # a value of x not finite (0.0 * inf is NaN, not a skipped term), a key of another type
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"a": 1.0, "q": math.inf}) is None
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"a": 1.0, 2.5: 1.0}) is None
    assert cache.avg_class_argmax(w, b, u, ub, 2, {True: 1.0}) is None
    # a weight that is not a float, a feature key of another type: declined until gone
    w["blue"]["b"] = 1
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"b": 1.0}) is None
    w["blue"]["b"] = 3.0
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"b": 1.0}) == ("blue", ("blue", 1.0))
    w["blue"][("t", 1)] = 1.0
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"b": 1.0}) is None
    del w["blue"][("t", 1)]
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"b": 1.0}) == ("blue", ("blue", 1.0))
    # an accumulator counts only where the class has the weight (as in the reference)
    u["red"]["b"] = -100.0
    assert cache.avg_class_argmax(w, b, u, ub, 2, {"b": 1.0}) == ("blue", ("blue", 1.0))
    # a key of x seen before (slot: none) that a class learns later
    x = {"c": 1.0}
    assert cache.avg_class_argmax(w, b, u, ub, 2, x) == ("red", ("red", 1.0))
    w["blue"]["c"] = 0.5
    assert cache.avg_class_argmax(w, b, u, ub, 2, x) == ("blue", ("blue", 1.0))
    # other models, other dicts: read again
    assert cache.avg_class_argmax({}, {}, {}, {}, 1, x) == (None, (None, 1.0))


@pytest.mark.skipif(not HANDLES, reason="the cache declines on Python 3.12+")
def test_a_model_too_large_for_a_copy_is_declined_for_good():
    n = (1 << 19) + 1  # two classes: past the 2**20 cells of a copy
    w = {"red": dict.fromkeys(map(str, range(n)), 1.0), "blue": {"0": 2.0}}
    b, u, ub = {"red": 0.0, "blue": 0.0}, {"red": {}, "blue": {}}, {"red": 0.0, "blue": 0.0}
    cache = _speedups.AvgCache()
    x = {"0": 1.0}
    assert cache.avg_class_argmax(w, b, u, ub, 2, x) is None
    w["blue"]["0"] = 0.5  # a change does not make it fit
    assert cache.avg_class_argmax(w, b, u, ub, 2, x) is None
    assert _speedups.avg_class_argmax(w, b, u, ub, 2, x) == ("red", ("red", 1.0))
    w["red"].clear()  # not read again while the model's dicts are the same objects
    assert cache.avg_class_argmax(w, b, u, ub, 2, x) is None
    small = {"red": {"0": 1.0}, "blue": {"0": 2.0}}  # another model: taken
    assert cache.avg_class_argmax(small, b, u, ub, 2, x) == ("blue", ("blue", 1.0))


def stream(n: int) -> list[tuple[dict, str]]:
    """A small multi-class stream over str keys (what the cache handles)."""
    out = []
    for i in range(n):
        x = {f"f{j}": ((i * 7 + j * 13) % 11 - 5) / 4 for j in range(i % 3, 5)}
        out.append((x, ("red", "blue", "green")[(i * 5) % 3 if i % 4 else i % 2]))
    return out


class Counting:
    """The kernels module, counting the module functions called."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: dict[str, int] = {}

    def __getattr__(self, name: str) -> Any:
        def counted(*args: Any) -> Any:
            self.calls[name] = self.calls.get(name, 0) + 1
            return getattr(self.real, name)(*args)

        return counted


@pytest.mark.parametrize("api", ["fused", "split", "proba"])
@pytest.mark.parametrize("bias", ["learned", "r2", "none"])
@pytest.mark.parametrize("half_life", [None, 3.0])
def test_the_averaged_learner_with_the_cache_is_the_pure_python_one(
    api, bias, half_life, monkeypatch
):
    data = stream(300)

    def run(model: MulticlassPerceptron) -> list:
        out = []
        for x, y in data:
            if api == "fused":
                out.append(model.predict_learn_one(x, y))
            elif api == "proba":
                out.append(bits(model.predict_proba_one(x)))
                model.learn_one(x, y)
            else:
                out.append(model.predict_one(x))
                model.learn_one(x, y)
        return out

    make = lambda: MulticlassPerceptron(  # noqa: E731
        bias=bias, lr=0.5, averaged=True, average_half_life=half_life
    )
    counting = Counting(_speedups)
    monkeypatch.setattr(multiclass_module, "_speedups", counting)
    fast = make()
    got = run(fast)
    monkeypatch.setattr(multiclass_module, "_speedups", None)
    pure = make()
    want = run(pure)
    assert got == want
    for name in ("_w", "_b", "_u", "_ub", "_max_norm", "_n_seen", "_n_mistakes"):
        assert bits(getattr(fast, name)) == bits(getattr(pure, name))
    if HANDLES:  # the cache answered every averaged prediction: the module's kernel never ran
        assert counting.calls.get("AvgCache") == 1
        assert "avg_class_argmax" not in counting.calls
        assert "avg_class_scores" not in counting.calls
    # never saved: pickles and deep copies leave it out, and the copies predict the same
    monkeypatch.setattr(multiclass_module, "_speedups", _speedups)
    for copied in (pickle.loads(pickle.dumps(fast)), copy.deepcopy(fast)):
        assert "_avg_cache" not in copied.__dict__
        assert [copied.predict_one(x) for x, _ in data[:50]] == [
            fast.predict_one(x) for x, _ in data[:50]
        ]
