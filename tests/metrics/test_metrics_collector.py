"""The scrape-time collector in-process, on a fresh registry."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from connectors import MemorySource
from stream_perceptron import CentroidClassifier, MulticlassPerceptron, Perceptron
from stream_perceptron.engine import Engine
from stream_perceptron.formats import make_parser
from stream_perceptron.metrics import MetricsExporter


def _run(learner, lines, window=10):
    engine = Engine(learner, make_parser("jsonl"), keep_recent=window)
    registry = CollectorRegistry()
    MetricsExporter(engine, registry=registry, max_weights=3)
    engine.run(MemorySource(lines))
    return engine, registry


def test_margin_and_mistake_bound_from_the_window():
    # Separable: y = sign(a). After learning, the window is classified correctly.
    lines = [b'{"a": 2.0, "y": 1}', b'{"a": -1.0, "y": 0}'] * 5 + [b'{"a": 0.5, "b": 3, "y": 1}']
    engine, registry = _run(Perceptron(bias="none"), lines, window=4)
    model = engine.learner
    window = engine.recent_window()
    margins = [model.geometric_margin(x, y) for x, y in window]
    radius = max(math.sqrt(sum(v * v for v in x.values())) for x, _ in window)
    assert min(margins) > 0
    assert registry.get_sample_value("stream_perceptron_margin_min") == pytest.approx(min(margins))
    assert registry.get_sample_value("stream_perceptron_mistake_bound") == pytest.approx(
        (radius / min(margins)) ** 2
    )


def test_the_margins_of_a_noisy_window_are_scraped_by_percentile_and_wrong_side():
    """A stream with contradictions: no (R/γ)², but the window's margins by percentile (numpy's
    quantiles of the same margins) and the share on the wrong side."""
    import json
    import random

    import numpy as np

    rng = random.Random(4)
    lines = []
    for _ in range(400):
        a, b = rng.gauss(0, 1), rng.gauss(0, 1)
        y = int((a + 0.5 * b > 0) != (rng.random() < 0.1))
        lines.append(json.dumps({"a": a, "b": b, "y": y}).encode())
    engine, registry = _run(Perceptron(), lines, window=100)
    model = engine.learner
    window = [(x if isinstance(x, dict) else dict(zip(x[0], x[1].tolist())), y)
              for x, y in engine.recent_window()]  # fmt: skip (a dense row: (names, values))
    margins = [model.geometric_margin(x, y) for x, y in window]
    assert min(margins) <= 0
    assert registry.get_sample_value("stream_perceptron_mistake_bound") is None
    for q in (0, 5, 25, 50, 75, 95, 100):
        got = registry.get_sample_value("stream_perceptron_recent_margin", {"percentile": str(q)})
        assert got == pytest.approx(float(np.quantile(margins, q / 100)), rel=1e-12, abs=1e-12)
    wrong = registry.get_sample_value("stream_perceptron_recent_wrong_side_ratio")
    assert wrong == sum(m <= 0 for m in margins) / len(margins) > 0


def test_no_margin_when_the_window_has_mistakes():
    lines = [b'{"a": 1.0, "y": 1}', b'{"a": 1.0, "y": 0}'] * 5  # contradictory
    _, registry = _run(Perceptron(), lines)
    assert registry.get_sample_value("stream_perceptron_margin_min") is None
    assert registry.get_sample_value("stream_perceptron_examples_total") == 10


def test_multiclass_series_carry_the_class_label():
    lines = [b'{"a": 1, "y": "red"}', b'{"b": 1, "y": "blue"}', b'{"c": 5, "y": "green"}']
    engine, registry = _run(MulticlassPerceptron(), lines)
    assert registry.get_sample_value("stream_perceptron_classes") == 3
    for c, b in engine.learner.bias.items():
        assert registry.get_sample_value("stream_perceptron_bias", {"class": c}) == b
    w = engine.learner.weights  # green and blue hold c = +5 and -5: the two largest
    for c in ("green", "blue"):
        got = registry.get_sample_value("stream_perceptron_weight", {"class": c, "feature": "c"})
        assert got == w[c]["c"] and abs(got) == 5
    text = generate_latest(registry).decode()
    assert text.count("stream_perceptron_weight{") == 3


def test_metrics_use_only_the_injected_registry():
    from prometheus_client import REGISTRY

    _run(Perceptron(), [b'{"a": 1, "y": 1}'])
    assert REGISTRY.get_sample_value("stream_perceptron_examples_total") is None


def test_margin_metrics_are_the_same_on_the_dense_path():
    lines = [b"a,b,y"] + [b"2.0,0.5,1", b"-1.0,0.25,0"] * 300
    registries = []
    for dense in (True, False):
        engine = Engine(Perceptron(), make_parser("csv"), keep_recent=20, dense=dense)
        registry = CollectorRegistry()
        MetricsExporter(engine, registry=registry)
        engine.run(MemorySource(lines, batch_size=128))
        assert (engine._blocks is not None) == dense
        registries.append(registry)
    for name in ("stream_perceptron_margin_min", "stream_perceptron_mistake_bound"):
        values = [r.get_sample_value(name) for r in registries]
        assert values[0] is not None and values[0] == values[1]


@pytest.mark.parametrize("make", [Perceptron, MulticlassPerceptron, CentroidClassifier])
def test_geometric_margins_equal_one_at_a_time(make):
    import random

    rng = random.Random(4)
    model = make()
    data = []
    for _ in range(300):
        x = {f"f{j}": rng.gauss(0, 1) for j in range(4)}
        region = int(x["f0"] > 0) + int(x["f1"] > 1)
        y = int(x["f0"] > 0) if make is Perceptron else ("a", "b", "c")[region]
        data.append((x, y))
        model.learn_one(x, y)
    got = model.geometric_margins(data[-50:])
    assert got == [model.geometric_margin(x, y) for x, y in data[-50:]]
    assert len(set(got)) > 40


def test_hashed_weights_carry_their_recent_names_and_scaled_margins():
    """--hash-bits: the weight series are named by the feature last learned into the bucket;
    --scale: margin and bound are those of the standardised examples the model learns from."""
    from stream_perceptron import Preprocessed

    lines = [b'{"apple": 2.0, "pear": 1.0, "y": 1}', b'{"apple": -1.0, "fig": 1.0, "y": 0}'] * 20
    learner = Preprocessed(Perceptron(bias="none"), scale="standard", hash_bits=12)
    engine, registry = _run(learner, lines, window=4)
    names = {
        s.labels["feature"]
        for m in registry.collect()
        if m.name == "stream_perceptron_weight"
        for s in m.samples
    }
    assert names and names <= {"apple", "pear", "fig"}
    window = [(learner.transform_one(x), y) for x, y in engine.recent_window()]
    margins = learner.model.geometric_margins(window)
    radius = max(math.sqrt(sum(v * v for v in x.values())) for x, _ in window)
    if min(margins) > 0:
        assert registry.get_sample_value("stream_perceptron_mistake_bound") == pytest.approx(
            (radius / min(margins)) ** 2
        )
    else:
        assert registry.get_sample_value("stream_perceptron_mistake_bound") is None
