"""A secured cluster: the broker's clients' listener is SASL_SSL (SCRAM-SHA-512 over TLS with
certificates made at test time) and every request is authorised by the KRaft
StandardAuthorizer. Workers run with exactly the ACLs the security guide lists
(docs/security.md, "Running on a secured cluster"); a principal without write ACL on the model
topic is refused by the broker and the workers' model stays exact."""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest
from cli_helpers import CLI, binary_examples, model_of
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import (
    ACL,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    NewTopic,
    ResourcePattern,
    ResourceType,
)
from kafka.errors import TopicAuthorizationFailedError
from kafka_broker import SecuredBroker, start_secured_broker, stop_broker
from shared_model_helpers import name, read_committed
from test_engine_kafka import direct, jsonl

from stream_perceptron.cli.kafka import PASSWORD_ENV, USERNAME_ENV

USERS = {
    "admin": "admin-secret",
    "worker": "worker-secret",
    "reader": "reader-secret",
    "stranger": "stranger-secret",
}
SECURITY_DOC = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "security.md")

R, W, DC = ACLOperation.READ, ACLOperation.WRITE, ACLOperation.DESCRIBE_CONFIGS


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> SecuredBroker:
    state = tmp_path_factory.mktemp("secured-kafka")
    broker = start_secured_broker(state, USERS)
    try:
        yield broker
    finally:
        stop_broker(state_dir=state)


def worker_acls(
    user: str, group: str, inputs: list[str], outputs: list[str], model_topic: str | None
) -> list[tuple[ResourceType, str, ACLOperation, ACLResourcePatternType]]:
    """The security guide's list: what a worker of ``group`` needs (READ and WRITE imply
    DESCRIBE)."""
    lit, prefixed = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
    acls = [(ResourceType.TOPIC, t, R, lit) for t in inputs]
    acls += [(ResourceType.GROUP, group, R, lit)]
    acls += [(ResourceType.TOPIC, t, W, lit) for t in outputs]
    if model_topic is not None:  # shared-model mode: the model topic and the transactions
        acls += [(ResourceType.TOPIC, model_topic, op, lit) for op in (R, W, DC)]
        transactional = f"stream-perceptron-{group}-"
        acls += [(ResourceType.TRANSACTIONAL_ID, transactional, W, prefixed)]
    return acls


def reader_acls(model_topic: str) -> list:
    """``pull-model``: read the model topic and check its configuration."""
    lit = ACLResourcePatternType.LITERAL
    return [(ResourceType.TOPIC, model_topic, op, lit) for op in (R, DC)]


def grant(broker: SecuredBroker, user: str, acls: list) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.plaintext)  # the operator's listener
    try:
        result = admin.create_acls(
            [ACL(f"User:{user}", "*", op, ACLPermissionType.ALLOW, ResourcePattern(kind, res, pat))
             for kind, res, op, pat in acls]
        )  # fmt: skip
        assert not result["failed"], result["failed"]
    finally:
        admin.close()
    time.sleep(0.5)  # the authorizer's copy follows the metadata log


def create_topics(broker: SecuredBroker, *specs: tuple[str, int, dict]) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.plaintext)
    try:
        admin.create_topics([NewTopic(t, p, 1, topic_configs=c) for t, p, c in specs])
    finally:
        admin.close()


def produce_plain(broker: SecuredBroker, topic: str, values: list[bytes], partitions: int) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.plaintext, acks="all", linger_ms=5)
    try:
        for i, value in enumerate(values):
            producer.send(topic, value=value, partition=i % partitions)
        producer.flush()
    finally:
        producer.close()


def count(broker: SecuredBroker, topic: str, partitions: int) -> int:
    consumer = KafkaConsumer(bootstrap_servers=broker.plaintext, enable_auto_commit=False)
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def as_user(broker: SecuredBroker, user: str, password: str | None = None):
    """``(flags, env)`` of a CLI run as ``user`` on the SASL_SSL listener."""
    flags = ["--bootstrap-servers", broker.sasl_ssl, "--security-protocol", "SASL_SSL",
             "--sasl-mechanism", "SCRAM-SHA-512", "--ssl-cafile", broker.cafile]  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1", USERNAME_ENV: user,
           PASSWORD_ENV: password if password is not None else USERS[user]}  # fmt: skip
    return flags, env


def cli(argv: list[str], env: dict, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *argv], capture_output=True, env=env, timeout=timeout, check=False)


def start(argv: list[str], env: dict, log) -> subprocess.Popen:
    return subprocess.Popen([*CLI, *argv], stdout=subprocess.DEVNULL, stderr=log.open("wb"),
                            env=env)  # fmt: skip


def session_options(client: str) -> list[str]:
    sep = "." if client == "confluent-kafka" else "_"
    return ["--kafka-option", f"session{sep}timeout{sep}ms=6000",
            "--kafka-option", f"heartbeat{sep}interval{sep}ms=1000"]  # fmt: skip


def test_the_security_guide_lists_the_acls_the_tests_grant():
    text = open(SECURITY_DOC, encoding="utf-8").read()
    section = text[text.index("## Running on a secured cluster") :]
    section = section[: section.index("\n## ", 1)] if "\n## " in section[1:] else section
    for resource, operation in (
        ("input topics", "Read"), ("consumer group", "Read"),
        ("predictions and dead-letter topics", "Write"),
        ("model topic", "Read, Write, DescribeConfigs"),
        ("transactional ids", "Write"),
    ):  # fmt: skip
        assert f"| {resource} | {operation} |" in section.replace("`", ""), (resource, operation)
    assert "stream-perceptron-GROUP-" in section and "PREFIXED" in section


def test_the_kafka_path_with_its_acls(secured, tmp_path, kafka_client):
    topic, predictions, dead = name("topic"), name("predictions"), name("dead")
    create_topics(secured, (topic, 1, {}), (predictions, 1, {}), (dead, 1, {}))
    examples = binary_examples(600, seed=71)
    produce_plain(secured, topic, [*jsonl(examples), b"{not json", b'{"f0": 1.0}'], 1)
    group = name("group")
    grant(secured, "worker", worker_acls("worker", group, [topic], [predictions, dead], None))
    flags, env = as_user(secured, "worker")
    ck = tmp_path / "m.json"
    proc = cli(["run", "--source", "kafka", *flags, "--topic", topic, "--group", group,
                "--format", "jsonl", "--metrics-port", "-1", "--exit-at-end",
                "--kafka-client", kafka_client, *session_options(kafka_client),
                "--checkpoint", str(ck), "--predictions-topic", predictions,
                "--dead-letter-topic", dead], env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    assert model_of(ck).get_state() == direct(examples).get_state()
    # a prediction for each record with features (the unlabelled one too), the bad one kept
    assert count(secured, predictions, 1) == 601
    assert count(secured, dead, 1) == 1


def test_shared_model_mode_and_pull_model_with_their_acls(secured, tmp_path, kafka_client):
    topic, predictions, model_topic = name("topic"), name("predictions"), name("model")
    create_topics(
        secured, (topic, 3, {}), (predictions, 1, {}),
        (model_topic, 1, {"cleanup.policy": "compact"}),
    )  # fmt: skip
    examples = binary_examples(3000, seed=72)
    produce_plain(secured, topic, jsonl(examples), 3)
    group = name("group")
    grant(secured, "worker", worker_acls("worker", group, [topic], [predictions], model_topic))
    grant(secured, "reader", reader_acls(model_topic))
    flags, env = as_user(secured, "worker")
    argv = ["run", "--source", "kafka", *flags, "--topic", topic, "--group", group,
            "--format", "jsonl", "--metrics-port", "-1", "--exit-at-end",
            "--kafka-client", kafka_client, *session_options(kafka_client),
            "--model-topic", model_topic, "--predictions-topic", predictions,
            "--checkpoint-interval", "0.5"]  # fmt: skip
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = [start([*argv, "--instance-id", f"w{i}"], env, log) for i, log in enumerate(logs)]
    try:
        codes = [p.wait(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0, 0], [log.read_text()[-3000:] for log in logs]
    # exactly one prediction per record, committed in the workers' transactions
    out = read_committed(secured.plaintext, predictions, 1)
    seen = sorted((p["partition"], p["offset"]) for p in (json.loads(m.value) for m in out))
    assert seen == sorted((i % 3, i // 3) for i in range(3000))

    def pull(user: str, path) -> subprocess.CompletedProcess:
        pull_flags, pull_env = as_user(secured, user)
        return cli(["pull-model", *pull_flags, "--model-topic", model_topic, "--output",
                    str(path), "--kafka-client", kafka_client], pull_env)  # fmt: skip

    first = pull("reader", tmp_path / "pulled.json")
    assert first.returncode == 0, first.stderr.decode()
    assert model_of(tmp_path / "pulled.json").n_seen == 3000
    # a principal without write ACL on the model topic: the broker refuses its records
    for user in ("reader", "stranger"):
        producer = KafkaProducer(
            bootstrap_servers=secured.sasl_ssl, security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=user,
            sasl_plain_password=USERS[user], ssl_cafile=secured.cafile, max_block_ms=10_000,
            enable_idempotence=False,  # else refused sooner: no idempotent-write right
        )  # fmt: skip
        try:
            forged = {"schema_version": 1, "version": 10**6, "state": {}}
            sent = producer.send(model_topic, key=b"mixture", value=json.dumps(forged).encode())
            with pytest.raises(TopicAuthorizationFailedError):
                sent.get(timeout=20)
        finally:
            producer.close(timeout=5)
    # the workers' model is what it was: every record once, nothing refused or skipped
    again = pull("reader", tmp_path / "again.json")
    assert again.returncode == 0, again.stderr.decode()
    assert b"refused" not in again.stderr, again.stderr.decode()
    assert json.loads((tmp_path / "again.json").read_text())["model"] == json.loads(
        (tmp_path / "pulled.json").read_text()
    )["model"]
    # a principal with no ACL on the model topic cannot pull it: a clear error, no traceback
    denied = pull("stranger", tmp_path / "denied.json")
    assert denied.returncode in (1, 2), denied.stderr.decode()
    assert b"stream-perceptron: error:" in denied.stderr and b"Traceback" not in denied.stderr
    assert not (tmp_path / "denied.json").exists()


def test_a_wrong_password_is_a_clear_error(secured, tmp_path, kafka_client):
    topic = name("topic")
    create_topics(secured, (topic, 1, {}))
    produce_plain(secured, topic, jsonl(binary_examples(20, seed=73)), 1)
    flags, env = as_user(secured, "worker", password="not-the-password")
    started = time.monotonic()
    proc = cli(["run", "--source", "kafka", *flags, "--topic", topic, "--group", name("group"),
                "--format", "jsonl", "--metrics-port", "-1", "--exit-at-end",
                "--kafka-client", kafka_client], env, timeout=120)  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 1, err[-3000:]
    assert "stream-perceptron: error:" in err and "Traceback" not in err, err[-3000:]
    assert "authenticat" in err.lower(), err[-3000:]
    assert time.monotonic() - started < 90


def _older_copies(model_topic_records: list) -> list:
    """A partition record and a mixture the workers wrote (signed) that later ones of their
    key superseded: the copies a principal with Write on the model topic could write again."""
    newest: dict[bytes, dict] = {}
    for m in model_topic_records:
        if m.value is not None:
            newest[m.key] = json.loads(m.value)
    for m in model_topic_records:
        record = json.loads(m.value) if m.value is not None else None
        if record and record["type"] == "partition" and (
            record["next_offset"] < newest[m.key]["next_offset"]
        ):
            partition = m
            break
    mixture = next(m for m in model_topic_records if m.key == b"mixture"
                   and json.loads(m.value)["version"] < newest[b"mixture"]["version"])  # fmt: skip
    return [partition, mixture]


def test_a_signed_record_written_again_is_refused_and_the_model_unchanged(
    secured, tmp_path, kafka_client
):
    """Issue #45: a principal with Write on the model topic (no key) writes again an older
    partition record and an older mixture the workers signed. ``pull-model`` refuses both
    (``replayed``) and pulls the same model; a worker restarted on the group resumes where the
    partitions were: nothing learned or predicted twice."""
    topic, predictions, model_topic = name("topic"), name("predictions"), name("model")
    create_topics(
        secured, (topic, 3, {}), (predictions, 1, {}),
        (model_topic, 1, {"cleanup.policy": "compact"}),
    )  # fmt: skip
    examples = binary_examples(3000, seed=74)
    produce_plain(secured, topic, jsonl(examples), 3)
    group = name("group")
    grant(secured, "worker", worker_acls("worker", group, [topic], [predictions], model_topic))
    grant(secured, "reader", reader_acls(model_topic))
    key_file = tmp_path / "group.key"
    key_file.write_bytes(b"0123456789abcdef0123456789abcdef-replays\n")
    key_file.chmod(0o600)
    flags, env = as_user(secured, "worker")
    argv = ["run", "--source", "kafka", *flags, "--topic", topic, "--group", group,
            "--format", "jsonl", "--metrics-port", "-1", "--exit-at-end",
            "--kafka-client", kafka_client, *session_options(kafka_client),
            "--model-topic", model_topic, "--predictions-topic", predictions,
            "--model-topic-key-file", str(key_file), "--mix-every", "500",
            "--checkpoint-interval", "0.5"]  # fmt: skip
    logs = [tmp_path / f"w{i}.log" for i in range(2)]
    procs = [start([*argv, "--instance-id", f"w{i}"], env, log) for i, log in enumerate(logs)]
    try:
        codes = [p.wait(timeout=180) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert codes == [0, 0], [log.read_text()[-3000:] for log in logs]

    def pull(path) -> subprocess.CompletedProcess:
        pull_flags, pull_env = as_user(secured, "reader")
        return cli(["pull-model", *pull_flags, "--model-topic", model_topic, "--output",
                    str(path), "--kafka-client", kafka_client, "--model-topic-key-file",
                    str(key_file)], pull_env)  # fmt: skip

    first = pull(tmp_path / "pulled.json")
    assert first.returncode == 0 and b"refused" not in first.stderr, first.stderr.decode()
    pulled = json.loads((tmp_path / "pulled.json").read_text())
    assert pulled["model"]["n_seen"] == 3000
    copies = _older_copies(read_committed(secured.plaintext, model_topic, 1))
    producer = KafkaProducer(
        bootstrap_servers=secured.sasl_ssl, security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512", sasl_plain_username="worker",
        sasl_plain_password=USERS["worker"], ssl_cafile=secured.cafile, max_block_ms=10_000,
        enable_idempotence=False,  # the worker's ACLs: Write, not IdempotentWrite
    )  # fmt: skip
    try:
        for m in copies:  # the same key, value and signature, written again
            producer.send(model_topic, key=m.key, value=m.value,
                          headers=list(m.headers)).get(timeout=20)  # fmt: skip
    finally:
        producer.close(timeout=5)
    again = pull(tmp_path / "again.json")
    said = again.stderr.decode()
    assert again.returncode == 0, said
    assert "refused and skipped: 2 replayed" in said, said
    pulled_again = json.loads((tmp_path / "again.json").read_text())
    for part in ("model", "positions"):
        assert pulled_again[part] == pulled[part], part
    # a worker restarted on the group resumes where the partitions were, not at the copy's
    # offset: it reads nothing, learns nothing, predicts nothing again
    restart_log = tmp_path / "restart.log"
    restarted = start([*argv, "--instance-id", "w0"], env, restart_log)
    try:
        assert restarted.wait(timeout=180) == 0, restart_log.read_text()[-3000:]
    finally:
        if restarted.poll() is None:
            restarted.kill()
    assert "reason replayed" in restart_log.read_text(), restart_log.read_text()[-3000:]
    out = read_committed(secured.plaintext, predictions, 1)
    seen = sorted((p["partition"], p["offset"]) for p in (json.loads(m.value) for m in out))
    assert seen == sorted((i % 3, i // 3) for i in range(3000))
    last = pull(tmp_path / "last.json")
    assert last.returncode == 0, last.stderr.decode()
    assert json.loads((tmp_path / "last.json").read_text())["model"]["n_seen"] == 3000
