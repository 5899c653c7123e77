"""Rows 5c-5f: Kafka as event streams are run: one record per message, a prediction per event to
a topic, with each Kafka client the CLI offers (``--kafka-client``), against bare consume+produce
loops of the same clients measured in the same run.

5c: 1 record per message with ``--predictions-topic``; 5d: the same without predictions; 5e:
100 records per message with ``--predictions-topic``. Each run consumes the whole topic with a
fresh group and ``--exit-at-end``; predictions go to a fresh topic per run. kafka-python runs on
a fifth of the records (it is some ten times slower; a rate is a rate), confluent-kafka on all.

5f (issue 43): 1 nested JSON record per message with ``--predictions-topic``, ``--format
jsonl`` and the default client (no ``--kafka-client``: confluent-kafka where it is installed;
the row is skipped otherwise), on 3/5 of the records (600k of 1M): row 15b's records,
``{"x": {20 of 200 names f0..f199 in random order, 4 decimals}, "y": 0/1}``, seeded and
labelled by the sign of a hidden linear function (``rows_shapes.sparse_chunks``). It measures
the engine's sparse block path (nested/sparse JSON read a block at a time); its anchor is the
confluent-kafka consume + produce loop of 5c on its own topic.

Each row's figure is the engine's rate (records over the engine's own elapsed time, from
``--summary-json``: what a long-running worker sustains), its ratio is against the client's bare
loop doing the same work with the same producer settings (5c: consume, produce one message per
record; 5d: consume only; 5e: consume, split each message into its records, produce one per
record), and its notes give the whole-process rate (start-up and group join included) and the
start-up time on its own (the same command on an empty topic).
"""

from __future__ import annotations

import os
import time
import uuid
from collections import deque
from collections.abc import Callable
from itertools import repeat

from benchmarks.common import Context, Measure, Result, count, interleaved, median
from benchmarks.data import data_file
from benchmarks.procs import Run, cli_command, cli_help, run_command
from benchmarks.rows_kafka import ENV, _delete_topics, _metrics_off, _produce, kafka_skip_reason
from benchmarks.rows_shapes import shape_file

__all__ = ["RECORDS_ENV", "row_kafka_events"]

#: Records of the Kafka rows instead of 1M (``--kafka-records``): a quick smoke run.
RECORDS_ENV = "BENCH_KAFKA_RECORDS"

_exhaust = deque(maxlen=0).extend

GOALS = {  # (row, client): goal in records/s
    ("5c", "confluent-kafka"): 150_000,
    ("5d", "confluent-kafka"): 200_000,
    ("5f", "confluent-kafka"): 150_000,
}

#: The client of ``--kafka-client auto`` (the default) when it is installed: row 5f's.
DEFAULT_CLIENT = "confluent-kafka"


def clients() -> list[str]:
    """The Kafka clients the CLI can use here."""
    names = ["kafka-python"]
    if "--kafka-client" in cli_help("run"):
        try:
            import confluent_kafka  # noqa: F401
        except ImportError:
            pass
        else:
            names.append("confluent-kafka")
    return names


def bare_loop(
    client: str, bootstrap: str, topic: str, n: int, out: str | None, split: bool = False
) -> float:
    """Records/s of the client's own consume loop over ``n`` records, producing one message
    per record to ``out`` (``None``: no producing), each message split into its lines first
    with ``split``: the ceiling a worker on this client can reach for that work. The
    producer has the sinks' settings (``acks=all``, linger 5 ms). Timed from the first
    message received, as the engine's rate is (start-up and group join are not the loop's)."""
    started: float | None = None
    seen = 0
    if client == "confluent-kafka":
        from confluent_kafka import Consumer, Message, Producer

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": uuid.uuid4().hex,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                # librdkafka stops fetching for fetch.queue.backoff.ms (default 1 s) once
                # queued.min.messages are waiting: on a fast drain that halves the rate.
                "fetch.queue.backoff.ms": 10,
            }
        )
        # The sink's settings (acks=all, linger.ms=5, a queue of a million messages, delivery
        # reports only for failures); no compression (librdkafka's default).
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "linger.ms": 5,
                "queue.buffering.max.messages": 1_000_000,
                "delivery.report.only.error": True,
            }
        )
        consumer.subscribe([topic])
        produce = producer.produce
        while seen < n:
            messages = consumer.consume(10_000, timeout=1.0)
            if not messages:
                continue
            if started is None:
                started = time.perf_counter()
            errors = list(map(Message.error, messages))
            if errors.count(None) != len(errors):
                messages = [m for m, e in zip(messages, errors) if e is None]
            values = list(map(Message.value, messages))
            if split:
                values = [line for v in values for line in v.split(b"\n") if line]
            seen += len(values)
            if out is None:
                continue
            while len(producer) + len(values) > 1_000_000:  # make room: no BufferError
                producer.poll(0.05)
            _exhaust(map(produce, repeat(out, len(values)), values))  # a C-level loop
            producer.poll(0)  # delivery reports (only failures) once per poll
        producer.flush()
        consumer.close()
    else:
        from kafka import KafkaConsumer, KafkaProducer

        kconsumer = KafkaConsumer(
            topic,
            bootstrap_servers=bootstrap,
            group_id=uuid.uuid4().hex,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )
        kproducer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
        while seen < n:
            for records in kconsumer.poll(timeout_ms=1000, max_records=10_000).values():
                if started is None:
                    started = time.perf_counter()
                for record in records:
                    lines = [x for x in record.value.split(b"\n") if x] if split \
                        else [record.value]  # fmt: skip
                    seen += len(lines)
                    if out is not None:
                        for line in lines:
                            kproducer.send(out, line)
        kproducer.flush()
        kconsumer.close()
        kproducer.close()
    assert started is not None
    return seen / (time.perf_counter() - started)


def row_kafka_events(ctx: Context) -> list[Result]:
    rows = {
        "5c": "1 record per message, predictions to a topic",
        "5d": "1 record per message, no predictions",
        "5e": "100 records per message, predictions to a topic",
        "5f": "1 nested JSON record per message (20 of 200 names), predictions to a topic",
    }
    reason = kafka_skip_reason()
    if reason is not None:
        return [
            Result(r, f"Kafka events, {w}", Measure("ours", missing=reason))
            for r, w in rows.items()
        ]
    bootstrap = os.environ[ENV]
    n_full = ctx.sizes.kafka
    run_id = uuid.uuid4().hex[:8]
    made: list[str] = []
    results: list[Result] = []
    offered = clients()
    if DEFAULT_CLIENT not in offered:
        results.append(Result("5f", f"Kafka events, {rows['5f']}", Measure(
            "ours", missing=f"skipped: {DEFAULT_CLIENT} is not installed (the default client"
            " would be kafka-python)")))  # fmt: skip
    try:
        for client in offered:
            n = n_full if client == "confluent-kafka" else n_full // 5
            path = data_file(ctx, "csv", n)
            single, hundred = (f"bench-ev-{run_id}-{client}-{k}" for k in (1, 100))
            _produce(bootstrap, single, path, 1)
            _produce(bootstrap, hundred, path, 100)
            made += [single, hundred]
            runs: dict[str, Callable[[], Run]] = {
                "5c": _consume(ctx, client, bootstrap, single, made, predictions=True),
                "5d": _consume(ctx, client, bootstrap, single, made, predictions=False),
                "5e": _consume(ctx, client, bootstrap, hundred, made, predictions=True),
            }
            # row: (input topic, its records, the bare loop's messages (a CSV topic's: the
            # header line too), produce?, split?)
            bare_work = {
                "5c": (single, n, n + 1, True, False), "5d": (single, n, n + 1, False, False),
                "5e": (hundred, n, n + 1, True, True),
            }  # fmt: skip
            if client == DEFAULT_CLIENT:
                n_nested = max(1, n_full * 3 // 5)
                nested = f"bench-ev-{run_id}-nested"
                # no header: _produce sends the first line as a message, i.e. record 1
                _produce(bootstrap, nested, shape_file(ctx, "sparse", "nested.jsonl", n_nested), 1)
                made.append(nested)
                runs["5f"] = _consume(ctx, None, bootstrap, nested, made, predictions=True,
                                      fmt="jsonl")  # fmt: skip
                bare_work["5f"] = (nested, n_nested, n_nested, True, False)
            empty = f"bench-ev-{run_id}-{client}-empty"
            _produce(bootstrap, empty, path, 1, limit=0)
            made.append(empty)
            runs["start-up"] = _consume(ctx, client, bootstrap, empty, made, predictions=False)
            got = interleaved(ctx.repeats, runs)
            start_up = median([r.wall for r in got["start-up"]])
            for row, what in rows.items():
                if row not in bare_work:
                    continue
                topic, n_row, messages, produces, split = bare_work[row]
                outs = []
                for _ in range(ctx.repeats):
                    outs.append(f"bench-ev-{run_id}-{client}-bare-{uuid.uuid4().hex[:6]}")
                    made.append(outs[-1])
                bare = median([
                    bare_loop(client, bootstrap, topic, messages, out if produces else None,
                              split)
                    for out in outs
                ])  # fmt: skip
                engine = median([_engine_rate(r, n_row) for r in got[row]])
                whole = n_row / median([r.wall for r in got[row]])
                goal = GOALS.get((row, client))
                loop = "consume + produce" if produces else "consume"
                if row == "5f":
                    command = f"`run --source kafka --format jsonl` (default client, {client})"
                    start_note = "the confluent-kafka CSV command on an empty topic"
                    accuracy = median([(r.summary or {}).get("accuracy", 0.0) for r in got[row]])
                    extra = [f"prequential accuracy {accuracy:.4f}; nested records as row 15b's"
                             " (20 of 200 names, random order, 4 decimals)"]  # fmt: skip
                else:
                    command = f"`run --source kafka --kafka-client {client}`"
                    start_note = "the same command on an empty topic"
                    extra = []
                results.append(
                    Result(
                        row,
                        f"Kafka events, {command}, {what}; {count(n_row)} records",
                        Measure(f"ours ({client}, engine rate)", engine, "records/s"),
                        Measure(f"bare {client} {loop} loop, same work", bare, "records/s"),
                        engine / bare,
                        ratio_text="x bare loop",
                        goal="" if goal is None else f">= {count(goal)} records/s",
                        met=None if goal is None else engine >= goal,
                        notes=[f"whole process {whole:,.0f} records/s (start-up and group join "
                               f"included); start-up alone {start_up:.2f} s ({start_note})",
                               f"one-partition topic on {bootstrap}; fresh group and output"
                               " topic per run; producers acks=all, linger 5 ms", *extra],
                    )
                )
    finally:
        _delete_topics(bootstrap, made)
    return results


def _engine_rate(run: Run, n: int) -> float:
    """Records/s over the engine's own elapsed time (its summary), else the wall time."""
    summary = run.summary or {}
    elapsed = summary.get("elapsed_seconds")
    records = summary.get("records", n)
    return records / elapsed if elapsed else n / run.wall


def _consume(ctx: Context, client: str | None, bootstrap: str, topic: str, made: list[str], *,
             predictions: bool, fmt: str = "csv") -> Callable[[], Run]:  # fmt: skip
    """A run of the CLI over ``topic``; ``client`` ``None``: the default client (no flag)."""
    summary = ctx.workdir / f"summary-events-{client or 'default'}-{fmt}.json"

    def go() -> Run:
        group = f"bench-ev-{uuid.uuid4().hex[:8]}"
        cmd = [*cli_command(), "run", "--source", "kafka", "--bootstrap-servers", bootstrap,
               "--topic", topic, "--group", group, "--format", fmt, "--exit-at-end",
               *_metrics_off(), "--summary-json", str(summary)]  # fmt: skip
        if client is not None:  # 5c-5e name it: auto would pick confluent-kafka
            cmd += ["--kafka-client", client]
        if predictions:
            out = f"bench-ev-out-{uuid.uuid4().hex[:8]}"
            made.append(out)
            cmd += ["--predictions-topic", out]
        return run_command(cmd, summary_path=summary)

    return go
