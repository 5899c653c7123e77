"""Shared-model mode on the real broker against what could lose or poison the group's model:
hostile records on the model topic while three workers learn, a model topic that is not one
partition compacted, a mistyped topic for pull-model, a worker whose flags differ from the
group's model."""

from __future__ import annotations

import json
import time

from cli_helpers import run_cli
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from model_topic_records import hostile_records
from shared_model_helpers import (
    PARTITIONS,
    examples,
    make_topics,
    name,
    produce,
    start_worker,
    streaming_workers,
    wait_for,
    worker_args,
)
from test_shared_model import _check_exact, _drain

from stream_perceptron import Perceptron


def test_hostile_model_topic_records_stop_nothing(kafka_bootstrap, tmp_path, kafka_client):
    """Malformed, deeply nested, foreign, non-finite, oversized-key and forged-head records
    written to the model topic while three workers learn: every worker keeps running and
    mixing, every record is learned and predicted once, the pulled model is as good as one
    sequential model, and pull-model reports what it refused."""
    data = examples(30_000, seed=13, noise=0.05)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(
        kafka_bootstrap, topic, predictions, kafka_client, mix_every=1000
    )
    produce(kafka_bootstrap, topic, data[:15_000])
    ids = ["w0", "w1", "w2"]
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    procs = [start_worker([*args, "--instance-id", i], logs[i]) for i in ids]
    try:
        wait_for(logs["w0"], "mixed", timeout=120)  # the chain has begun
        hostile = hostile_records(Perceptron(averaged=True).get_state())
        writer = KafkaProducer(bootstrap_servers=kafka_bootstrap, max_request_size=4 << 20)
        try:
            for key, value, _reason in hostile:
                writer.send(model_topic, key=key, value=value)
            writer.flush()
        finally:
            writer.close()
        produce(kafka_bootstrap, topic, data[15_000:], start=15_000)
        _drain(kafka_bootstrap, group, topic, len(data), procs)  # then SIGTERM
        assert [p.returncode for p in procs] == [0, 0, 0]  # none died on the way
        mixed_after = [logs[i].read_text().count("mixed ") for i in ids]
        assert sum(mixed_after) >= 2, mixed_after
        text = "".join(log.read_text() for log in logs.values())
        assert "refused a model-topic record" in text
        assert "Traceback" not in text
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=60)
    _check_exact(kafka_bootstrap, tmp_path, topic, predictions, model_topic, data, kafka_client)
    proc = run_cli("pull-model", "--bootstrap-servers", kafka_bootstrap, "--model-topic",
                   model_topic, "--output", str(tmp_path / "again.json"),
                   "--kafka-client", kafka_client)  # fmt: skip
    assert proc.returncode == 0 and b"refused and skipped" in proc.stderr, proc.stderr


def test_model_topics_that_could_lose_the_model_are_refused(kafka_bootstrap, tmp_path):
    """pull-model never creates a mistyped topic; run refuses a model topic with retention
    or several partitions; both exit 2 with a line naming the problem."""
    missing = name("model")
    proc = run_cli("pull-model", "--bootstrap-servers", kafka_bootstrap, "--model-topic",
                   missing, "--output", str(tmp_path / "m.json"))  # fmt: skip
    assert proc.returncode == 2 and b"there is no model topic" in proc.stderr, proc.stderr
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    bad = {name("model"): (1, "delete"), name("model"): (3, "compact")}
    try:
        assert missing not in admin.list_topics()
        admin.create_topics([NewTopic(t, n, 1, topic_configs={"cleanup.policy": policy})
                             for t, (n, policy) in bad.items()])  # fmt: skip
    finally:
        admin.close()
    (topic,) = make_topics(kafka_bootstrap, 2)
    for model_topic, (partitions, policy) in bad.items():
        args = worker_args(kafka_bootstrap, topic, name("group"), model_topic, "--exit-at-end")
        proc = run_cli(*args, timeout=120)
        words = f"cleanup.policy={policy}" if policy != "compact" else f"{partitions} partitions"
        assert proc.returncode == 2 and words.encode() in proc.stderr, proc.stderr


def test_a_worker_with_other_model_flags_exits_2_unless_told_to_adopt(kafka_bootstrap, tmp_path):
    data = examples(2_000, seed=3)
    (topic,) = make_topics(kafka_bootstrap, PARTITIONS)
    produce(kafka_bootstrap, topic, data)
    model_topic, group = name("model"), name("group")
    first = run_cli(*worker_args(kafka_bootstrap, topic, group, model_topic, "--exit-at-end"),
                    timeout=120)  # fmt: skip
    assert first.returncode == 0, first.stderr
    for flags, words in ((["--lr", "0.1", "--bias", "r2"], b"lr=1.0 (here 0.1)"),
                         (["--model", "multiclass"], b"holds a Perceptron (here a Multiclass")):
        proc = run_cli(*worker_args(kafka_bootstrap, topic, name("group"), model_topic,
                                    "--exit-at-end", *flags), timeout=120)  # fmt: skip
        assert proc.returncode == 2 and words in proc.stderr, proc.stderr
    adopted = run_cli(*worker_args(kafka_bootstrap, topic, name("group"), model_topic,
                                   "--exit-at-end", "--lr", "0.1", "--adopt-model-settings"),
                      timeout=120)  # fmt: skip
    assert adopted.returncode == 0 and b"adopting its settings" in adopted.stderr, adopted.stderr
    pulled = json.loads(run_pull(kafka_bootstrap, model_topic, tmp_path).read_text())
    assert pulled["model"]["params"]["lr"] == 1.0


def run_pull(bootstrap, model_topic, tmp_path):
    path = tmp_path / f"pulled-{time.monotonic_ns()}.json"
    proc = run_cli("pull-model", "--bootstrap-servers", bootstrap, "--model-topic", model_topic,
                   "--output", str(path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return path
