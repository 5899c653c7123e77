"""Run the docstring examples of the Kafka connector modules (no broker needed)."""

from __future__ import annotations

import doctest
import importlib

import pytest


@pytest.mark.parametrize(
    "name",
    [
        "connectors.kafka.common",
        "connectors.kafka.kafka_python",
        "connectors.kafka.kafka_python_internals",
        "connectors.kafka.kafka_python_logs",
        "connectors.kafka.kafka_python_producer",
        "connectors.kafka.librdkafka",
        "connectors.kafka.librdkafka_producer",
        "connectors.kafka.model_log",
        "connectors.kafka.poll_units",
        "connectors.kafka.topic_sink",
    ],
)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
