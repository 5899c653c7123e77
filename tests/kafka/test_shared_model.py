"""Shared-model mode on the real broker: several worker processes learn one model."""

from __future__ import annotations

import json

import pytest
from cli_helpers import run_cli
from shared_model_helpers import (
    PARTITIONS,
    accuracy,
    examples,
    make_topics,
    name,
    produce,
    pull,
    read_committed,
    start_worker,
    worker_args,
)

from stream_perceptron import Perceptron


def _sequential(data, **params) -> Perceptron:
    model = Perceptron(**params)
    for x, y in data:
        model.learn_one(x, y)
    return model


def _run_workers(args: list[str], ids: list[str], logs, timeout: float = 180) -> None:
    procs = [start_worker([*args, "--instance-id", i], logs / f"{i}.log") for i in ids]
    try:
        codes = [p.wait(timeout=timeout) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0] * len(ids), [(logs / f"{i}.log").read_text()[-3000:] for i in ids]


@pytest.mark.parametrize(("noise", "averaged"), [(0.1, True), (0.0, False)])
def test_three_workers_learn_one_model(kafka_bootstrap, tmp_path, noise, averaged):
    n = 18_000
    data = examples(n, seed=3, noise=noise, margin=0.0 if noise else 0.2)
    held_out = examples(4000, seed=4, noise=0.0)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    produce(kafka_bootstrap, topic, data)
    model_topic = name("model")
    flags = ["--averaged"] if averaged else []
    args = worker_args(
        kafka_bootstrap, topic, name("group"), model_topic, "--exit-at-end",
        "--mix-every", "1000", "--checkpoint-interval", "0.5",
        "--predictions-topic", predictions, *flags,
    )  # fmt: skip
    _run_workers(args, ["w0", "w1", "w2"], tmp_path)
    pulled = pull(kafka_bootstrap, model_topic, tmp_path / "pulled.json")
    assert pulled.n_seen == n  # every record learned exactly once, cluster-wide
    sequential = _sequential(data, averaged=averaged)
    gap = accuracy(sequential, held_out) - accuracy(pulled, held_out)
    assert gap < 0.01, (accuracy(pulled, held_out), accuracy(sequential, held_out))
    # exactly one prediction per input record, each carrying the model version
    out = read_committed(kafka_bootstrap, predictions, 3)
    seen = sorted(
        (p["topic"], p["partition"], p["offset"]) for p in (json.loads(m.value) for m in out)
    )
    assert seen == sorted((topic, i % PARTITIONS, i // PARTITIONS) for i in range(n))
    assert all(dict(m.headers).get("model_version") is not None for m in out)
    if not noise:
        # separable with a margin: a second pass over the same records adds (almost) no
        # mistakes (the perceptron's convergence, kept by mixing)
        first = pulled.n_mistakes
        produce(kafka_bootstrap, topic, data, start=n)
        _run_workers(args, ["w0", "w1", "w2"], tmp_path)
        again = pull(kafka_bootstrap, model_topic, tmp_path / "again.json")
        assert again.n_seen == 2 * n
        assert again.n_mistakes - first <= first // 20, (first, again.n_mistakes)


def test_pulled_model_is_a_checkpoint(kafka_bootstrap, tmp_path):
    data = examples(3000, seed=5, noise=0.05)
    (topic,) = make_topics(kafka_bootstrap, PARTITIONS)
    produce(kafka_bootstrap, topic, data)
    model_topic = name("model")
    args = worker_args(kafka_bootstrap, topic, name("group"), model_topic, "--exit-at-end")
    _run_workers(args, ["a", "b"], tmp_path)
    path = tmp_path / "model.json"
    pulled = pull(kafka_bootstrap, model_topic, path)
    assert pulled.n_seen == 3000
    shown = run_cli("inspect", str(path))
    assert shown.returncode == 0 and b"examples     3000" in shown.stdout, shown.stderr
    more = b"".join(json.dumps({**x, "y": y}).encode() + b"\n" for x, y in data[:100])
    resumed = run_cli(
        "run", "--format", "jsonl", "--checkpoint", str(path), "--resume",
        "--summary-json", str(tmp_path / "s.json"), stdin=more,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr.decode()
    saved = json.loads(path.read_text())["model"]
    assert saved["n_seen"] == 3100


def test_a_record_that_does_not_parse_is_ignored(kafka_bootstrap, tmp_path):
    from kafka import KafkaProducer

    data = examples(1200, seed=6)
    (topic,) = make_topics(kafka_bootstrap, PARTITIONS)
    produce(kafka_bootstrap, topic, data)
    model_topic = name("model")
    args = worker_args(kafka_bootstrap, topic, name("group"), model_topic, "--exit-at-end")
    _run_workers(args, ["a"], tmp_path)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    producer.send(model_topic, b"not json", key=b"mixture")
    producer.send(model_topic, b'{"kind": "stream-perceptron-shared-model", "schema_version": 9}',
                  key=b"worker:future")  # fmt: skip
    producer.flush()
    producer.close()
    produce(kafka_bootstrap, topic, data[:600], start=1200)
    _run_workers(args, ["a"], tmp_path)
    assert (tmp_path / "a.log").read_text().count("ignoring a model-topic record") >= 2
    proc = run_cli("pull-model", "--bootstrap-servers", kafka_bootstrap, "--model-topic",
                   model_topic, "--output", str(tmp_path / "m.json"))  # fmt: skip
    assert proc.returncode == 0 and b"2 model-topic records did not parse" in proc.stderr
    assert json.loads((tmp_path / "m.json").read_text())["model"]["n_seen"] == 1800


def test_usage_errors(tmp_path):
    base = ["run", "--format", "jsonl", "--model-topic", "m"]
    assert b"needs --source kafka" in run_cli(*base).stderr
    kafka = [*base, "--source", "kafka", "--bootstrap-servers", "127.0.0.1:9", "--topic", "t",
             "--group", "g"]  # fmt: skip
    assert b"binary or multiclass" in run_cli(*kafka, "--model", "centroid").stderr
    assert b"is not for --model-topic" in run_cli(*kafka, "--predictions", "p.jsonl").stderr
    assert b"need --model-topic" in run_cli("run", "--format", "jsonl", "--mix-every", "5").stderr



