"""Metrics scraped over HTTP from a running engine, checked against the model and promtool."""

from __future__ import annotations

import json
import random
import subprocess
import time

import pytest
from engine_process import EngineProcess
from prometheus_client.parser import text_string_to_metric_families
from services import http_get, require

from stream_perceptron import Perceptron


def _examples(n, seed=0):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        x = {f"f{j}": rng.uniform(-1, 1) for j in range(8)}
        y = int(x["f0"] + 0.5 * x["f1"] - x["f2"] + rng.gauss(0, 0.3) > 0)
        out.append((x, y))
    return out


def _csv(examples, header=True):
    lines = ["f0,f1,f2,f3,f4,f5,f6,f7,y"] if header else []
    lines += [",".join([*(repr(x[f"f{j}"]) for j in range(8)), str(y)]) for x, y in examples]
    return ("\n".join(lines) + "\n").encode()


def scrape(url: str) -> dict[tuple[str, tuple], float]:
    samples = {}
    for family in text_string_to_metric_families(http_get(url).decode()):
        for s in family.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return samples


def _wait_examples(url, n, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        got = scrape(url).get(("stream_perceptron_examples_total", ()), 0)
        if got == n:
            return
        assert time.monotonic() < deadline, f"examples_total stuck at {got}, want {n}"
        time.sleep(0.1)


def test_scrape_during_and_after_a_known_stream(tmp_path):
    first, second = _examples(3000, seed=1), _examples(2000, seed=2)
    summary = tmp_path / "s.json"
    engine = EngineProcess(
        "--format", "csv", "--summary-json", str(summary), "--metrics-max-weights", "5"
    )
    try:
        engine.feed(_csv(first))
        _wait_examples(engine.url, 3000)
        engine.feed(b"1,2,3\nnot,a,number,1,1,1,1,1,1\n")  # two bad records
        engine.feed(_csv(second, header=False))
        _wait_examples(engine.url, 5000)
        samples = scrape(engine.url)

        model = Perceptron()
        mistakes = 0
        for x, y in first + second:
            mistakes += model.predict_one(x) != y
            model.learn_one(x, y)
        assert samples[("stream_perceptron_mistakes_total", ())] == mistakes
        assert samples[("stream_perceptron_predictions_total", ())] == 5000
        invalid = {
            dict(labels)["reason"]: v
            for (name, labels), v in samples.items()
            if name == "stream_perceptron_invalid_records_total"
        }
        assert invalid == {"wrong_column_count": 1, "non_numeric_value": 1}
        weights = {
            dict(labels)["feature"]: v
            for (name, labels), v in samples.items()
            if name == "stream_perceptron_weight"
        }
        largest = sorted(model.weights, key=lambda k: abs(model.weights[k]), reverse=True)[:5]
        assert weights == {k: model.weights[k] for k in largest}
        assert samples[("stream_perceptron_bias", (("class", ""),))] == model.bias
        assert samples[("stream_perceptron_weights_nonzero", ())] == 8
        assert samples[("stream_perceptron_input_norm_max", ())] == pytest.approx(model.max_norm)
        assert samples[("stream_perceptron_accuracy", ())] == pytest.approx(1 - mistakes / 5000)
        assert samples[("stream_perceptron_batch_duration_seconds_count", ())] >= 2
        assert ("stream_perceptron_build_info", (("version", "0.1.0"),)) in samples
    finally:
        code, err = engine.finish()
    assert code == 0, err.decode()
    s = json.loads(summary.read_text())
    assert s["learned"] == samples[("stream_perceptron_examples_total", ())]
    assert s["mistakes"] == samples[("stream_perceptron_mistakes_total", ())]
    assert sum(s["invalid"].values()) == sum(invalid.values())


def test_exactly_k_weight_series_with_10000_features(tmp_path):
    rng = random.Random(3)
    lines = []
    model = Perceptron()
    for i in range(400):
        x = {f"w{j}": rng.uniform(-1, 1) for j in rng.sample(range(10_000), 60)}
        x.update({f"w{j}": 1.0 for j in range(i * 25, i * 25 + 25)})  # every feature appears
        y = rng.random() > 0.5
        model.learn_one(x, y)
        lines.append(json.dumps({**x, "y": y}))
    engine = EngineProcess("--format", "jsonl", "--metrics-max-weights", "17")
    try:
        engine.feed(("\n".join(lines) + "\n").encode())
        _wait_examples(engine.url, 400)
        samples = scrape(engine.url)
        series = [k for k in samples if k[0] == "stream_perceptron_weight"]
        assert len(series) == 17
        nonzero = sum(w != 0 for w in model.weights.values())
        assert nonzero > 5000  # thousands of candidates for 17 series
        assert samples[("stream_perceptron_weights_nonzero", ())] == nonzero
        largest = sorted(model.weights.values(), key=abs, reverse=True)[:17]
        assert sorted(v for k, v in samples.items() if k[0] == "stream_perceptron_weight") == (
            sorted(largest)
        )
    finally:
        engine.kill()


def test_promtool_finds_nothing_to_complain_about(tmp_path):
    promtool = require("promtool", "prometheus")
    engine = EngineProcess(
        "--format", "csv", "--checkpoint", str(tmp_path / "m.json"), "--checkpoint-every", "100"
    )
    try:
        engine.feed(_csv(_examples(2000)) + b"oops\n")
        _wait_examples(engine.url, 2000)
        # The checkpoint after a batch is written once the batch's counts are visible (the
        # save runs after the batch's lock is released), so a scrape can fall between the two:
        # wait for the gauge rather than assume it came with the last count.
        deadline = time.monotonic() + 30
        while b"stream_perceptron_checkpoint_last_success_timestamp_seconds" not in (
            text := http_get(engine.url)
        ):
            assert time.monotonic() < deadline, "no checkpoint gauge 30 s after 2,000 examples"
            time.sleep(0.05)
    finally:
        engine.kill()
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), (
        result.stdout + result.stderr
    ).decode()
