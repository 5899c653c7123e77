"""Shared-model mode's connectors on a real broker, with each client: the model topic
(:class:`ModelLog`) and the transactional producer (:class:`TransactionalOutput`)."""

from __future__ import annotations

import time
import uuid

import pytest

from connectors import ConnectorError
from connectors.kafka_model_topic import KafkaModelLog, ModelLog
from connectors.kafka_transactions import KafkaTransactions, TransactionalOutput
from connectors.rdkafka_model_topic import RdKafkaModelLog
from connectors.rdkafka_transactions import RdKafkaTransactions

LOGS = {"kafka-python": KafkaModelLog, "confluent-kafka": RdKafkaModelLog}
TRANSACTIONS = {"kafka-python": KafkaTransactions, "confluent-kafka": RdKafkaTransactions}


def _topic_config(bootstrap: str, topic: str) -> tuple[int, dict[str, str]]:
    """Partitions and settings of ``topic``, read with kafka-python's admin client."""
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (described,) = admin.describe_topics([topic])
        described_configs = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, topic)]
        )
    finally:
        admin.close()
    configs = {k: c["value"] for k, c in described_configs["topic"][topic].items()}
    return len(described["partitions"]), configs


def test_model_log_and_transactions(kafka_bootstrap, kafka_client):
    topic = f"test-model-{uuid.uuid4().hex[:12]}"
    log = LOGS[kafka_client](kafka_bootstrap, topic)
    txn_id = f"test-txn-{uuid.uuid4().hex[:12]}"
    out = TRANSACTIONS[kafka_client](kafka_bootstrap, txn_id)
    fencer = TRANSACTIONS[kafka_client](kafka_bootstrap, txn_id)
    assert isinstance(log, ModelLog) and isinstance(out, TransactionalOutput)
    try:
        log.ensure()
        log.ensure()  # there already: nothing to do
        partitions, configs = _topic_config(kafka_bootstrap, topic)
        assert (partitions, configs["cleanup.policy"], configs["segment.ms"]) == (
            1, "compact", "600000"
        )  # fmt: skip
        out.start()
        out.send(topic, b"v1", b"k1")
        out.commit({}, None)
        assert log.read_new() == [(b"k1", b"v1")]
        # aborted: never seen; open: hides what follows until it ends (up to stable_wait_s)
        out.send(topic, b"v2", b"k2")
        out.abort()
        out.send(topic, b"v3", b"k3", [("h", b"x")])
        time.sleep(1.0)  # delivered, not committed
        log.stable_wait_s = 1.5
        started = time.monotonic()
        assert log.read_new() == []
        assert time.monotonic() - started >= 1.5  # it waited for the open transaction
        out.commit({}, None)
        assert log.read_new() == [(b"k3", b"v3")]
        # a producer of the same id fences the former one and aborts its open transaction
        out.send(topic, b"v4", b"k4")
        time.sleep(1.0)
        fencer.start()
        started = time.monotonic()
        assert log.read_new() == []
        assert time.monotonic() - started < 1.5  # aborted: nothing open to wait for
        with pytest.raises(ConnectorError):
            out.commit({}, None)
        fencer.send(topic, b"v5", b"k5")
        fencer.commit({}, None)
        assert log.read_new() == [(b"k5", b"v5")]
    finally:
        out.close()
        fencer.close()
        log.close()
    # a new reader reads the whole log from the start
    again = LOGS[kafka_client](kafka_bootstrap, topic)
    try:
        assert again.read_new() == [(b"k1", b"v1"), (b"k3", b"v3"), (b"k5", b"v5")]
    finally:
        again.close()
