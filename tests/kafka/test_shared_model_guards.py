"""Shared-model mode on the real broker against what could lose or poison the group's model:
hostile records on the model topic while three workers learn, a model topic that is not one
partition compacted, a mistyped topic for pull-model, a worker whose flags differ from the
group's model."""

from __future__ import annotations

import json
import signal
import time

from cli_helpers import run_cli
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic
from model_topic_records import hostile_records
from shared_model_helpers import (
    PARTITIONS,
    STEADY_SESSION_MS,
    examples,
    make_topics,
    name,
    produce,
    read_committed,
    sparse_examples,
    start_worker,
    streaming_workers,
    wait_for,
    worker_args,
)
from test_shared_model import _check_exact, _drain

from stream_perceptron import Perceptron
from stream_perceptron.sharing import PartitionState


def test_hostile_model_topic_records_stop_nothing(kafka_bootstrap, tmp_path, kafka_client):
    """Malformed, deeply nested, foreign, non-finite, oversized-key and forged-head records
    written to the model topic while three workers learn: every worker keeps running and
    mixing, every record is learned and predicted once, the pulled model is as good as one
    sequential model, and pull-model reports what it refused."""
    data = sparse_examples(30_000, seed=13, noise=0.05)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(  # no member stops: a steady session
        kafka_bootstrap, topic, predictions, kafka_client, mix_every=1000,
        session_ms=STEADY_SESSION_MS,
    )
    produce(kafka_bootstrap, topic, data[:15_000])
    ids = ["w0", "w1", "w2"]
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    procs = [start_worker([*args, "--instance-id", i], logs[i]) for i in ids]
    try:
        wait_for(logs["w0"], " committed ", timeout=120)  # the model topic exists
        deadline = time.monotonic() + 120
        while not any(v >= 1 for v in _mixture_versions(kafka_bootstrap, model_topic)):
            assert time.monotonic() < deadline, "no mixture committed"
            time.sleep(0.5)  # the chain has begun: a mixture is committed (a reader without
            # a model of its own, as pull-model, takes the first one's settings as the group's)
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
    # a partition record counting examples no mixture holds (a worker's increments lost):
    # pull-model writes nothing and exits 1, unless --allow-incomplete (issue 42, class 12)
    ghost = PartitionState("ghost", 0, next_offset=10, n_seen=10, worker="ghost")
    writer = KafkaProducer(bootstrap_servers=kafka_bootstrap)
    try:
        writer.send(model_topic, key=ghost.key.encode(), value=ghost.encode())
        writer.flush()
    finally:
        writer.close()
    incomplete = tmp_path / "incomplete.json"
    pull = ["pull-model", "--bootstrap-servers", kafka_bootstrap, "--model-topic", model_topic,
            "--output", str(incomplete), "--kafka-client", kafka_client]  # fmt: skip
    proc = run_cli(*pull)
    assert proc.returncode == 1 and not incomplete.exists(), proc.stderr
    assert b"the partition records count" in proc.stderr and b"--allow-incomplete" in proc.stderr
    proc = run_cli(*pull, "--allow-incomplete")
    assert proc.returncode == 0 and incomplete.exists(), proc.stderr
    assert b"written anyway (--allow-incomplete)" in proc.stderr


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


def _mixture_versions(bootstrap: str, model_topic: str) -> list[int]:
    """The versions of the committed mixture records, in log order (what compaction left)."""
    out = []
    for message in read_committed(bootstrap, model_topic, 1):
        if message.key == b"mixture" and message.value is not None:
            out.append(json.loads(message.value)["version"])
    return out


def test_compaction_keeps_the_newest_mixture(kafka_bootstrap, tmp_path, kafka_client):
    """Workers that start late (before and after the first mixture) and a model topic
    compacted as soon as it can be: the mixture key's last record is the head, never a stale
    version 0, and pull-model after compaction holds every record learned."""
    data = examples(12_000, seed=17, noise=0.05)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(  # no member stops: a steady session
        kafka_bootstrap, topic, predictions, kafka_client, mix_every=500,
        session_ms=STEADY_SESSION_MS,
    )
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.create_topics([NewTopic(model_topic, 1, 1, topic_configs={
            "cleanup.policy": "compact", "segment.ms": "100", "min.cleanable.dirty.ratio": "0.01",
            "delete.retention.ms": "100", "max.compaction.lag.ms": "100",
        })])  # fmt: skip
    finally:
        admin.close()
    logs = {i: tmp_path / f"{i}.log" for i in ("w0", "w1", "w2")}
    procs = [start_worker([*args, "--instance-id", "w1"], logs["w1"])]  # before any mixture
    produce(kafka_bootstrap, topic, data[:6_000])
    wait_for(logs["w1"], " committed ", timeout=90)
    procs.append(start_worker([*args, "--instance-id", "w0"], logs["w0"]))
    wait_for(logs["w0"], " committed ", timeout=90)
    procs.append(start_worker([*args, "--instance-id", "w2"], logs["w2"]))  # after some
    produce(kafka_bootstrap, topic, data[6_000:], start=6_000)
    try:
        _drain(kafka_bootstrap, group, topic, len(data), procs)
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    assert [p.returncode for p in procs] == [0, 0, 0]
    versions = _mixture_versions(kafka_bootstrap, model_topic)
    assert versions == sorted(set(versions)), versions  # one chain, only forward
    deadline = time.monotonic() + 120  # the broker's log cleaner runs every 15 s
    while len(versions) > 1:
        assert time.monotonic() < deadline, f"not compacted: {versions}"
        time.sleep(3)
        writer = KafkaProducer(bootstrap_servers=kafka_bootstrap)  # rolls the active segment
        writer.send(model_topic, key=b"roll", value=b"not a model record")
        writer.close()
        versions = _mixture_versions(kafka_bootstrap, model_topic)
    assert versions[0] >= 1, versions
    pulled = json.loads(run_pull(kafka_bootstrap, model_topic, tmp_path).read_text())
    assert pulled["model"]["n_seen"] == len(data)


def test_a_leader_paused_past_its_session_cannot_fork_the_chain(
    kafka_bootstrap, tmp_path, kafka_client
):
    """The mixing leader stops (SIGSTOP) past the session timeout; another worker takes its
    partitions and mixes; the old one resumes (a zombie) and its transaction is fenced by the
    group generation it carries: the chain of mixtures only moves forward, and every record
    is learned and predicted exactly once."""
    data = sparse_examples(30_000, seed=19, noise=0.05)
    topic, predictions = make_topics(kafka_bootstrap, PARTITIONS, 3)
    args, model_topic, group = streaming_workers(
        kafka_bootstrap, topic, predictions, kafka_client, mix_every=500
    )
    produce(kafka_bootstrap, topic, data[:10_000])
    ids = ["w0", "w1", "w2"]
    logs = {i: tmp_path / f"{i}.log" for i in ids}
    procs = {i: start_worker([*args, "--instance-id", i], logs[i]) for i in ids}
    try:
        deadline = time.monotonic() + 120
        while not (leaders := [i for i in ids if " mixed " in logs[i].read_text()]):
            assert time.monotonic() < deadline, "nobody mixed"
            time.sleep(0.2)
        zombie = leaders[0]
        sizes = {i: logs[i].stat().st_size for i in ids}
        procs[zombie].send_signal(signal.SIGSTOP)
        produce(kafka_bootstrap, topic, data[10_000:20_000], start=10_000)
        deadline = time.monotonic() + 120
        while not any(" mixed " in logs[i].read_bytes()[sizes[i]:].decode("utf-8", "replace")
                      for i in ids if i != zombie):  # fmt: skip
            assert time.monotonic() < deadline, "no other worker took over the mixing"
            time.sleep(0.5)
        procs[zombie].send_signal(signal.SIGCONT)
        time.sleep(5)  # it commits (or fails to) what it held
        produce(kafka_bootstrap, topic, data[20_000:], start=20_000)
        if procs[zombie].poll() is not None:  # fenced: exits 1, restarted by its orchestrator
            assert procs[zombie].returncode == 1, logs[zombie].read_text()[-3000:]
            procs[zombie] = start_worker([*args, "--instance-id", zombie], logs[zombie])
        _drain(kafka_bootstrap, group, topic, len(data), list(procs.values()))
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.kill()
    versions = _mixture_versions(kafka_bootstrap, model_topic)
    assert len(versions) >= 3 and versions == sorted(set(versions)), versions
    _check_exact(kafka_bootstrap, tmp_path, topic, predictions, model_topic, data, kafka_client)
