"""The Kafka engine tests run with each Kafka client the CLI offers (``--kafka-client``)."""

from __future__ import annotations

import pytest

KAFKA_CLIENTS = ("kafka-python", "confluent-kafka")


@pytest.fixture(params=KAFKA_CLIENTS)
def kafka_client(request: pytest.FixtureRequest) -> str:
    """The ``--kafka-client`` of the test: each test asking for it runs once per client."""
    return request.param
