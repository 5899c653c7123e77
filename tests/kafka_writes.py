"""A broker test's records written to its topic: librdkafka's producer (confluent-kafka, C) where
it is installed, kafka-python's otherwise.

The product's clients are what the broker tests test (each test runs on both); this is only the
tests' feed, and it was a large share of their CPU: kafka-python's pure-Python producer took
2.6 s of CPU for 60k records of the shared-model tests (43 us a record), librdkafka's 0.44 s,
on a machine where ``make test`` is CPU-bound. Every message is acknowledged by the broker
(``acks=all``) and in order within its partition (idempotence), or the write raises.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import partial
from typing import Any

try:
    from confluent_kafka import KafkaException, Producer
except ImportError:  # the rdkafka extra not installed: kafka-python's producer
    Producer = None


@dataclass(frozen=True)
class Message:
    value: bytes | None
    key: bytes | None = None
    partition: int | None = None
    timestamp_ms: int | None = None
    #: another topic than the write's
    topic: str | None = None


def write(
    bootstrap: str, topic: str, messages: Iterable[Message], linger_ms: int = 5, **config: Any
) -> list[tuple[int, int]]:
    """Write ``messages`` to ``topic`` and wait until the broker has them all; their
    ``(partition, offset)``, in order. ``config``: librdkafka's names (``message.max.bytes``)."""
    batch = list(messages)
    if Producer is None:
        return _write_kafka_python(bootstrap, topic, batch, linger_ms)
    where: list[tuple[int, int] | None] = [None] * len(batch)
    failures: list[str] = []

    def delivered(i: int, err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(f"message {i}: {err}")
        else:
            where[i] = (msg.partition(), msg.offset())

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
        "linger.ms": linger_ms, **config,
    })  # fmt: skip
    for i, m in enumerate(batch):
        kwargs: dict[str, Any] = {"value": m.value, "key": m.key,
                                  "on_delivery": partial(delivered, i)}  # fmt: skip
        if m.partition is not None:
            kwargs["partition"] = m.partition
        if m.timestamp_ms is not None:
            kwargs["timestamp"] = m.timestamp_ms
        while True:
            try:
                producer.produce(m.topic or topic, **kwargs)
                break
            except BufferError:  # its queue is full: let it deliver some first
                producer.poll(0.1)
        producer.poll(0)
    left = producer.flush(120)
    if left or failures:
        raise KafkaException(f"{left} not delivered; {failures[:5]}")
    assert all(w is not None for w in where)
    return where  # type: ignore[return-value]


def _write_kafka_python(
    bootstrap: str, topic: str, batch: list[Message], linger_ms: int
) -> list[tuple[int, int]]:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=linger_ms,
                             max_request_size=4 << 20)  # fmt: skip
    try:
        futures = [producer.send(m.topic or topic, value=m.value, key=m.key, partition=m.partition,
                                 timestamp_ms=m.timestamp_ms)
                   for m in batch]  # fmt: skip
        producer.flush()
        return [(f.get().partition, f.get().offset) for f in futures]
    finally:
        producer.close()
