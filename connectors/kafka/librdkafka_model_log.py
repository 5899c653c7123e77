"""The confluent-kafka (librdkafka) adapter's model-log reader (the group source:
:mod:`connectors.kafka.librdkafka`; the producers: :mod:`connectors.kafka.librdkafka_producer`).
"""

from __future__ import annotations

import logging
from functools import partial
from typing import Any

from connectors.errors import ConnectorError
from connectors.kafka.common import make_client, merge_client_options, servers_text
from connectors.kafka.librdkafka import (
    CLIENT_DEFAULTS,
    REQUEST_TIMEOUT_S,
    is_fatal,
    rdkafka_errors,
    require_confluent_kafka,
)
from connectors.kafka.model_log import TOPIC_CONFIG, LogRecord, ModelLogBase

__all__ = ["RdKafkaModelLog"]

logger = logging.getLogger(__name__)


class RdKafkaModelLog(ModelLogBase):
    """The model topic through confluent-kafka.

    The parameters are those of :class:`~connectors.kafka.kafka_python.KafkaModelLog`, except
    that ``client_options`` are librdkafka consumer settings (the admin client takes the
    ``security.*``, ``sasl.*`` and ``ssl.*`` ones).

    Examples
    --------
    No connection is made before the first call; a topic is needed:

    >>> from connectors.kafka.model_log import ModelLog
    >>> isinstance(RdKafkaModelLog("h:9", "model"), ModelLog)
    True
    >>> RdKafkaModelLog("h:9", "")
    Traceback (most recent call last):
    ...
    connectors.errors.ConnectorError: topic must be a non-empty str, got ''
    """

    _tp: Any = None  # the topic's partition, once the reader is open
    _ends: Any = None  # a read_committed handle that never fetches: asked the stable end

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return rdkafka_errors()

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        config = {k: v for k, v in self._options.items()
                  if k.startswith(("security.", "sasl.", "ssl."))}  # fmt: skip
        config.update(CLIENT_DEFAULTS, **{"bootstrap.servers": servers_text(self._servers)})
        return make_client(lambda: AdminClient(config), "admin client", self._servers, ())

    def _topics(self, admin: Any) -> set[str]:
        return set(admin.list_topics(timeout=REQUEST_TIMEOUT_S).topics)

    def _create_topic(self, admin: Any) -> bool:
        from confluent_kafka.admin import NewTopic

        # replication -1: the cluster's default.replication.factor
        new = NewTopic(self.topic, self.create_partitions, -1, config=dict(TOPIC_CONFIG))
        try:
            admin.create_topics([new])[self.topic].result(REQUEST_TIMEOUT_S)
        except rdkafka_errors() as exc:
            if exc.args and exc.args[0].name() == "TOPIC_ALREADY_EXISTS":
                return False
            raise
        return True

    def _partitions(self, admin: Any, name: str | None = None) -> int | None:
        name = name or self.topic
        topic = admin.list_topics(name, timeout=REQUEST_TIMEOUT_S).topics.get(name)
        ok = topic is not None and topic.error is None
        return len(topic.partitions) if ok and topic.partitions else None

    def _cleanup_policy(self, admin: Any) -> str:
        from confluent_kafka.admin import ConfigResource, ResourceType

        resource = ConfigResource(ResourceType.TOPIC, self.topic)
        configs = admin.describe_configs([resource])[resource].result(REQUEST_TIMEOUT_S)
        return str(configs["cleanup.policy"].value)

    def _open(self) -> Any:
        ck = require_confluent_kafka()
        config = merge_client_options(
            {
                # the reader's fetch, waiting for new records of a quiet topic, holds the
                # broker connection: the end's query behind it waited up to 500 ms (the
                # default) in every read, 60 s of a one-worker run of 480k records
                "fetch.wait.max.ms": 20,
                "max.partition.fetch.bytes": 16 * 1024 * 1024,
                "fetch.max.bytes": 64 * 1024 * 1024,
                **CLIENT_DEFAULTS,
            },
            self._options,
            {
                "bootstrap.servers": servers_text(self._servers),
                "group.id": f"stream-perceptron-model-reader-{self.topic}",  # never joins
                "enable.auto.commit": False, "isolation.level": "read_committed",
                "enable.partition.eof": False,
            },
        )  # fmt: skip
        consumer = make_client(lambda: ck.Consumer(config), "consumer", self._servers,
                               rdkafka_errors())  # fmt: skip
        self._tp = ck.TopicPartition(self.topic, self.partition)
        start = self._next or ck.OFFSET_BEGINNING
        consumer.assign([ck.TopicPartition(self.topic, self.partition, start)])
        self._consumer = consumer
        # the ends are asked by handles that never fetch: behind the reader's own fetch (on its
        # connection), a query waited up to fetch.wait.max.ms, 11 ms a read on average
        self._latest, self._ends = (
            make_client(partial(ck.Consumer, c), "consumer", self._servers, rdkafka_errors())
            for c in ({**config, "isolation.level": "read_uncommitted"}, config))  # fmt: skip
        return consumer

    def _stable_end(self) -> int:
        self._consumer or self._open()
        # a read_committed consumer's watermark query answers the last stable offset
        _low, end = self._ends.get_watermark_offsets(self._tp, timeout=REQUEST_TIMEOUT_S)
        return int(end)

    def _high(self) -> int | None:
        _low, high = self._latest.get_watermark_offsets(self._tp, timeout=REQUEST_TIMEOUT_S)
        return int(high) if high is not None and high >= 0 else None

    def _position(self) -> int:
        (tp,) = self._consumer.position([self._tp])
        return int(tp.offset) if tp.offset >= 0 else 0  # nothing fetched yet: the start

    def read_fetched(self) -> list[tuple[bytes | None, bytes | None]]:
        """What librdkafka's own fetches (in its threads, every ``fetch.wait.max.ms`` while the
        reader is at the end) brought in since the last read, committed records only
        (``read_committed``), asking the broker nothing: a read around a commit cost a round
        trip for the end (3-5 ms, 0.8-1.3 s of a one-worker run of 3M records, row 17)."""
        if self._consumer is None:  # not open yet (or dropped by a failure): a full read
            return super().read_fetched()
        out, self._carry = self._carry, []
        with self._keeping(out):
            while True:
                got = self._take(self._consumer.consume(10_000, 0))
                out += got
                if len(got) < 10_000:
                    return out

    def _poll(self) -> list[tuple[bytes | None, bytes | None]]:
        # consume(n, timeout) waits for n messages or the timeout (asked for 10,000 with 200
        # left, a read took the whole timeout); poll() returns with the first message, and
        # consume(n, 0) takes what is already fetched.
        first = self._consumer.poll(0.2)
        messages = [] if first is None else [first]
        return self._take(messages + self._consumer.consume(10_000, 0))

    def _take(self, messages: list[Any]) -> list[tuple[bytes | None, bytes | None]]:
        """The records of ``messages`` (errors logged, fatal ones raised)."""
        out: list[tuple[bytes | None, bytes | None]] = []
        for message in messages:
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
                raise ConnectorError(f"reading {self.kind} {self.topic!r}: {error!r}")
            else:
                logger.warning("reading the model topic %r: %r", self.topic, error)
        return out

    def close(self) -> None:
        for consumer in (self._consumer, self._latest, self._ends):
            if consumer is not None:
                try:
                    consumer.close()
                except Exception as exc:  # noqa: BLE001 - confluent_kafka.KafkaException
                    logger.warning("closing the model-topic reader failed: %r", exc)
        self._consumer = self._latest = self._ends = None
