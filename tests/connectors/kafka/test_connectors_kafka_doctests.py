"""Run the docstring examples of the Kafka connector modules (no broker needed)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "connectors.kafka_common",
        "connectors.kafka_source",
        "connectors.kafka_sink",
        "connectors.kafka_client",
        "connectors.kafka_sink_base",
        "connectors.rdkafka_source",
        "connectors.rdkafka_sink",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
