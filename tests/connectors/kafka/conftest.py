"""Fixtures for the Kafka connector tests: a real broker, topics, a producer."""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType

import pytest


def _load_kafka_broker() -> ModuleType:
    """Import ``tests/kafka_broker.py`` by path, as module ``kafka_broker``.

    Not through ``sys.path``: ``tests/connectors/`` would shadow the ``connectors`` package.
    """
    path = Path(__file__).resolve().parents[2] / "kafka_broker.py"
    spec = importlib.util.spec_from_file_location("kafka_broker", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["kafka_broker"] = module
    spec.loader.exec_module(module)
    return module


kafka_broker = sys.modules.get("kafka_broker") or _load_kafka_broker()
BrokerError = kafka_broker.BrokerError

Produce = Callable[..., list[tuple[int, int]]]


@pytest.fixture
def make_topic(kafka_bootstrap: str) -> Iterator[Callable[..., str]]:
    """Factory: ``make_topic(partitions=1)`` creates a uniquely named topic."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    created: list[str] = []

    def make(partitions: int = 1) -> str:
        name = f"test-{uuid.uuid4().hex[:12]}"
        admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})
        # kafka-python's wait_for_metadata gives up after 10 s: a soak beside two CPU hogs saw
        # a loaded broker (4 test processes, their workers, the outage tests' own brokers)
        # take longer to show a new topic's leaders
        admin.wait_for_topics([name], timeout_ms=60_000)
        created.append(name)
        return name

    yield make
    if created:
        admin.delete_topics(created)
    admin.close()


@pytest.fixture
def group_id() -> str:
    """A fresh consumer group name."""
    return f"group-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def produce(kafka_bootstrap: str) -> Iterator[Produce]:
    """Factory: ``produce(topic, values, keys=None, partition=None)``.

    Sends and flushes; returns ``(partition, offset)`` of every message.
    """
    from kafka.producer import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=5)

    def send(
        topic: str,
        values: Sequence[bytes],
        keys: Sequence[bytes | None] | None = None,
        partition: int | None = None,
    ) -> list[tuple[int, int]]:
        keys = keys if keys is not None else [None] * len(values)
        assert len(keys) == len(values)
        futures = [
            producer.send(topic, value=v, key=k, partition=partition) for v, k in zip(values, keys)
        ]
        producer.flush()
        return [(m.partition, m.offset) for m in (f.get(timeout=30) for f in futures)]

    yield send
    producer.close()
