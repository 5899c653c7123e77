"""``--kafka-client auto`` (the default): confluent-kafka where it is installed, else
kafka-python with a notice saying how to get the faster one; on the real broker, the learned
model exact with either."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from cli_helpers import CLI, binary_examples, model_of
from test_engine_kafka import _name, direct, jsonl, make_topic, produce

from stream_perceptron.cli.kafka import missing_client, resolve_client

NOTICE = "pip install 'stream-perceptron[rdkafka]' for librdkafka"


def _hide(tmp_path, *packages: str) -> dict[str, str]:
    """An environment in which importing ``packages`` fails as if they were not installed."""
    for package in packages:
        fake = tmp_path / "hidden" / package
        fake.mkdir(parents=True)
        (fake / "__init__.py").write_text(f"raise ImportError(\"No module named '{package}'\")\n")
    return {**os.environ, "PYTHONPATH": str(tmp_path / "hidden"), "PYTHONUNBUFFERED": "1"}


def _run(bootstrap: str, topic: str, ck, env, *extra: str) -> subprocess.CompletedProcess:
    argv = ["run", "--source", "kafka", "--bootstrap-servers", bootstrap, "--topic", topic,
            "--group", _name("group"), "--format", "jsonl", "--metrics-port", "-1",
            "--exit-at-end", "--checkpoint", str(ck), "-v", *extra]  # fmt: skip
    return subprocess.run([*CLI, *argv], capture_output=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("hidden", [(), ("confluent_kafka",)])
def test_auto_picks_the_fast_client_where_it_is_installed(kafka_bootstrap, tmp_path, hidden):
    examples = binary_examples(800, seed=61)
    topic = make_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, jsonl(examples))
    ck = tmp_path / "m.json"
    proc = _run(kafka_bootstrap, topic, ck, _hide(tmp_path, *hidden))
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    if hidden:  # the declared dependency, with a one-line notice of the faster one
        assert NOTICE in err and "Kafka client: confluent-kafka" not in err, err
    else:
        assert "Kafka client: confluent-kafka" in err and NOTICE not in err, err
    assert model_of(ck).get_state() == direct(examples).get_state()


def test_a_named_client_gives_no_notice(kafka_bootstrap, tmp_path):
    topic = make_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, jsonl(binary_examples(50, seed=62)))
    ck = tmp_path / "m.json"
    proc = _run(kafka_bootstrap, topic, ck, _hide(tmp_path, "confluent_kafka"),
                "--kafka-client", "kafka-python")  # fmt: skip
    assert proc.returncode == 0 and NOTICE not in proc.stderr.decode(), proc.stderr.decode()
    assert model_of(ck).get_state() == direct(binary_examples(50, seed=62)).get_state()


def test_no_client_at_all_is_a_usage_error(tmp_path):
    env = _hide(tmp_path, "confluent_kafka", "kafka")
    for argv in (
        ["run", "--source", "kafka", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t",
         "--group", "g", "--format", "jsonl"],
        ["pull-model", "--bootstrap-servers", "127.0.0.1:9", "--model-topic", "m", "--output",
         str(tmp_path / "m.json")],
    ):  # fmt: skip
        proc = subprocess.run([*CLI, *argv], capture_output=True, env=env, timeout=60, check=False)
        assert proc.returncode == 2, proc.stderr.decode()
        assert b"Kafka needs a client library" in proc.stderr, proc.stderr.decode()
        assert b"Traceback" not in proc.stderr


def test_resolve_client_in_process(monkeypatch, caplog):
    assert resolve_client("kafka-python") == "kafka-python"
    assert resolve_client("confluent-kafka") == "confluent-kafka"
    assert resolve_client("auto") == "confluent-kafka"  # installed by make test
    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails as if absent
    with caplog.at_level("WARNING"):
        assert resolve_client("auto") == "kafka-python"
    assert NOTICE in caplog.text
    assert missing_client("auto") is None
    monkeypatch.setitem(sys.modules, "kafka", None)
    assert "Kafka needs a client library" in (missing_client("auto") or "")
