"""Row 5: Kafka end to end, when a broker is given and the CLI has ``--source kafka``.

The CSV file of row 4 is produced to a fresh one-partition topic (header first, in a message
of its own), once with one record per message and once with 100 records per message (lines
joined by newlines). Each timed run consumes the whole topic with a fresh consumer group and
``--exit-at-end``; the anchor is the same file through stdin, timed in the same rounds.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import Context, Measure, Result, count, interleaved, median
from benchmarks.data import data_file
from benchmarks.procs import Run, cli_command, cli_help, run_command
from benchmarks.rows_stdin import check_summary

__all__ = ["row_kafka", "kafka_skip_reason"]

ENV = "KAFKA_BOOTSTRAP_SERVERS"
PER_MESSAGE = (1, 100)


def kafka_skip_reason() -> str | None:
    if not os.environ.get(ENV):
        return f"skipped: run with {ENV} set"
    text = cli_help("run")
    if "--source" not in text or "kafka" not in text or "--exit-at-end" not in text:
        return "skipped: the CLI has no --source kafka (with --exit-at-end) yet"
    return None


def _metrics_off() -> list[str]:
    """Metrics are on by default with Kafka; off here, to compare with stdin (no metrics)."""
    return ["--metrics-port", "-1"] if "-1: off" in cli_help("run") else []


def _produce(
    bootstrap: str, topic: str, path: Path, per_message: int, limit: int | None = None
) -> None:
    """``path``'s header line as the first message, then its records, ``per_message`` to a
    message (only the first ``limit`` records, if given)."""
    from kafka import KafkaProducer
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        # One partition, so that the header message comes first.
        options = {"num_partitions": 1, "replication_factor": 1}
        try:
            admin.create_topics({topic: options}, wait_for_metadata=True)  # kafka-python 3
        except TypeError:
            from kafka.admin import NewTopic  # kafka-python 2

            admin.create_topics([NewTopic(topic, **options)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50, batch_size=1 << 20, acks=1)
    with open(path, "rb") as f:
        producer.send(topic, f.readline().rstrip(b"\n"))
        pending: list[bytes] = []
        for i, line in enumerate(f):
            if limit is not None and i >= limit:
                break
            pending.append(line.rstrip(b"\n"))
            if len(pending) == per_message:
                producer.send(topic, b"\n".join(pending))
                pending = []
        if pending:
            producer.send(topic, b"\n".join(pending))
    producer.flush()
    producer.close()


def _delete_topics(bootstrap: str, topics: list[str]) -> None:
    from kafka.admin import KafkaAdminClient

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        try:
            admin.delete_topics(topics)
        finally:
            admin.close()
    except Exception:  # noqa: BLE001 (cleanup only)
        pass


def row_kafka(ctx: Context) -> list[Result]:
    names = [f"5{'ab'[i]}" for i in range(len(PER_MESSAGE))]
    what = [f"{k} record{'s' if k > 1 else ''} per message" for k in PER_MESSAGE]
    reason = kafka_skip_reason()
    if reason is not None:
        return [
            Result(row, f"Kafka end to end, CSV, {w}", Measure("ours", missing=reason))
            for row, w in zip(names, what)
        ]
    bootstrap = os.environ[ENV]
    n = ctx.sizes.kafka
    path = data_file(ctx, "csv", n)
    summary = ctx.workdir / "summary-kafka.json"
    run_id = uuid.uuid4().hex[:8]
    topics = [f"stream-perceptron-bench-{run_id}-{k}" for k in PER_MESSAGE]
    try:
        for topic, k in zip(topics, PER_MESSAGE):
            _produce(bootstrap, topic, path, k)

        metrics_off = _metrics_off()

        def consume(topic: str) -> Callable[[], Run]:
            def go() -> Run:
                group = f"stream-perceptron-bench-{uuid.uuid4().hex[:8]}"
                cmd = [
                    *cli_command(),
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
                    "csv",
                    "--exit-at-end",
                    "--kafka-client",
                    "kafka-python",  # as these rows always measured (5c-5e: each client)
                    *metrics_off,
                    "--summary-json",
                    str(summary),
                ]
                return run_command(cmd, summary_path=summary)

            return go

        stdin_cmd = [*cli_command(), "run", "--format", "csv", "--summary-json", str(summary)]
        runs: dict[str, Callable[[], Run]] = {
            "stdin": lambda: run_command(stdin_cmd, input_path=path, summary_path=summary)
        }
        runs.update({topic: consume(topic) for topic in topics})
        got = interleaved(ctx.repeats, runs)
    finally:
        _delete_topics(bootstrap, topics)
    stdin_rate = n / median([r.wall for r in got["stdin"]])
    results = []
    for row, w, topic in zip(names, what, topics):
        rate = n / median([r.wall for r in got[topic]])
        results.append(
            Result(
                row,
                f"Kafka end to end, `run --source kafka --kafka-client kafka-python --format csv`;"
                f" {count(n)} records, {w}",
                Measure("ours", rate, "records/s"),
                Measure("same CSV on stdin", stdin_rate, "lines/s"),
                rate / stdin_rate,
                ratio_text="x stdin",
                notes=[
                    f"one-partition topic on {bootstrap}; produced before timing; fresh group"
                    f" per run; CLI flags {' '.join(metrics_off) or '(default metrics)'}",
                    *check_summary(got[topic][-1], n),
                ],
            )
        )
    return results
