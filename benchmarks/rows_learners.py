"""Rows 1-3: the learners in process (dict API against River; arrays against scikit-learn)."""

from __future__ import annotations

import importlib
import platform
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks.common import Context, Measure, Result, count, frozen_gc, interleaved, median
from benchmarks.data import binary_arrays, dict_rows

__all__ = ["row_binary", "row_multiclass", "row_arrays"]

#: Shown in the name of every row here: the dict API's speed depends on the CPython version.
PYTHON = f"Python {platform.python_version()}"

MULTICLASS_GAP = 0.3  # our prequential accuracy over 100k examples: about 97 %
MULTICLASS_SEED = 7


def _on_python(results: list[Result]) -> list[Result]:
    """The rows, each name ending with the interpreter that ran them."""
    for result in results:
        result.name = f"{result.name}; {PYTHON}"
    return results


def _split(model: Any, rows: list[dict], ys: list[Any]) -> tuple[float, float]:
    """``predict_one`` then ``learn_one`` per example: (seconds, prequential accuracy)."""
    predict = model.predict_one
    learn = model.learn_one
    right = 0
    started = time.perf_counter()
    for x, y in zip(rows, ys):
        if predict(x) == y:
            right += 1
        learn(x, y)
    return time.perf_counter() - started, right / len(ys)


def _fused(model: Any, rows: list[dict], ys: list[Any]) -> tuple[float, float]:
    """``predict_learn_one`` per example: (seconds, prequential accuracy)."""
    step = model.predict_learn_one
    right = 0
    started = time.perf_counter()
    for x, y in zip(rows, ys):
        if step(x, y) == y:
            right += 1
    return time.perf_counter() - started, right / len(ys)


def _dense(model: Any, names: list, X: np.ndarray, labels: Any) -> tuple[float, float]:
    """``learn_dense`` over the whole stream in blocks of 10k rows (the engine's block size
    order): (seconds, prequential accuracy)."""
    if not model.dense_capable:
        return float("nan"), float("nan")
    right = 0
    started = time.perf_counter()
    for i in range(0, len(X), 10_000):
        block = labels[i : i + 10_000]
        preds = model.learn_dense(names, X[i : i + 10_000], block)
        right += int(np.sum(np.asarray(preds) == np.asarray(block)))
    return time.perf_counter() - started, right / len(X)


#: The dict-API runs of rows <prefix>a/<prefix>b (and, averaged, <prefix>d/<prefix>e), and
#: the dense one of <prefix>f: run key -> what it calls.
_DICT_APIS = (("split", "predict_one + learn_one"), ("fused", "predict_learn_one (fused)"))
_DENSE_API = ("dense", "learn_dense, blocks of 10k (the engine's dense path)")


def _learner_runs(
    make: Callable[..., Any], rows: list[dict], ys: list[Any], names: list, X: Any, labels: Any
) -> dict[str, Callable[[], tuple[float, float]]]:
    """The plain and averaged learner ``make(**params)`` through each API, in the rows' order."""
    return {
        "split": lambda: _split(make(), rows, ys),
        "fused": lambda: _fused(make(), rows, ys),
        "avg_split": lambda: _split(make(averaged=True), rows, ys),
        "avg_fused": lambda: _fused(make(averaged=True), rows, ys),
        "dense": lambda: _dense(make(), names, X, labels),
        "avg_dense": lambda: _dense(make(averaged=True), names, X, labels),
    }


def _averaged_results(
    prefix: str, kind: str, what: str, got: dict[str, tuple[float, float]], anchor: Measure
) -> list[Result]:
    """Rows ``<prefix>d-<prefix>f``: the averaged learner per API, against River, with its
    speed as a fraction of the plain learner's in the same run (goal, issue 25: at least 0.9
    on every Python)."""
    results = []
    for letter, (key, api) in zip("def", (*_DICT_APIS, _DENSE_API), strict=True):
        row = f"{prefix}{letter}"
        plain_rate, _ = got[key]
        rate, acc = got[f"avg_{key}"]
        if rate != rate:  # NaN: the C kernel is not built
            ours = Measure("ours", missing="skipped: the C extension is not built")
            results.append(Result(row, f"{kind} averaged, {api}; {what}", ours, anchor))
            continue
        fraction = rate / plain_rate
        results.append(
            Result(
                row,
                f"{kind} averaged, {api}; {what}",
                Measure("ours", rate, "ex/s"),
                anchor,
                rate / anchor.value if anchor.value else None,
                goal=">= 0.9x our plain learner",
                met=fraction >= 0.9,
                notes=[f"{fraction:.2f}x our plain learner ({plain_rate:,.0f} ex/s);"
                       f" accuracy {acc:.2%}"],  # fmt: skip
            )
        )
    return results


def _throughputs(
    ctx: Context, n: int, runs: dict[str, Callable[[], tuple[float, float]]]
) -> dict[str, tuple[float, float]]:
    """Per run: (median examples/s, median accuracy)."""
    with frozen_gc():
        outcomes = interleaved(ctx.repeats, runs)
    return {
        name: (n / median([s for s, _ in got]), median([a for _, a in got]))
        for name, got in outcomes.items()
    }


def row_binary(ctx: Context) -> list[Result]:
    from river.linear_model import Perceptron as RiverPerceptron

    from stream_perceptron import Perceptron

    n = ctx.sizes.binary
    X, y = binary_arrays(n)
    rows, ys = dict_rows(X), y.tolist()
    names = list(rows[0])
    signs = np.where(y, 1, -1).astype(np.int8)
    got = _throughputs(
        ctx,
        n,
        {
            **_learner_runs(Perceptron, rows, ys, names, X, signs),
            "river": lambda: _split(RiverPerceptron(), rows, ys),
        },
    )
    river_rate, river_acc = got["river"]
    anchor = Measure("river Perceptron predict_one+learn_one", river_rate, "ex/s")
    results = []
    for row, (key, api) in zip(("1a", "1b"), _DICT_APIS, strict=True):
        rate, acc = got[key]
        ratio = rate / river_rate
        results.append(
            Result(
                row,
                f"binary, dict API, prequential, {api}; {count(n)} ex x 20 dense",
                Measure("ours", rate, "ex/s"),
                anchor,
                ratio,
                goal=">= 8x",
                met=ratio >= 8,
                notes=[f"accuracy ours {acc:.2%}, river {river_acc:.2%}"],
            )
        )
    results += _averaged_results("1", "binary", f"{count(n)} ex x 20 dense", got, anchor)
    return _on_python(results)


def row_multiclass(ctx: Context) -> list[Result]:
    from river.linear_model import Perceptron as RiverPerceptron
    from river.multiclass import OneVsRestClassifier

    from stream_perceptron import MulticlassPerceptron
    from stream_perceptron.synthetic import separable_multiclass

    n = ctx.sizes.multiclass
    data = list(
        separable_multiclass(
            n, n_classes=10, n_features=20, gap=MULTICLASS_GAP, seed=MULTICLASS_SEED
        )
    )
    rows = [x for x, _ in data]
    ys = [label for _, label in data]
    del data
    names = list(rows[0])
    X = np.array([[x[k] for k in names] for x in rows])
    got = _throughputs(
        ctx,
        n,
        {
            **_learner_runs(MulticlassPerceptron, rows, ys, names, X, ys),
            "river": lambda: _split(OneVsRestClassifier(RiverPerceptron()), rows, ys),
        },
    )
    river_rate, river_acc = got["river"]
    anchor = Measure("river OneVsRest(Perceptron)", river_rate, "ex/s")
    what = f"{count(n)} ex, 10 classes x 20 features, gap {MULTICLASS_GAP}"
    results = []
    for row, (key, api) in zip(("2a", "2b"), _DICT_APIS, strict=True):
        rate, acc = got[key]
        ratio = rate / river_rate
        results.append(
            Result(
                row,
                f"multi-class, dict API, prequential, {api}; {what}",
                Measure("ours", rate, "ex/s"),
                anchor,
                ratio,
                goal=">= 30x at accuracy >= 95 %",
                met=ratio >= 30 and acc >= 0.95,
                notes=[f"accuracy ours {acc:.2%}"],
            )
        )
    acc = got["split"][1]
    results.append(
        Result(
            "2c",
            f"multi-class prequential accuracy; {what}",
            Measure("ours", 100 * acc, "%"),
            Measure("river OneVsRest(Perceptron)", 100 * river_acc, "%"),
            acc / river_acc if river_acc else None,
            goal="ours >= 95 %",
            met=acc >= 0.95,
        )
    )
    results += _averaged_results("2", "multi-class", what, got, anchor)
    return _on_python(results)


def row_arrays(ctx: Context) -> list[Result]:
    from sklearn.linear_model import Perceptron as SkPerceptron

    n, batch = ctx.sizes.array, ctx.sizes.array_batch
    X, y_bool = binary_arrays(n, dtype=np.float32)
    X = np.ascontiguousarray(X)
    y = np.where(y_bool, 1, -1).astype(np.int8)
    del y_bool
    classes = np.array([-1, 1], dtype=np.int8)

    def sklearn_run() -> float:
        model = SkPerceptron(random_state=0)
        started = time.perf_counter()
        for i in range(0, n, batch):
            model.partial_fit(X[i : i + batch], y[i : i + batch], classes=classes)
        return time.perf_counter() - started

    learn_array = _learn_array()
    runs: dict[str, Callable[[], float]] = {"sklearn": sklearn_run}
    if learn_array is not None:

        def ours_run() -> float:
            started = time.perf_counter()
            learn_array(X, y)
            return time.perf_counter() - started

        runs["ours"] = ours_run
    times = interleaved(ctx.repeats, runs)
    sk_rate = n / median(times["sklearn"])
    anchor = Measure(f"sklearn Perceptron.partial_fit, batches of {count(batch)}", sk_rate, "ex/s")
    name = f"exact sequential learning on arrays; {count(n)} x 20 float32"
    notes = ["anchor shuffles each batch (sklearn default): not sequential-exact"]
    if learn_array is None:
        return _on_python(
            [
                Result(
                    "3",
                    name,
                    Measure("ours", missing="skipped: the C extension is not built"),
                    anchor,
                    goal=">= 50M ex/s",
                    notes=notes,
                )
            ]
        )
    rate = n / median(times["ours"])
    notes.insert(0, "stream_perceptron.learners.arrays.learn_array(X, y), y int8 in {-1, +1}")
    return _on_python(
        [
            Result(
                "3",
                name,
                Measure("ours", rate, "ex/s"),
                anchor,
                rate / sk_rate,
                goal=">= 50M ex/s",
                met=rate >= 50e6,
                notes=notes,
            )
        ]
    )


def _learn_array() -> Callable[..., Any] | None:
    try:
        binary = importlib.import_module("stream_perceptron.learners.arrays")
    except ImportError:
        return None
    if not importlib.import_module("stream_perceptron.native").has_dense():
        return None
    return getattr(binary, "learn_array", None)
