"""``--model-topic-key-file`` on the real broker: three workers sign what they write; a
well-formed, plausible increment written by a client without the group's key (unsigned, and
signed with another key) while they learn is refused and counted, and the pulled model is
exact: every record learned and predicted once, within a point of one sequential model."""

from __future__ import annotations

import json
import time

from cli_helpers import run_cli
from kafka import KafkaProducer
from shared_model_helpers import (
    PARTITIONS,
    STEADY_SESSION_MS,
    make_topics,
    produce,
    sparse_examples,
    start_worker,
    streaming_workers,
    wait_for,
)
from test_shared_model import _check_exact, _drain
from test_shared_model_guards import _mixture_versions

from stream_perceptron import Perceptron
from stream_perceptron.sharing import Increment
from stream_perceptron.sharing.signing import RecordSigner


def _stranger_increments(data: list) -> list[tuple[bytes, bytes, list]]:
    """An increment of the group's learner and hyperparameters, small and finite (the checks
    of its content pass), written unsigned and signed with a key that is not the group's."""
    seen = Perceptron(averaged=True)
    for x, y in data[:200]:
        seen.learn_one(x, y)
    learned = ("weights", "bias", "avg_weights_acc", "avg_bias_acc", "classes")
    meta = {k: v for k, v in seen.get_state().items() if k not in learned}
    out = []
    for seq, sign in ((1, None), (2, RecordSigner(b"not the group's key, 32 bytes long"))):
        delta = {"n": 3, "classes": [{"label": None, "weights": [["f0", 2.0], ["f1", -2.0]],
                                      "bias": 1.0, "acc": [], "bias_acc": 0.0}]}  # fmt: skip
        increment = Increment("intruder", seq, 0, delta, meta)
        key, value = increment.key.encode(), increment.encode()
        out.append((key, value, sign.headers(key, value) if sign else []))
    return out


def test_records_without_the_group_key_are_refused(kafka_bootstrap, tmp_path, kafka_client):
    key_file = tmp_path / "group.key"
    key_file.write_bytes(b"0123456789abcdef0123456789abcdef-group\n")
    key_file.chmod(0o600)
    data = sparse_examples(24_000, seed=23, noise=0.05)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(  # no member stops: a steady session
        kafka_bootstrap, topic, predictions, kafka_client, mix_every=1000,
        session_ms=STEADY_SESSION_MS,
    )
    args = [*args, "--model-topic-key-file", str(key_file)]
    produce(kafka_bootstrap, topic, data[:12_000])
    ids = ["w0", "w1", "w2"]
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    procs = [start_worker([*args, "--instance-id", i], logs[i]) for i in ids]
    try:
        wait_for(logs["w0"], " committed ", timeout=120)
        deadline = time.monotonic() + 120
        while not any(v >= 1 for v in _mixture_versions(kafka_bootstrap, model_topic)):
            assert time.monotonic() < deadline, "no mixture committed"
            time.sleep(0.5)
        writer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
        try:
            for key, value, headers in _stranger_increments(data):
                writer.send(model_topic, key=key, value=value, headers=headers)
            writer.flush()
        finally:
            writer.close()
        produce(kafka_bootstrap, topic, data[12_000:], start=12_000)
        _drain(kafka_bootstrap, group, topic, len(data), procs)
        assert [p.returncode for p in procs] == [0, 0, 0]
        text = "".join(log.read_text() for log in logs.values())
        assert "reason unsigned" in text and "reason bad_signature" in text, text[-3000:]
        assert "Traceback" not in text
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    _check_exact(kafka_bootstrap, tmp_path, topic, predictions, model_topic, data, kafka_client)

    def pull(*flags: str) -> tuple[dict, bytes]:
        path = tmp_path / f"pulled-{len(flags)}.json"
        proc = run_cli("pull-model", "--bootstrap-servers", kafka_bootstrap, "--model-topic",
                       model_topic, "--output", str(path), "--kafka-client", kafka_client,
                       *flags)  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        return json.loads(path.read_text())["model"], proc.stderr

    signed, said = pull("--model-topic-key-file", str(key_file))
    assert b"1 bad_signature" in said and b"1 unsigned" in said, said
    assert signed["n_seen"] == len(data)
    # without the key nothing is checked, and still the same model: the leader deleted the
    # stranger's increments (signed tombstones) before any mixture held them
    unchecked, _ = pull()
    assert unchecked == signed
