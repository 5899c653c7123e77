"""Fixtures for the Kafka connector tests: a real broker, topics, a producer."""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/, for kafka_broker

from kafka_broker import BrokerError, broker_running, start_broker, stop_broker  # noqa: E402

Produce = Callable[..., list[tuple[int, int]]]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: takes more than a minute")


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``"127.0.0.1:PORT"`` of a broker: ``$KAFKA_BOOTSTRAP_SERVERS``, else ``kafka-up.sh``.

    The broker is stopped at the end only if this fixture started it.
    """
    given = os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    if given:
        yield given
        return
    started_here = not broker_running()
    try:
        bootstrap = start_broker()
    except BrokerError as exc:
        pytest.fail(f"cannot start the test broker: {exc}")
    yield bootstrap
    if started_here:
        stop_broker()


@pytest.fixture
def make_topic(kafka_bootstrap: str) -> Iterator[Callable[..., str]]:
    """Factory: ``make_topic(partitions=1)`` creates a uniquely named topic."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap)
    created: list[str] = []

    def make(partitions: int = 1) -> str:
        name = f"test-{uuid.uuid4().hex[:12]}"
        admin.create_topics(
            {name: {"num_partitions": partitions, "replication_factor": 1}},
            wait_for_metadata=True,
        )
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
