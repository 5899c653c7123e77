"""The kafka-python transactional producer's delivery and request timeouts follow its
transaction timeout (as librdkafka's do), so a batch that a broker restart caught in flight
fails within one transaction timeout instead of holding the commit for kafka-python's 120 s.

Seen once (session 22's last `make test`, /work/evidence-22/outage-150s/w0.log): a worker's
commit waited on a model-topic batch until "120000 ms has passed since batch creation", a
2-minute stall after a 10 s outage. A targeted repro (a producer sending while the broker
stops, 6 tries) did not bring it back on demand, so this pins the setting that bounds it."""

from __future__ import annotations

import pytest
from kafka.producer.record_accumulator import RecordAccumulator

from connectors.errors import ConnectorError
from connectors.kafka.kafka_python_producer import KafkaTransactions
from connectors.kafka.transactions import TRANSACTION_TIMEOUT_MS


def _config(client_options=None) -> dict:
    out = KafkaTransactions("127.0.0.1:9", "timeouts", client_options=client_options)
    try:
        return dict(out._config)
    finally:
        out.close()


def _accepted_by_kafka_python(config: dict) -> None:
    keys = RecordAccumulator.DEFAULT_CONFIG.keys() & config.keys()
    RecordAccumulator(**{key: config[key] for key in keys})  # raises on delivery < linger+request


def test_a_transactions_batches_expire_within_the_transaction_timeout() -> None:
    config = _config()
    assert config["transaction_timeout_ms"] == TRANSACTION_TIMEOUT_MS
    assert config["delivery_timeout_ms"] <= TRANSACTION_TIMEOUT_MS
    assert config["request_timeout_ms"] <= TRANSACTION_TIMEOUT_MS - 100
    _accepted_by_kafka_python(config)


def test_the_bounds_follow_a_transaction_timeout_the_user_sets() -> None:
    config = _config({"transaction_timeout_ms": 60_000})
    assert config["delivery_timeout_ms"] == 60_000
    assert config["request_timeout_ms"] == 60_000 - 100 - config["linger_ms"]
    _accepted_by_kafka_python(config)


def test_timeouts_the_user_sets_are_kept() -> None:
    config = _config({"delivery_timeout_ms": 45_000, "request_timeout_ms": 20_000})
    assert (config["delivery_timeout_ms"], config["request_timeout_ms"]) == (45_000, 20_000)
    with pytest.raises(ConnectorError):
        _config({"enable_idempotence": False})  # reserved, as before
