"""Hostile input through Kafka (issue 29, classes 8 and 9), against the real broker, each client."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

from cli_helpers import CLI, binary_examples, run_cli
from test_engine_kafka import _name, jsonl, kafka_args, make_topic, produce


def test_max_line_bytes_holds_kafka_messages_too(kafka_bootstrap, kafka_client, tmp_path):
    topic = make_topic(kafka_bootstrap, partitions=2)
    good = jsonl(binary_examples(200, d=3, seed=8))
    long = json.dumps({"f0": 1.0, "y": 1, "pad" * 100: 2.0}).encode()  # over 300 bytes
    huge = json.dumps({"x" * 200_000: 1.0, "y": 0}).encode()
    values = good[:100] + [long, huge] + good[100:]
    produce(kafka_bootstrap, topic, values, partitions=2)
    summary = tmp_path / "summary.json"
    proc = run_cli(
        *kafka_args(kafka_bootstrap, topic, _name("group"), "--exit-at-end", "--max-line-bytes",
                    "200", "--summary-json", str(summary), "--dead-letter", str(tmp_path / "d"),
                    client=kafka_client),
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    got = json.loads(summary.read_text())
    assert got["records"] == 202 and got["learned"] == 200
    assert got["invalid"] == {"line_too_long": 2}
    dead = [json.loads(line) for line in (tmp_path / "d").read_text().splitlines()]
    assert len(dead) == 2 and all("line_too_long" in json.dumps(d) for d in dead)
    assert max(len(line) for line in (tmp_path / "d").read_text().splitlines()) < 2000


def _topics(bootstrap: str) -> set[str]:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return set(admin.list_topics())
    finally:
        admin.close()


def test_a_missing_topic_with_exit_at_end_is_an_error_and_is_not_created(
    kafka_bootstrap, kafka_client
):
    topic = _name("mistyped")
    started = time.monotonic()
    proc = run_cli(
        *kafka_args(kafka_bootstrap, topic, _name("group"), "--exit-at-end", client=kafka_client),
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr.decode()
    assert f"the topic '{topic}' does not exist".encode() in proc.stderr
    assert b"Traceback" not in proc.stderr
    assert time.monotonic() - started < 60
    assert topic not in _topics(kafka_bootstrap)


def test_a_down_broker_with_exit_at_end_ends_with_a_clear_error(kafka_client):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # kafka-python gives up bootstrapping after its bootstrap_timeout_ms (30 s by default):
    # 3 s here, through the flag users have; librdkafka's topic list waits its 20 s
    python_client = kafka_client == "kafka-python"
    short = ["--kafka-option", "bootstrap_timeout_ms=3000"] if python_client else []
    proc = run_cli(
        *kafka_args(f"127.0.0.1:{port}", "t", _name("group"), "--exit-at-end", *short,
                    client=kafka_client),
        timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr.decode()
    assert b"stream-perceptron: error:" in proc.stderr and b"Traceback" not in proc.stderr


def test_a_missing_kafka_python_is_a_usage_error(tmp_path):
    fake = tmp_path / "kafka"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError(\"No module named 'kafka'\")\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    for argv in (
        ["run", "--source", "kafka", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t",
         "--group", "g", "--format", "jsonl", "--kafka-client", "kafka-python"],
        ["pull-model", "--bootstrap-servers", "127.0.0.1:9", "--model-topic", "m", "--output",
         str(tmp_path / "m.json"), "--kafka-client", "kafka-python"],
    ):  # fmt: skip
        proc = subprocess.run([*CLI, *argv], capture_output=True, env=env, timeout=60, check=False)
        assert proc.returncode == 2, proc.stderr.decode()
        assert b"needs the kafka-python package" in proc.stderr
        assert b"Traceback" not in proc.stderr
