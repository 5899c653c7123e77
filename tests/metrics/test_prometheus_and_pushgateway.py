"""A real Prometheus scraping a running engine, and a real Pushgateway receiving a stdin job."""

from __future__ import annotations

import json
import subprocess

import pytest
from cli_helpers import CLI
from engine_process import EngineProcess
from prometheus_client.parser import text_string_to_metric_families
from services import http_get, prometheus_server, pushgateway_server, wait_query
from test_metrics_http import _csv, _examples, _wait_examples


@pytest.mark.services
def test_prometheus_scrapes_the_engine(tmp_path):
    engine = EngineProcess("--format", "csv")
    try:
        engine.feed(_csv(_examples(4000)))
        _wait_examples(engine.url, 4000)
        with prometheus_server(tmp_path, [engine.target]) as prom:
            mistakes = wait_query(prom, 'stream_perceptron_mistakes_total{job="stream-perceptron"}')
            weights = wait_query(prom, "stream_perceptron_weight")
            rate = wait_query(prom, "stream_perceptron_examples_total > 0")
    finally:
        engine.kill()
    assert len(mistakes) == 1 and float(mistakes[0]["value"][1]) > 0
    assert float(rate[0]["value"][1]) == 4000
    assert {w["metric"]["feature"] for w in weights} == {f"f{j}" for j in range(8)}


@pytest.mark.services
def test_pushgateway_receives_the_final_metrics_of_a_stdin_job(tmp_path):
    summary = tmp_path / "s.json"
    with pushgateway_server(tmp_path) as pgw:
        proc = subprocess.run(
            [
                *CLI,
                "run",
                "--format",
                "csv",
                "--pushgateway",
                pgw,
                "--run-name",
                "nightly",
                "--summary-json",
                str(summary),
            ],
            input=_csv(_examples(1500)) + b"bad line\n",
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr.decode()
        text = http_get(f"{pgw}/metrics").decode()
    s = json.loads(summary.read_text())
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.labels.get("job") == "stream_perceptron":
                assert sample.labels["run"] == "nightly"
                found[(sample.name, sample.labels.get("reason"))] = sample.value
    assert found[("stream_perceptron_examples_total", None)] == s["learned"] == 1500
    assert found[("stream_perceptron_mistakes_total", None)] == s["mistakes"]
    assert found[("stream_perceptron_invalid_records_total", "wrong_column_count")] == 1


def test_unreachable_pushgateway_is_reported_not_fatal(tmp_path):
    proc = subprocess.run(
        [*CLI, "run", "--format", "csv", "--pushgateway", "http://127.0.0.1:9"],
        input=_csv(_examples(10)),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0
    assert b"cannot push metrics" in proc.stderr
