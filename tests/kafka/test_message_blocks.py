"""One record per Kafka message goes through the engine's block path (a partition's messages of
a poll as one ``MessageBlock``): each prediction and dead letter must be what the per-record
rule gives, with its message's key and (topic, partition, offset), for each Kafka client."""

from __future__ import annotations

import json
import uuid

import pytest
from cli_helpers import binary_examples, model_of, run_cli
from test_engine_kafka import direct, kafka_args, make_topic, produce, read_topic

from stream_perceptron import Perceptron

#: offset -> (bad record, reason), per format
BAD = {
    "jsonl": {
        700: (b"{broken", "invalid_json"),
        1501: (b'{"f0": 1, "y": [1]}', "non_numeric_value"),
    },
    "csv": {
        700: (b"1,2,3", "wrong_column_count"),
        1501: (b"0.5,abc,1,1,1,1", "non_numeric_value"),
    },
}


def _name(kind: str) -> str:
    return f"test-{kind}-{uuid.uuid4().hex[:10]}"


def _messages(fmt: str) -> tuple[list[bytes], list[tuple[int, dict, int | None]]]:
    """3000 messages (CSV: a header first): good records, every 10th unlabelled, and the bad
    ones of ``BAD[fmt]``; with the good ones as (offset, x, y)."""
    examples = binary_examples(3000, seed=41)
    values: list[bytes] = []
    good: list[tuple[int, dict, int | None]] = []
    if fmt == "csv":
        values.append(b"f0,f1,f2,f3,f4,y")
    for i, (x, y) in enumerate(examples):
        offset = len(values)
        if offset in BAD[fmt]:
            values.append(BAD[fmt][offset][0])
            continue
        label = None if i % 10 == 3 else y
        if fmt == "csv":
            cells = [repr(x[f"f{j}"]) for j in range(5)]
            values.append(",".join([*cells, "" if label is None else str(label)]).encode())
        else:
            values.append(json.dumps({**x, "y": label}).encode())
        good.append((offset, x, label))
    return values, good


def _expected_line(topic: str, offset: int, prediction, y) -> dict:
    entry = {
        "position": {"source": topic, "offset": offset, "partition": 0},
        "prediction": prediction,
        "topic": topic,
        "partition": 0,
        "offset": offset,
    }
    if y is not None:
        entry.update(label=y, mistake=prediction != y)
    return entry


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_block_path_predicts_keys_and_dead_letters_as_the_per_record_rule(
    kafka_bootstrap, tmp_path, kafka_client, fmt
):
    topic, preds, dead = (make_topic(kafka_bootstrap) for _ in range(3))
    values, good = _messages(fmt)
    bad = BAD[fmt]
    produce(kafka_bootstrap, topic, values)  # message i has key k{i}
    ck, summary = tmp_path / "m.json", tmp_path / "s.json"
    args = kafka_args(
        kafka_bootstrap,
        topic,
        _name("group"),
        "--exit-at-end",
        "--predictions-topic",
        preds,
        "--dead-letter-topic",
        dead,
        "--checkpoint",
        str(ck),
        "--summary-json",
        str(summary),
        client=kafka_client,
    )
    args[args.index("--format") + 1] = fmt
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr.decode()

    # The independent reference: predict_one before learn_one, record by record.
    reference = Perceptron()
    expected = []
    for offset, x, y in good:
        expected.append(_expected_line(topic, offset, reference.predict_one(x), y))
        if y is not None:
            reference.learn_one(x, y)
    got = read_topic(kafka_bootstrap, preds, len(good))
    assert [json.loads(m.value) for m in got] == expected
    assert [m.key for m in got] == [f"k{offset}".encode() for offset, _, _ in good]

    labelled = [(x, y) for _, x, y in good if y is not None]
    assert model_of(ck).get_state() == direct(labelled).get_state()
    s = json.loads(summary.read_text())
    assert s["learned"] == len(labelled)
    assert s["unlabelled"] == len(good) - len(labelled)
    assert s["invalid"] == {reason: 1 for _, reason in bad.values()}
    assert json.loads(ck.read_text())["positions"] == [
        {"source": topic, "partition": 0, "next_offset": len(values)}
    ]

    letters = read_topic(kafka_bootstrap, dead, len(bad))
    assert [m.value for m in letters] == [value for value, _ in bad.values()]
    assert [m.key for m in letters] == [f"k{offset}".encode() for offset in bad]
    headers = [dict(m.headers) for m in letters]
    assert [h["reason"].decode() for h in headers] == [reason for _, reason in bad.values()]
    assert [int(h["offset"]) for h in headers] == list(bad)
    assert all(h["partition"] == b"0" and h["source"] == topic.encode() for h in headers)


def test_block_path_keys_every_prediction_of_several_partitions(
    kafka_bootstrap, tmp_path, kafka_client
):
    topic, preds = make_topic(kafka_bootstrap, partitions=3), make_topic(kafka_bootstrap)
    examples = binary_examples(3000, seed=42)
    values = [json.dumps({**x, "y": y}).encode() for x, y in examples]
    produce(kafka_bootstrap, topic, values, partitions=3)  # message i: key k{i}, partition i % 3
    args = kafka_args(
        kafka_bootstrap,
        topic,
        _name("group"),
        "--exit-at-end",
        "--predictions-topic",
        preds,
        client=kafka_client,
    )
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr.decode()
    got = read_topic(kafka_bootstrap, preds, len(values))
    seen = {}
    for message in got:
        line = json.loads(message.value)
        where = (line["topic"], line["partition"], line["offset"])
        assert line["position"] == {"source": topic, "partition": where[1], "offset": where[2]}
        assert where not in seen
        seen[where] = message.key
        # Message i went to partition i % 3 at offset i // 3 with key k{i}.
        assert message.key == f"k{3 * where[2] + where[1]}".encode()
        assert line["label"] == examples[3 * where[2] + where[1]][1]
    assert len(seen) == len(values)


def test_block_path_keys_the_lines_of_multi_line_messages(kafka_bootstrap, tmp_path, kafka_client):
    topic, preds = make_topic(kafka_bootstrap), make_topic(kafka_bootstrap)
    examples = binary_examples(2000, seed=43)
    lines = [json.dumps({**x, "y": y}).encode() for x, y in examples]
    values, where = [], []  # where[j]: the offset of the message holding line j
    while len(where) < len(lines):
        size = min(1 + len(values) % 3, len(lines) - len(where))  # 1, 2 or 3 lines a message
        values.append(b"\n".join(lines[len(where) : len(where) + size]))
        where += [len(values) - 1] * size
    produce(kafka_bootstrap, topic, values)  # message i has key k{i}
    ck = tmp_path / "m.json"
    args = kafka_args(
        kafka_bootstrap,
        topic,
        _name("group"),
        "--exit-at-end",
        "--predictions-topic",
        preds,
        "--checkpoint",
        str(ck),
        client=kafka_client,
    )
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr.decode()
    reference = Perceptron()
    expected = []
    for offset, (x, y) in zip(where, examples):
        expected.append(_expected_line(topic, offset, reference.predict_one(x), y))
        reference.learn_one(x, y)
    got = read_topic(kafka_bootstrap, preds, len(lines))
    assert [json.loads(m.value) for m in got] == expected
    assert [m.key for m in got] == [f"k{offset}".encode() for offset in where]
    assert model_of(ck).get_state() == reference.get_state()
    assert json.loads(ck.read_text())["positions"] == [
        {"source": topic, "partition": 0, "next_offset": len(values)}
    ]
