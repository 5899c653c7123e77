"""Shared test set-up: the tests/ folder is importable (helpers: cli_helpers, services, ...)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import os  # noqa: E402
from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from kafka_broker import BrokerError, broker_running, start_broker, stop_broker  # noqa: E402


@pytest.fixture(scope="session")
def kafka_bootstrap() -> Iterator[str]:
    """``"127.0.0.1:PORT"`` of a real broker: ``$KAFKA_BOOTSTRAP_SERVERS`` (an existing cluster),
    else one started by ``kafka/kafka-up.sh`` and stopped at the end if it was started here."""
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


@pytest.fixture(params=("kafka-python", "confluent-kafka"))
def kafka_client(request: pytest.FixtureRequest) -> str:
    """The Kafka client of a Kafka test (``--kafka-client``): each test asking for it runs once
    per client, against the real broker."""
    return request.param
