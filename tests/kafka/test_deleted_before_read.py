"""Records the broker deleted before a group read them (retention, or a deletion): a worker
that resumes below the partition's first kept offset says so, with the count it skips.

Found in session 24: the kill -9 join test wrote records stamped in 2023, the broker's retention
check deleted them in the middle of the test, and a resumed worker ended at once with nothing
read and not a word said. Nothing can keep records the broker has deleted; the warning is what
tells a user to look at the topic's retention.
"""

from __future__ import annotations

from cli_helpers import binary_examples, model_of, run_cli
from kafka import KafkaAdminClient, TopicPartition
from test_engine_kafka import _name, jsonl, kafka_args, make_topic, produce


def test_a_resume_below_the_first_kept_offset_is_reported_with_the_records_skipped(
    kafka_bootstrap, tmp_path, kafka_client
):
    examples = binary_examples(300, seed=4)
    topic, group, ck = make_topic(kafka_bootstrap), _name("group"), tmp_path / "ck.json"
    produce(kafka_bootstrap, topic, jsonl(examples[:100]))
    args = [*kafka_args(kafka_bootstrap, topic, group, client=kafka_client), "--exit-at-end",
            "--checkpoint", str(ck), "--resume"]  # fmt: skip
    first = run_cli(*args, timeout=60)
    assert first.returncode == 0, first.stderr.decode()
    assert "deleted" not in first.stderr.decode()

    produce(kafka_bootstrap, topic, jsonl(examples[100:]))
    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    try:
        admin.delete_records({TopicPartition(topic, 0): 160}, timeout_ms=10_000)
    finally:
        admin.close()

    resumed = run_cli(*args, timeout=60)
    err = resumed.stderr.decode()
    assert resumed.returncode == 0, err
    assert (f"{topic}[0]: resuming at offset 100, but the broker keeps offsets from 160 on: "
            "60 records were deleted") in err, err  # fmt: skip
    # what was kept is read: 100 before the deletion, 140 after it
    assert model_of(ck).n_seen == 240
