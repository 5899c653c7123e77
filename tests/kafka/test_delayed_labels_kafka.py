"""``--join-key`` on Kafka (issue 44): events in one topic, outcomes in a co-partitioned
``--labels-topic``, merged by message timestamp, so a run is the stdin run of the same stream;
kill -9 and --resume; topics that are not co-partitioned are refused.

The stream is the stdin proof test's (``tests/engine/test_delayed_labels.py``), written as two
topics of 3 partitions keyed by the join key, each record stamped with its line number on stdin
(milliseconds after a base): the merge by timestamp gives the stdin order back.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import CLI, model_of, run_cli
from engine_process import EngineProcess
from kafka import KafkaConsumer, TopicPartition
from kafka_writes import Message, write
from test_engine_kafka import _name, _scrape, _wait, kafka_args, make_topic

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
from test_delayed_labels import delayed_stream, reference_of, to_lines  # noqa: E402

from stream_perceptron.cli.run_checks import DEFAULT_MAX_PENDING  # noqa: E402
from stream_perceptron.join import DELAY_SECONDS_BUCKETS  # noqa: E402

PARTITIONS = 3
BASE_MS = 1_700_000_000_000
#: The stamps are of November 2023, older than the broker's retention (7 days by default,
#: judged by the largest record timestamp of a segment): without this, the broker's retention
#: check (every 5 minutes) deleted a test's records in the middle of the test, and a resumed
#: worker found its partitions empty and ended at once (kept soak logs, session 24).
KEEP = {"retention.ms": "-1"}
COUNTERS = ("records", "learned", "mistakes", "unlabelled")
JOIN = ("events", "outcomes", "joined", "served_mistakes", "expired", "unmatched_outcome",
        "duplicate_outcome", "duplicate_event", "delay_sum")  # fmt: skip


def write_topics(
    bootstrap: str, objs: list[dict[str, Any]], partitions: int = PARTITIONS, labels: int = 0,
    ms_apart: int = 1,
) -> tuple[str, str, dict[tuple[int, int], int]]:  # fmt: skip
    """``objs`` as an events topic (records with features) and a labels topic (the key and a
    label), made here; returns the topics and each event's (partition, offset) -> i."""
    events = make_topic(bootstrap, partitions, KEEP)
    outcomes = make_topic(bootstrap, labels or partitions, KEEP)
    return events, outcomes, produce_stream(bootstrap, objs, events, outcomes, labels,
                                            ms_apart=ms_apart)  # fmt: skip


def produce_stream(
    bootstrap: str, objs: list[dict[str, Any]], events: str, outcomes: str, labels: int = 0,
    partitions: int = PARTITIONS, ms_apart: int = 1,
) -> dict[tuple[int, int], int]:  # fmt: skip
    """``objs`` produced, record i stamped ``BASE_MS + i * ms_apart``, keyed and partitioned
    by its key; returns each event's (partition, offset) -> i."""
    messages, outcome = [], []
    for i, obj in enumerate(objs):
        key = None if "id" not in obj else str(obj["id"]).encode()
        is_outcome = set(obj) == {"id", "y"}
        topic, count = (outcomes, labels or partitions) if is_outcome else (events, partitions)
        partition = (zlib.crc32(key) if key is not None else i) % count
        messages.append(Message(json.dumps(obj).encode(), key=key, partition=partition,
                                timestamp_ms=BASE_MS + i * ms_apart, topic=topic))  # fmt: skip
        outcome.append(is_outcome)
    where = {}
    for i, (at, is_outcome) in enumerate(zip(write(bootstrap, events, messages), outcome)):
        if not is_outcome:
            where[at] = i
    return where


def stdin_run(tmp_path: Path, objs: list[dict[str, Any]], wait: int) -> dict[str, Path]:
    out = {name: tmp_path / f"stdin-{name}" for name in ("ck", "preds", "summary")}
    proc = run_cli("run", "--format", "jsonl", "--join-key", "id", "--label-wait", str(wait),
                   "--checkpoint", str(out["ck"]), "--predictions", str(out["preds"]),
                   "--summary-json", str(out["summary"]), stdin=to_lines(objs))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    return out


def counters(summary: dict[str, Any]) -> dict[str, Any]:
    return {**{k: summary[k] for k in COUNTERS}, **{k: summary["join"][k] for k in JOIN},
            "delays": summary["join"]["delay_buckets"]}  # fmt: skip


def predictions_by_line(path: Path, where: dict[tuple[int, int], int] | None) -> list[tuple]:
    """Each prediction line as (stdin line, prediction, label, mistake); a Kafka line's line
    found from its event's partition and offset."""
    out = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        position = entry["position"]
        i = position["offset"] if where is None else where[(position["partition"],
                                                            position["offset"])]  # fmt: skip
        out.append((i, entry["prediction"], entry.get("label"), entry.get("mistake")))
    return out


@pytest.mark.parametrize("label_wait, ms_apart", [("1200", 1), ("2.4s", 2)])
def test_two_co_partitioned_topics_merged_by_timestamp_give_the_stdin_run(
    kafka_bootstrap, tmp_path, kafka_client, label_wait, ms_apart
):
    """With ``--label-wait 2.4s`` too: record i stamped ``BASE_MS + 2 i`` ms, 2,400 ms of the
    stream's time are 1,200 records, and the join drops what the stdin run drops."""
    objs = delayed_stream(4000, seed=11, max_late=1500)
    wait = 1200  # some outcomes come too late: expired and unmatched are exercised
    stdin = stdin_run(tmp_path, objs, wait)
    events, outcomes, where = write_topics(kafka_bootstrap, objs, ms_apart=ms_apart)

    ck, preds, summary = tmp_path / "ck.json", tmp_path / "preds.jsonl", tmp_path / "s.json"
    args = kafka_args(kafka_bootstrap, events, _name("group"), "--labels-topic", outcomes,
                      "--join-key", "id", "--label-wait", label_wait, "--exit-at-end",
                      "--checkpoint", str(ck), "--predictions", str(preds),
                      "--summary-json", str(summary), client=kafka_client)  # fmt: skip
    proc = run_cli(*args, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()

    want = json.loads(stdin["summary"].read_text())
    assert min(want["join"][k] for k in ("expired", "unmatched_outcome", "joined")) > 20
    got = json.loads(summary.read_text())
    assert counters(got) == counters(want)
    # the label delay in time, from the messages' timestamps (record i stamped BASE_MS + i
    # ms_apart): each pair's delay in records (the reference's) in milliseconds; stdin lines
    # have none
    ref = reference_of(objs, DEFAULT_MAX_PENDING, wait)
    seconds = [0] * (len(DELAY_SECONDS_BUCKETS) + 1)
    for d in ref.delays:
        s = d * ms_apart / 1000
        seconds[next((i for i, b in enumerate(DELAY_SECONDS_BUCKETS) if s <= b), -1)] += 1
    assert list(got["join"]["delay_seconds_buckets"].values()) == seconds
    assert got["join"]["delay_seconds_sum"] == pytest.approx(sum(ref.delays) * ms_apart / 1000)
    assert sum(seconds[1:]) > 20 and sum(want["join"]["delay_seconds_buckets"].values()) == 0
    assert model_of(ck).get_state() == model_of(stdin["ck"]).get_state()
    # the same prediction for each event, in the same order (one line an event)
    assert predictions_by_line(preds, where) == predictions_by_line(stdin["preds"], None)
    # the checkpoint holds the positions of both topics: every partition read to its end
    positions = json.loads(ck.read_text())["positions"]
    assert {(p["source"], p["partition"]) for p in positions} == {
        (t, p) for t in (events, outcomes) for p in range(PARTITIONS)
    }


def _checkpointed(ck: Path) -> int:
    try:
        return sum(int(p["next_offset"]) for p in json.loads(ck.read_bytes())["positions"])
    except (OSError, ValueError, KeyError):
        return 0


def test_kill_9_at_random_points_then_resume_equals_the_uninterrupted_run(
    kafka_bootstrap, tmp_path, kafka_client
):
    objs = delayed_stream(12_000, seed=3, max_late=2000)
    events, outcomes, _ = write_topics(kafka_bootstrap, objs)
    records = len(objs)

    def args(ck: Path, preds: Path, group: str, *extra: str) -> list[str]:
        return kafka_args(kafka_bootstrap, events, group, "--labels-topic", outcomes,
                          "--join-key", "id", "--label-wait", "3000", "--exit-at-end",
                          "--checkpoint", str(ck), "--checkpoint-every", "500",
                          "--predictions", str(preds), *extra, client=kafka_client)  # fmt: skip

    whole, whole_preds = tmp_path / "whole.json", tmp_path / "whole.jsonl"
    proc = run_cli(*args(whole, whole_preds, _name("group")), timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()

    # static membership: a restarted worker takes its partitions back at once
    ck, preds = tmp_path / "ck.json", tmp_path / "preds.jsonl"
    group = _name("group")
    resumed = [*CLI, *args(ck, preds, group, "--resume", "--instance-id", "w0")]
    rng = random.Random(7)
    killed, ended = 0, []
    for run in range(5):
        target = _checkpointed(ck) + rng.randint(500, records // 10)
        log = tmp_path / f"victim{run}.log"  # why a run ended before its kill, if one does
        with log.open("wb") as err:
            victim = subprocess.Popen(resumed, stderr=err)
        deadline = time.monotonic() + 60
        while victim.poll() is None and _checkpointed(ck) < target:
            assert time.monotonic() < deadline, f"{ck} never reached {target}"
            time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.05))
        if victim.poll() is None:
            victim.send_signal(signal.SIGKILL)
            killed += 1
        else:
            ended.append((run, victim.returncode, target, _checkpointed(ck),
                          log.read_text(errors="replace")[-3000:]))  # fmt: skip
        victim.wait(timeout=30)
    assert killed == 5, f"{5 - killed} of 5 runs ended before their kill: {ended}"
    finish = subprocess.run(resumed, capture_output=True, timeout=120, check=False)
    assert finish.returncode == 0, finish.stderr.decode()

    assert model_of(ck).get_state() == model_of(whole).get_state()
    got, want = json.loads(ck.read_text()), json.loads(whole.read_text())
    assert got["stats"] == want["stats"]
    assert got["join"] == want["join"]
    assert got["positions"] == want["positions"]
    # and committed, for both topics, after the checkpoint that holds them
    consumer = KafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id=group)
    try:
        committed = {(t, p): consumer.committed(TopicPartition(t, p))
                     for t in (events, outcomes) for p in range(PARTITIONS)}  # fmt: skip
    finally:
        consumer.close()
    assert committed == {(p["source"], p["partition"]): p["next_offset"] for p in got["positions"]}
    # the prediction lines cut back to each checkpoint: one a event, as in the whole run
    assert preds.read_bytes() == whole_preds.read_bytes()
    assert want["stats"]["join"]["joined"] > 5000


def _owned(engine: EngineProcess) -> dict[str, set[int]]:
    """Per topic, the partitions an engine owns (its lag series)."""
    owned: dict[str, set[int]] = {}
    for line in _scrape(engine.url).splitlines():
        if line.startswith("stream_perceptron_kafka_consumer_lag{"):
            labels = dict(part.split("=") for part in line[line.index("{") + 1 :
                                                           line.index("}")].split(","))
            owned.setdefault(labels["topic"].strip('"'), set()).add(int(labels["partition"]
                                                                        .strip('"')))
    return owned


def _examples(engines: list[EngineProcess]) -> int:
    total = 0
    for engine in engines:
        for line in _scrape(engine.url).splitlines():
            if line.startswith("stream_perceptron_examples_total "):
                total += int(float(line.split()[1]))
    return total


def test_two_workers_in_one_group_each_join_partition_p_of_both_topics(
    kafka_bootstrap, tmp_path, kafka_client
):
    objs = delayed_stream(3000, seed=5, max_late=1000)
    unbounded = ["--join-key", "id", "--label-wait", str(10**9), "--max-pending", str(10**6)]
    stdin = tmp_path / "stdin.json"
    proc = run_cli("run", "--format", "jsonl", *unbounded, "--summary-json", str(stdin),
                   stdin=to_lines(objs))  # fmt: skip
    assert proc.returncode == 0, proc.stderr.decode()
    want = json.loads(stdin.read_text())
    # 3 partitions for 2 workers: partition p of both topics to one worker is the range
    # assignor's doing (round robin over the 6 would split some)
    events, outcomes = make_topic(kafka_bootstrap, 3, KEEP), make_topic(kafka_bootstrap, 3, KEEP)
    group, engines = _name("group"), []
    for name in ("a", "b"):
        args = kafka_args(kafka_bootstrap, events, group, "--labels-topic", outcomes, *unbounded,
                          "--predictions", str(tmp_path / f"{name}.jsonl"), "--summary-json",
                          str(tmp_path / f"{name}.json"), client=kafka_client)  # fmt: skip
        args.remove("--metrics-port")
        args.remove("-1")
        engines.append(EngineProcess(*args[1:]))
    try:
        shares = lambda: [sum(map(len, _owned(e).values())) for e in engines]  # noqa: E731
        _wait(lambda: sum(shares()) == 6 and min(shares()) > 0, what="the 6 partitions shared")
        owned = [_owned(e) for e in engines]
        assert all(o[events] == o[outcomes] for o in owned), owned  # partition p of both
        assert owned[0][events] | owned[1][events] == set(range(3))
        produce_stream(kafka_bootstrap, objs, events, outcomes, partitions=3)
        # each event and its outcome meet in one worker: every pair of the stdin run is made
        _wait(lambda: _examples(engines) == want["learned"], timeout=60,
              what=f"{want['learned']} examples")  # fmt: skip
    finally:
        for e in engines:
            if e.proc.poll() is None:
                e.proc.send_signal(signal.SIGTERM)
        ended = [e.finish() for e in engines]
        for code, err in ended:
            print(code, err.decode()[-3000:])  # shown when the test fails
    assert [code for code, _ in ended] == [0, 0]
    got = [json.loads((tmp_path / f"{name}.json").read_text())["join"] for name in "ab"]
    for counter in ("events", "outcomes", "joined", "unmatched_outcome", "duplicate_outcome"):
        assert sum(g[counter] for g in got) == want["join"][counter], counter
    assert all(g["joined"] > 0 for g in got)
    lines = [json.loads(line)["position"] for name in "ab"
             for line in (tmp_path / f"{name}.jsonl").read_text().splitlines()]  # fmt: skip
    # one prediction a record with features (events, keyless, labelled inline): once each
    with_features = sum(1 for obj in objs if set(obj) - {"id", "y"})
    assert len(lines) == len({(p["partition"], p["offset"]) for p in lines}) == with_features


def test_topics_with_other_partition_counts_are_refused(kafka_bootstrap, tmp_path, kafka_client):
    objs = delayed_stream(200, seed=2)
    events, outcomes, _ = write_topics(kafka_bootstrap, objs, partitions=3, labels=2)
    proc = run_cli(*kafka_args(kafka_bootstrap, events, _name("group"), "--labels-topic",
                               outcomes, "--join-key", "id", "--exit-at-end",
                               "--predictions", str(tmp_path / "p.jsonl"),
                               client=kafka_client), timeout=60)  # fmt: skip
    err = proc.stderr.decode()
    assert proc.returncode == 2, err
    assert "not co-partitioned" in err and f"{events!r} has 3 partitions" in err, err
    assert f"{outcomes!r} has 2 partitions" in err
    assert not (tmp_path / "p.jsonl").read_bytes()  # nothing was predicted


KAFKA = ["--source", "kafka", "--bootstrap-servers", "127.0.0.1:9", "--group", "g", "--format",
         "jsonl"]  # fmt: skip


@pytest.mark.parametrize(
    "args, message",
    [([*KAFKA, "--topic", "e", "--labels-topic", "l"], "--labels-topic needs --join-key"),
     (["--format", "jsonl", "--join-key", "id", "--labels-topic", "l"],
      "--labels-topic needs --source kafka"),
     ([*KAFKA, "--topic", "e", "--topic", "f", "--join-key", "id", "--labels-topic", "l"],
      "--labels-topic goes with one --topic"),
     ([*KAFKA, "--topic", "e", "--join-key", "id", "--labels-topic", "e"],
      "--labels-topic and --topic name one topic"),
     ([*KAFKA, "--topic", "e", "--join-key", "id", "--labels-topic", "l",
       "--join-changelog-topic", "c"], "--join-changelog-topic goes with --model-topic"),
     ([*KAFKA, "--topic", "e", "--join-key", "id", "--labels-topic", "l", "--model-topic", "m",
       "--join-changelog-topic", "l"], "--join-changelog-topic 'l' is a topic of its own"),
     ([*KAFKA, "--topic", "e", "--join-changelog-topic", "c"],
      "--join-changelog-topic needs --join-key")],
)  # fmt: skip
def test_labels_topic_flags_that_cannot_work_are_usage_errors(args, message):
    proc = run_cli("run", *args, stdin=b"")
    assert proc.returncode == 2 and message in proc.stderr.decode(), proc.stderr.decode()
