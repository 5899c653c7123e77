"""`stream-perceptron run --source kafka` against the real Apache Kafka broker."""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter

import pytest
from cli_helpers import CLI, binary_examples, model_of, run_cli, sea_examples
from engine_process import EngineProcess
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin import NewTopic
from kafka_writes import Message, write
from services import http_get

from stream_perceptron import Perceptron


def _name(kind: str) -> str:
    return f"test-{kind}-{uuid.uuid4().hex[:10]}"


def make_topic(bootstrap: str, partitions: int = 1, config: dict[str, str] | None = None) -> str:
    topic = _name("topic")
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1,
                                      topic_configs=config or {})])  # fmt: skip
    finally:
        admin.close()
    return topic


def read_topic(bootstrap: str, topic: str, n: int) -> list:
    """The first ``n`` messages of ``topic`` (fewer if 10 s pass without one)."""
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        consumer_timeout_ms=10_000,
        group_id=_name("reader"),
    )
    try:
        out = []
        for message in consumer:
            out.append(message)
            if len(out) == n:
                break
        return out
    finally:
        consumer.close()


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    write(bootstrap, topic, (Message(value, key=f"k{i}".encode(), partition=i % partitions)
                             for i, value in enumerate(values)))  # fmt: skip


def jsonl(examples) -> list[bytes]:
    return [json.dumps({**x, "y": y}).encode() for x, y in examples]


def kafka_args(
    bootstrap: str,
    topic: str,
    group: str,
    *extra: str,
    client: str = "kafka-python",
    session_ms: int = 6000,
) -> list[str]:
    """``run --source kafka`` arguments with ``client``; consumer settings in its naming."""
    if client == "kafka-python":
        session, heartbeat = "session_timeout_ms", "heartbeat_interval_ms"
    else:
        session, heartbeat = "session.timeout.ms", "heartbeat.interval.ms"
    return [
        "run",
        "--source",
        "kafka",
        "--bootstrap-servers",
        bootstrap,
        "--topic",
        topic,
        "--group",
        group,
        "--format",
        "jsonl",
        "--metrics-port",
        "-1",
        # A killed engine leaves the group after the session timeout: keep it short in tests.
        "--kafka-client",
        client,
        "--kafka-option",
        f"{session}={session_ms}",
        "--kafka-option",
        f"{heartbeat}=1000",
        *extra,
    ]


def direct(examples):
    model = Perceptron()
    for x, y in examples:
        model.learn_one(x, y)
    return model


def test_consumes_a_topic_and_learns_exactly_what_was_produced(
    kafka_bootstrap, tmp_path, kafka_client
):
    examples = binary_examples(3000, seed=21)
    topic = make_topic(kafka_bootstrap)
    lines = jsonl(examples)
    # 1000 messages of one record, then 20 messages of 100 newline-separated records.
    batched = [b"\n".join(lines[i : i + 100]) for i in range(1000, 3000, 100)]
    produce(kafka_bootstrap, topic, lines[:1000] + batched)
    ck, summary = tmp_path / "m.json", tmp_path / "s.json"
    proc = run_cli(
        *kafka_args(
            kafka_bootstrap,
            topic,
            _name("group"),
            "--exit-at-end",
            "--checkpoint",
            str(ck),
            "--summary-json",
            str(summary),
            client=kafka_client,
        )
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert model_of(ck).get_state() == direct(examples).get_state()
    s = json.loads(summary.read_text())
    assert s["learned"] == 3000 and s["invalid"] == {}
    positions = json.loads(ck.read_text())["positions"]
    assert positions == [{"source": topic, "partition": 0, "next_offset": 1020}]
    # The group's committed offset is the checkpoint's.
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=_group_of(proc))
    try:
        assert consumer.committed(TopicPartition(topic, 0)) == 1020
    finally:
        consumer.close()


def _group_of(proc: subprocess.CompletedProcess) -> str:
    args = proc.args
    return args[args.index("--group") + 1]


def test_kcat_as_an_independent_producer(kafka_bootstrap, tmp_path):
    kcat = shutil.which("kcat")
    assert kcat, "kcat not found: install the Debian package kcat"
    examples = binary_examples(500, seed=22)
    topic = make_topic(kafka_bootstrap)
    data = tmp_path / "data.jsonl"
    data.write_bytes(b"\n".join(jsonl(examples)) + b"\n")
    subprocess.run(
        [kcat, "-P", "-b", kafka_bootstrap, "-t", topic, "-l", str(data)], check=True, timeout=60
    )
    ck = tmp_path / "m.json"
    proc = run_cli(
        *kafka_args(
            kafka_bootstrap, topic, _name("group"), "--exit-at-end", "--checkpoint", str(ck)
        )
    )
    assert proc.returncode == 0, proc.stderr.decode()
    assert model_of(ck).get_state() == direct(examples).get_state()


def _wait_group_empty(bootstrap: str, group: str, timeout: float = 60) -> None:
    """Wait until the broker's coordinator lists no member of ``group``."""
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        deadline = time.monotonic() + timeout
        while (info := admin.describe_groups([group])[group])["members"]:
            assert time.monotonic() < deadline, f"{group} still has members: {info}"
            time.sleep(0.2)
    finally:
        admin.close()


def _checkpointed(ck) -> int:
    """The records a Kafka run's checkpoint holds: its next offsets summed (0 before one)."""
    try:
        positions = json.loads(ck.read_bytes())["positions"]
    except (OSError, ValueError, KeyError):  # not written yet (the rename is atomic)
        return 0
    return sum(int(p["next_offset"]) for p in positions)


def _kill_and_resume(args: list[str], ck, rounds: int, seed: int) -> None:
    """Each round kills the run once its checkpoint shows 3,000-12,000 more records than when
    it started. It used to sleep 0.2-1.5 s after the first checkpoint: a fresh clone's
    confluent-kafka run learned all 60k records within that and no kill landed. A run that
    ends before its kill fails the test with its exit code and its log's tail (one did, in
    a soak beside two CPU hogs, when its log was not kept)."""
    rng = random.Random(seed)
    for round_ in range(rounds):
        target = _checkpointed(ck) + rng.randint(3_000, 12_000)
        log = ck.parent / f"killed-run-{round_}.log"
        with log.open("wb") as err:
            victim = subprocess.Popen([*CLI, *args], stderr=err)
        deadline = time.monotonic() + 120
        while _checkpointed(ck) < target and time.monotonic() < deadline:
            if victim.poll() is not None:
                break
            time.sleep(0.005)
        if victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=60)
        assert victim.returncode == -signal.SIGKILL, (
            f"round {round_}: the run ended by itself (exit {victim.returncode}) with "
            f"{_checkpointed(ck)} records checkpointed, its kill due at {target}:\n"
            + log.read_text(errors="replace")[-3000:]
        )
    # A killed member stays in the group until its session times out (6 s here) and keeps its
    # partitions in the meantime; --exit-at-end would then end the next run with only its own
    # share done. Let the dead members expire first, as an operator restarting a job would
    # (a fixed 8 s sleep before: now the wait ends when the broker says the group is empty).
    _wait_group_empty(args[args.index("--bootstrap-servers") + 1], args[args.index("--group") + 1])
    finish = subprocess.run([*CLI, *args], capture_output=True, timeout=180, check=False)
    assert finish.returncode == 0, finish.stderr.decode()


def _learned_positions(predictions) -> Counter:
    seen: Counter = Counter()
    for line in predictions.read_text().splitlines():
        entry = json.loads(line)
        seen[
            (entry["partition"], entry["offset"], entry["label"], json.dumps(entry["position"]))
        ] += 1
    return seen


# confluent-kafka on 3 partitions only: the suite's time stays modest.
@pytest.mark.parametrize(
    ("partitions", "kafka_client"),
    [(1, "kafka-python"), (3, "kafka-python"), (3, "confluent-kafka")],
)
def test_kill_9_at_random_points_loses_nothing_and_learns_nothing_twice(
    kafka_bootstrap, tmp_path, partitions, kafka_client
):
    examples = binary_examples(60_000, d=8, seed=23)
    topic = make_topic(kafka_bootstrap, partitions)
    produce(kafka_bootstrap, topic, jsonl(examples), partitions)

    whole = tmp_path / "whole.json"
    proc = run_cli(
        *kafka_args(
            kafka_bootstrap,
            topic,
            _name("group"),
            "--exit-at-end",
            "--checkpoint",
            str(whole),
            client=kafka_client,
        ),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr.decode()

    ck, preds = tmp_path / "ck.json", tmp_path / "preds.jsonl"
    args = kafka_args(
        kafka_bootstrap,
        topic,
        _name("group"),
        "--exit-at-end",
        "--resume",
        "--checkpoint",
        str(ck),
        "--checkpoint-every",
        "3000",
        "--predictions",
        str(preds),
        client=kafka_client,
    )
    _kill_and_resume(args, ck, rounds=3, seed=partitions)  # each run killed, or it fails

    resumed = json.loads(ck.read_text())
    assert resumed["stats"]["learned"] == 60_000
    learned = _learned_positions(preds)
    assert sum(learned.values()) == 60_000 and set(learned.values()) == {1}
    per_partition = Counter(p for p, *_ in learned)
    assert per_partition == {p: 60_000 // partitions for p in range(partitions)}
    if partitions == 1:  # a fixed order: bit-identical to the uninterrupted run
        assert model_of(ck).get_state() == model_of(whole).get_state()


def test_the_reference_drift_detector_on_a_topic_sees_the_switches_and_survives_kill_9(
    kafka_bootstrap, tmp_path, kafka_client
):
    # SEA's 4 concepts (25k each, 3 abrupt switches) on one partition: the frozen copy's drifts
    # are those of the same lines on stdin, and a run killed and resumed ends with the
    # uninterrupted one's model, counters, drifts and copy. With --on-drift reset the engine
    # learns record by record (about 1 s for the topic): the kill comes while it runs.
    examples = sea_examples([0, 1, 2, 3], 25_000)
    lines = jsonl(examples)
    flags = ["--model", "pa", "--C", "0.003", "--scale", "standard", "--drift-detector",
             "reference", "--on-drift", "reset", "--checkpoint-every", "3000"]  # fmt: skip
    data, local = tmp_path / "data.jsonl", tmp_path / "local.json"
    data.write_bytes(b"\n".join(lines) + b"\n")
    proc = run_cli("run", "--input", str(data), "--format", "jsonl", *flags,
                   "--checkpoint", str(local))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    expected = json.loads(local.read_text())["stats"]
    delays = [p - s for p, s in zip(expected["drift"]["positions"], [25_000, 50_000, 75_000])]
    assert len(delays) == 3 and all(0 < d <= 1_000 for d in delays), delays

    topic = make_topic(kafka_bootstrap)
    produce(kafka_bootstrap, topic, lines)
    whole = tmp_path / "whole.json"
    proc = run_cli(
        *kafka_args(kafka_bootstrap, topic, _name("group"), "--exit-at-end", *flags,
                    "--checkpoint", str(whole), client=kafka_client),
        timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    assert json.loads(whole.read_text())["stats"]["drift"] == expected["drift"]
    assert model_of(whole).get_state() == model_of(local).get_state()

    ck = tmp_path / "ck.json"
    args = kafka_args(kafka_bootstrap, topic, _name("group"), "--exit-at-end", "--resume",
                      *flags, "--checkpoint", str(ck), client=kafka_client)  # fmt: skip
    _kill_and_resume(args, ck, rounds=2, seed=28)
    resumed = json.loads(ck.read_text())["stats"]
    uninterrupted = json.loads(whole.read_text())["stats"]
    assert resumed["drift"] == uninterrupted["drift"]
    assert resumed["drift_reference"] == uninterrupted["drift_reference"]
    assert model_of(ck).get_state() == model_of(whole).get_state()


def _scrape(url: str) -> str:
    return http_get(url).decode()


def _assigned_partitions(engine: EngineProcess) -> int:
    return _scrape(engine.url).count("stream_perceptron_kafka_consumer_lag{")


def _examples_total(engine: EngineProcess) -> float:
    for line in _scrape(engine.url).splitlines():
        if line.startswith("stream_perceptron_examples_total "):
            return float(line.split()[1])
    return 0.0


def _wait(condition, timeout=90.0, what="condition"):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_two_engines_in_one_group_share_the_partitions(kafka_bootstrap, tmp_path, kafka_client):
    topic, group = make_topic(kafka_bootstrap, 4), _name("group")
    engines = []
    for name in ("a", "b"):
        args = kafka_args(
            kafka_bootstrap,
            topic,
            group,
            "--checkpoint",
            str(tmp_path / f"{name}.json"),
            "--predictions",
            str(tmp_path / f"{name}.jsonl"),
            client=kafka_client,
        )
        args.remove("--metrics-port")
        args.remove("-1")
        engines.append(EngineProcess(*args[1:]))
    try:
        _wait(lambda: [_assigned_partitions(e) for e in engines] == [2, 2], what="2 + 2 partitions")
        examples = binary_examples(8000, seed=24)
        produce(kafka_bootstrap, topic, jsonl(examples), 4)
        _wait(lambda: sum(_examples_total(e) for e in engines) == 8000, what="8000 examples")
        shares = [_examples_total(e) for e in engines]
    finally:
        for e in engines:
            e.proc.send_signal(signal.SIGTERM)
        codes = [e.finish()[0] for e in engines]
    assert codes == [0, 0]
    assert all(share > 0 for share in shares)
    learned = _learned_positions(tmp_path / "a.jsonl") + _learned_positions(tmp_path / "b.jsonl")
    assert sum(learned.values()) == 8000 and set(learned.values()) == {1}


def test_predictions_and_dead_letters_go_to_their_topics(kafka_bootstrap, tmp_path, kafka_client):
    topic = make_topic(kafka_bootstrap)
    preds_topic, dead_topic = make_topic(kafka_bootstrap), make_topic(kafka_bootstrap)
    good = jsonl(binary_examples(50, seed=25))
    values = good[:25] + [b"{broken", b'{"f0": "NaN-ish", "y": [1]}'] + good[25:]
    produce(kafka_bootstrap, topic, values)
    proc = run_cli(
        *kafka_args(
            kafka_bootstrap,
            topic,
            _name("group"),
            "--exit-at-end",
            "--predictions-topic",
            preds_topic,
            "--dead-letter-topic",
            dead_topic,
            client=kafka_client,
        )
    )
    assert proc.returncode == 0, proc.stderr.decode()

    predictions = read_topic(kafka_bootstrap, preds_topic, 50)
    assert len(predictions) == 50
    first = json.loads(predictions[0].value)
    assert predictions[0].key == b"k0"
    assert (first["topic"], first["partition"], first["offset"]) == (topic, 0, 0)
    assert {"prediction", "label", "mistake"} <= set(first)
    dead = read_topic(kafka_bootstrap, dead_topic, 2)
    assert [m.value for m in dead] == values[25:27]
    assert [m.key for m in dead] == [b"k25", b"k26"]
    headers = [dict(m.headers) for m in dead]
    assert headers[0]["reason"] == b"invalid_json" and headers[1]["reason"] == b"non_numeric_value"
    assert headers[0]["source"] == topic.encode() and headers[0]["offset"] == b"25"
    assert headers[0]["partition"] == b"0"


def test_usage_errors_for_kafka_options():
    proc = run_cli("run", "--source", "kafka", "--format", "jsonl")
    assert proc.returncode == 2 and b"--bootstrap-servers, --topic, --group" in proc.stderr
    proc = run_cli("run", "--format", "jsonl", "--predictions-topic", "x", stdin=b"")
    assert proc.returncode == 2 and b"needs --source kafka" in proc.stderr
    proc = run_cli("run", "--format", "jsonl", "--kafka-client", "confluent-kafka", stdin=b"")
    assert proc.returncode == 2 and b"--kafka-client needs --source kafka" in proc.stderr


def test_confluent_kafka_asked_for_but_not_installed_is_a_usage_error(monkeypatch, capsys):
    from stream_perceptron.cli import main

    monkeypatch.setitem(sys.modules, "confluent_kafka", None)  # import fails as if not installed
    args = ["run", "--source", "kafka", "--format", "jsonl", "--bootstrap-servers", "h:1"]
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--topic", "t", "--group", "g", "--kafka-client", "confluent-kafka"])
    assert exit_info.value.code == 2
    assert "pip install 'stream-perceptron[rdkafka]'" in capsys.readouterr().err
