"""KafkaSink against a real broker, and both connectors against kcat (librdkafka)."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from connectors_kafka_testutil import FAST_GROUP, collect, make_sink
from kafka_broker import free_port

from connectors import ConnectorError, KafkaSink, KafkaSource, Sink

pytestmark = pytest.mark.filterwarnings("ignore:(read|open)_text is deprecated:DeprecationWarning")

KCAT = shutil.which("kcat")
needs_kcat = pytest.mark.skipif(KCAT is None, reason="kcat is not on PATH (apt-get install kcat)")


def read_back(bootstrap: str, topic: str, count: int, timeout: float = 30) -> list[Any]:
    """The first ``count`` messages of partition 0 of ``topic``, read with kafka-python."""
    from kafka.consumer import KafkaConsumer
    from kafka.structs import TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        consumer.assign([TopicPartition(topic, 0)])
        consumer.seek_to_beginning()
        messages: list[Any] = []
        deadline = time.monotonic() + timeout
        while len(messages) < count and time.monotonic() < deadline:
            for batch in consumer.poll(timeout_ms=500).values():
                messages.extend(batch)
        return messages
    finally:
        consumer.close(autocommit=False)


def test_send_with_key_and_headers_arrives(
    kafka_bootstrap: str, make_topic: Callable[..., str], kafka_client: str
) -> None:
    topic = make_topic()
    with make_sink(kafka_client, kafka_bootstrap, topic) as sink:
        assert isinstance(sink, Sink)
        sink.send(b"v1", key=b"k1", headers=[("reason", b"bad"), ("n", b"1")])
        sink.write(b'{"prediction": 1}')
        sink.send(bytearray(b"v3"), key=b"k3")
        sink.flush()
    messages = read_back(kafka_bootstrap, topic, 3)
    assert [(m.offset, m.key, m.value) for m in messages] == [
        (0, b"k1", b"v1"),
        (1, None, b'{"prediction": 1}'),
        (2, b"k3", b"v3"),
    ]
    assert [list(m.headers) for m in messages] == [[("reason", b"bad"), ("n", b"1")], [], []]


def test_flush_raises_when_a_message_is_refused(
    kafka_bootstrap: str, make_topic: Callable[..., str], kafka_client: str
) -> None:
    topic = make_topic()
    # The client accepts 3 MB requests; the broker refuses messages over about 1 MB.
    large = (
        {"max_request_size": 3_000_000}
        if kafka_client == "kafka-python"
        else {"message.max.bytes": 3_000_000}
    )
    sink = make_sink(kafka_client, kafka_bootstrap, topic, client_options=large)
    with sink:
        sink.send(b"x" * 2_000_000)
        with pytest.raises(ConnectorError, match="1 message.* not delivered"):
            sink.flush()
        sink.send(b"small")
        sink.flush()  # failures are reported once
    assert [m.value for m in read_back(kafka_bootstrap, topic, 1)] == [b"small"]


def test_unreachable_broker_raises() -> None:
    sink = KafkaSink(
        f"127.0.0.1:{free_port()}", "nowhere", client_options={"bootstrap_timeout_ms": 1000}
    )
    with pytest.raises(ConnectorError, match="cannot create a Kafka producer"):
        sink.send(b"x")
        sink.flush()
    sink.close()


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda s: s.send("text"), "value must be bytes"),
        (lambda s: s.send(b"v", key="k"), "key must be bytes"),
        (lambda s: s.send(b"v", headers=[("h", "text")]), "headers"),
        (lambda s: s.send(b"v", headers=("h", b"v")), "headers"),
    ],
)
def test_invalid_sends_raise(call: Callable[[KafkaSink], None], match: str) -> None:
    sink = KafkaSink("127.0.0.1:9", "t")  # no connection is made for these
    with pytest.raises(ConnectorError, match=match):
        call(sink)
    sink.close()
    with pytest.raises(ConnectorError, match="closed"):
        sink.write(b"v")
    sink.close()


def test_invalid_arguments() -> None:
    with pytest.raises(ConnectorError, match="topic"):
        KafkaSink("h:1", "")
    with pytest.raises(ConnectorError, match="bootstrap_servers"):
        KafkaSink("h:1", "t", client_options={"bootstrap_servers": "x:1"})


@needs_kcat
def test_kcat_produces_kafka_source_consumes(
    kafka_bootstrap: str, make_topic: Callable[..., str], group_id: str
) -> None:
    topic = make_topic()
    assert KCAT is not None
    data = b"k1:a,1\r\nb,2|k2:c,3|k3:|k4:d,4\n"
    subprocess.run(
        [KCAT, "-b", kafka_bootstrap, "-P", "-t", topic, "-p", "0", "-K", ":", "-D", "|"],
        input=data,
        check=True,
        timeout=60,
        capture_output=True,
    )
    with KafkaSource(
        kafka_bootstrap, [topic], group_id, exit_at_end=True, client_options=FAST_GROUP
    ) as source:
        records = collect(source)
    assert [(r.key, r.position.offset, r.value) for r in records] == [
        (b"k1", 0, b"a,1"),
        (b"k1", 0, b"b,2"),
        (b"k2", 1, b"c,3"),
        (b"k3", 2, b""),
        (b"k4", 3, b"d,4"),
    ]


@needs_kcat
def test_kafka_sink_produces_kcat_consumes(
    kafka_bootstrap: str, make_topic: Callable[..., str]
) -> None:
    topic = make_topic()
    assert KCAT is not None
    with KafkaSink(kafka_bootstrap, topic) as sink:
        sink.send(b"one", key=b"k", headers=[("reason", b"r1")])
        sink.write(b"two")
    out = subprocess.run(
        [KCAT, "-b", kafka_bootstrap, "-C", "-t", topic, "-e", "-q", "-f", "%o|%k|%s|%h\n"],
        check=True,
        timeout=60,
        capture_output=True,
    ).stdout
    assert out.splitlines() == [b"0|k|one|reason=r1", b"1||two|"]
