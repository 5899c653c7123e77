"""End to end without Docker: the real broker, the engine consuming a topic through its CLI, a
second engine joining labels that come later on stdin, and a real Prometheus run with
deploy/prometheus/prometheus.yml and its rules. Every PromQL expression of the Grafana dashboard
and of the rules must return data (a renamed metric or a typo fails here)."""

from __future__ import annotations

import io
import json
import random
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml
from engine_process import EngineProcess
from services import prometheus_server, query, wait_query

from stream_perceptron.example_data import write_dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "kafka"))
from promql import DEPLOY, iter_promql_expressions  # noqa: E402
from test_engine_kafka import _examples_total, _name, _wait, make_topic, produce  # noqa: E402

pytestmark = pytest.mark.services

_TRAILING_COMPARISON = re.compile(r"\s*(==|!=|>=|<=|>|<)\s*[0-9.]+\s*$")


def _separable(n: int, seed: int) -> list[bytes]:
    rng = random.Random(seed)
    w = [1.0, -2.0, 0.5, 1.5, -1.0]
    lines = []
    while len(lines) < n:
        x = [rng.uniform(-1, 1) for _ in w]
        s = sum(a * b for a, b in zip(w, x))
        if abs(s) > 0.4:  # a margin: the perceptron converges and the window is all correct
            features = {f"f{j}": v for j, v in enumerate(x)}
            lines.append(json.dumps({"x": features, "y": int(s > 0)}).encode())
    return lines


def _deploy_config(*targets: str) -> str:
    config = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())
    config["global"]["scrape_interval"] = "1s"
    config["global"]["evaluation_interval"] = "1s"
    config["rule_files"] = [str(DEPLOY / "prometheus" / "rules.yml")]
    jobs = [job for job in config["scrape_configs"] if job["job_name"] == "stream-perceptron"]
    assert jobs, "deploy/prometheus/prometheus.yml has no stream-perceptron job"
    for job in jobs:
        job["static_configs"] = [{"targets": list(targets)}]
    return yaml.safe_dump(config)


def test_every_dashboard_and_rule_expression_returns_data(kafka_bootstrap, tmp_path):
    topic = make_topic(kafka_bootstrap, 2)
    produce(kafka_bootstrap, topic, _separable(20_000, seed=41) + [b"{bad", b"[]"], 2)
    engine = EngineProcess(
        "--source",
        "kafka",
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topic",
        topic,
        "--group",
        _name("group"),
        "--format",
        "jsonl",
        # shared-model mode, as deploy/ runs it: its panels need data too
        "--model-topic",
        _name("model"),
        "--mix-every",
        "1000",
        "--checkpoint-interval",
        "1",
        "--rolling-window",
        "200",
        "--drift-detector",  # the drift alert and annotation need its counter
        "adwin",
    )
    # --join-key reads stdin or files only: a second engine joins the delayed Phishing stream
    # (events, their outcomes 0-100 events later, some past --label-wait 150), its stdin left
    # open, for the panels and alerts of labels that come later
    delayed = io.StringIO()
    write_dataset("phishing", "csv", delayed, "y", delayed=True)
    joining = EngineProcess("--format", "csv", "--join-key", "id", "--label-wait", "150")
    joining.feed(delayed.getvalue().encode())
    empty = []
    try:
        _wait(lambda: _examples_total(engine) == 20_000, what="20000 examples")
        config = _deploy_config(engine.target, joining.target)
        with prometheus_server(tmp_path, [], config_text=config) as prom:
            expressions = list(iter_promql_expressions())
            assert len(expressions) >= 20
            deadline = time.monotonic() + 90
            pending = expressions
            while pending and time.monotonic() < deadline:
                time.sleep(1)
                still = []
                for e in pending:
                    # an alert's or an annotation's condition: its series must have data
                    condition = ": alert " in e.where or e.where.startswith("annotation")
                    expr = _TRAILING_COMPARISON.sub("", e.expr) if condition else e.expr
                    if not query(prom, expr):
                        still.append(e)
                pending = still
            empty = [f"{e.source}: {e.where}: {e.expr}" for e in pending]
            recorded = wait_query(prom, "instance:stream_perceptron_mistakes:ratio_rate1m")
    finally:
        engine.proc.send_signal(signal.SIGTERM)
        engine.finish()
        joining.kill()
    assert not empty, "expressions that returned no data:\n" + "\n".join(empty)
    assert recorded, "the recording rules did not run"
