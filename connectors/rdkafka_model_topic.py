"""The compacted model topic of shared-model mode through confluent-kafka (librdkafka):
the :class:`~connectors.kafka_model_topic.ModelLog` of ``--kafka-client confluent-kafka``.

Same topic, same reads as :class:`~connectors.kafka_model_topic.KafkaModelLog`: one
partition, ``cleanup.policy=compact``, read ``read_committed`` from the start. librdkafka
answers a watermark query with the last stable offset for a ``read_committed`` consumer (the
read's end) and with the high watermark for a ``read_uncommitted`` one.
"""

from __future__ import annotations

import logging
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka_common import make_client, merge_client_options, servers_text
from connectors.kafka_model_topic import (
    TOPIC_CONFIG,
    LogRecord,
    ModelLogBase,
    check_model_topic,
    missing_model_topic,
)
from connectors.rdkafka_source import QUIET_LOGS, is_fatal, require_confluent_kafka

__all__ = ["RdKafkaModelLog"]

logger = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 10.0
_RESERVED = frozenset(
    {"bootstrap.servers", "group.id", "enable.auto.commit", "isolation.level",
     "enable.partition.eof"}
)  # fmt: skip
_SECURITY = ("security.", "sasl.", "ssl.")


class RdKafkaModelLog(ModelLogBase):
    """The model topic through confluent-kafka.

    The parameters are those of :class:`~connectors.kafka_model_topic.KafkaModelLog`, except
    that ``client_options`` are librdkafka consumer settings (the admin client takes the
    ``security.*``, ``sasl.*`` and ``ssl.*`` ones).

    Examples
    --------
    No connection is made before the first call; a topic is needed:

    >>> from connectors.kafka_model_topic import ModelLog
    >>> isinstance(RdKafkaModelLog("h:9", "model"), ModelLog)
    True
    >>> RdKafkaModelLog("h:9", "")
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: topic must be a non-empty str, got ''

    """

    _tp: Any = None  # the topic's partition, once the reader is open

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return (require_confluent_kafka().KafkaException,)

    def ensure(self, create: bool = True) -> None:
        ck = require_confluent_kafka()
        from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

        config = {k: v for k, v in self._options.items() if k.startswith(_SECURITY)}
        config.update(QUIET_LOGS, **{"bootstrap.servers": servers_text(self._servers)})
        admin = make_client(lambda: AdminClient(config), "admin client", self._servers, ())
        try:
            topics = admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics
            if self.topic not in topics:
                if not create:
                    raise missing_model_topic(self.topic)
                if self._create(ck, admin, NewTopic):
                    return

                def partitions_known() -> int | None:  # another worker is creating it
                    found = admin.list_topics(self.topic, timeout=REQUEST_TIMEOUT_S).topics
                    topic = found.get(self.topic)
                    return len(topic.partitions) if topic is not None and topic.error is None \
                        and topic.partitions else None  # fmt: skip

                partitions = self._wait_for_creation(partitions_known)
            else:
                partitions = len(topics[self.topic].partitions)
            resource = ConfigResource(ResourceType.TOPIC, self.topic)
            configs = admin.describe_configs([resource])[resource].result(REQUEST_TIMEOUT_S)
            check_model_topic(self.topic, partitions, configs["cleanup.policy"].value)
        except ck.KafkaException as exc:
            raise ConnectorError(f"cannot check the model topic {self.topic!r}: {exc!r}") from exc
        except KeyError as exc:
            raise ConnectorError(f"cannot check the model topic {self.topic!r}: {exc!r}") from exc

    def _create(self, ck: Any, admin: Any, new_topic: Any) -> bool:
        """Create the topic; False when another worker was first."""
        # replication -1: the cluster's default.replication.factor
        new = new_topic(self.topic, 1, -1, config=dict(TOPIC_CONFIG))
        try:
            admin.create_topics([new])[self.topic].result(REQUEST_TIMEOUT_S)
        except ck.KafkaException as exc:
            if exc.args and exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
                return False
            raise
        self._created()
        return True

    def _open(self) -> Any:
        ck = require_confluent_kafka()
        config = merge_client_options(
            {
                "reconnect.backoff.max.ms": 5000,
                # the reader's fetch, waiting for new records of a quiet topic, holds the
                # broker connection: the end's query behind it waited up to 500 ms (the
                # default) in every read, 60 s of a one-worker run of 480k records
                "fetch.wait.max.ms": 20,
                "max.partition.fetch.bytes": 16 * 1024 * 1024,
                "fetch.max.bytes": 64 * 1024 * 1024,
                **QUIET_LOGS,
            },
            self._options,
            _RESERVED,
        )
        config.update(
            {
                "bootstrap.servers": servers_text(self._servers),
                "group.id": f"stream-perceptron-model-reader-{self.topic}",  # never joins
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": False,
            }
        )
        consumer = make_client(
            lambda: ck.Consumer(config), "consumer", self._servers, (ck.KafkaException,)
        )
        self._tp = ck.TopicPartition(self.topic, 0)
        start = self._next or ck.OFFSET_BEGINNING
        consumer.assign([ck.TopicPartition(self.topic, 0, start)])
        self._consumer = consumer
        latest = {**config, "isolation.level": "read_uncommitted"}
        self._latest = make_client(
            lambda: ck.Consumer(latest), "consumer", self._servers, (ck.KafkaException,)
        )
        return consumer

    def _stable_end(self) -> int:
        consumer = self._consumer or self._open()
        # a read_committed consumer's watermark query answers the last stable offset
        _low, end = consumer.get_watermark_offsets(self._tp, timeout=REQUEST_TIMEOUT_S)
        return int(end)

    def _high(self) -> int | None:
        _low, high = self._latest.get_watermark_offsets(self._tp, timeout=REQUEST_TIMEOUT_S)
        return int(high) if high is not None and high >= 0 else None

    def _position(self) -> int:
        (tp,) = self._consumer.position([self._tp])
        return int(tp.offset) if tp.offset >= 0 else 0  # nothing fetched yet: the start

    def _poll(self) -> list[tuple[bytes | None, bytes | None]]:
        out: list[tuple[bytes | None, bytes | None]] = []
        # consume(n, timeout) waits for n messages or the timeout: asked for 10,000 with 200
        # left, every read of the model topic took the whole timeout (a worker spent 8 of
        # its 10 s there, 30 reads). poll() returns with the first message; consume(n, 0)
        # then takes what is already fetched.
        first = self._consumer.poll(0.2)
        messages = [] if first is None else [first]
        for message in messages + self._consumer.consume(10_000, 0):
            error = message.error()
            if error is None:
                out.append(LogRecord(message.key(), message.value(), message.headers()))
                self._next = message.offset() + 1
            elif error.name() == "GROUP_AUTHORIZATION_FAILED":
                # the reader's group id is one librdkafka insists on: it never joins or
                # commits, so a principal needs no ACL on it (librdkafka still looks up its
                # coordinator, which an authorizer refuses; the fetches do not need it)
                logger.debug("reading the model topic %r: %r (ignored)", self.topic, error)
            elif is_fatal(error):
                raise ConnectorError(f"reading the model topic {self.topic!r}: {error!r}")
            else:
                logger.warning("reading the model topic %r: %r", self.topic, error)
        return out

    def close(self) -> None:
        for consumer in (self._consumer, self._latest):
            if consumer is not None:
                try:
                    consumer.close()
                except Exception as exc:  # noqa: BLE001 - confluent_kafka.KafkaException
                    logger.warning("closing the model-topic reader failed: %r", exc)
        self._consumer = self._latest = None
