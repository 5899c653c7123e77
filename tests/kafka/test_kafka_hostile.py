"""Hostile input through Kafka (issue 29, classes 8 and 9), against the real broker, each client."""

from __future__ import annotations

import json

from cli_helpers import binary_examples, run_cli
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
