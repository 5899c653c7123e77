"""Helpers shared by the Kafka connector tests (not a test module)."""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import pytest

from connectors import KafkaSink, KafkaSource, RdKafkaSink, RdKafkaSource, Record, TopicPartitionKey

#: Consumer settings for tests: a lost member is noticed after 6 s, not 45 s.
FAST_GROUP: dict[str, Any] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 1000}


def in_client_naming(client: str, options: dict[str, Any]) -> dict[str, Any]:
    """kafka-python settings (``session_timeout_ms``...) in ``client``'s naming
    (``session.timeout.ms`` for confluent-kafka)."""
    if client == "kafka-python":
        return dict(options)
    return {name.replace("_", "."): value for name, value in options.items()}


def make_source(
    client: str, bootstrap: str, topics: list[str], group: str, **kwargs: Any
) -> KafkaSource | RdKafkaSource:
    """A group source of ``client``; ``client_options`` given in kafka-python's naming."""
    kwargs["client_options"] = in_client_naming(client, kwargs.get("client_options") or {})
    source_class = KafkaSource if client == "kafka-python" else RdKafkaSource
    return source_class(bootstrap, topics, group, **kwargs)


def make_sink(
    client: str, bootstrap: str, topic: str, client_options: dict[str, Any] | None = None
) -> KafkaSink | RdKafkaSink:
    """A topic sink of ``client``; ``client_options`` already in its naming."""
    sink_class = KafkaSink if client == "kafka-python" else RdKafkaSink
    return sink_class(bootstrap, topic, client_options=client_options)


def thread_stacks() -> str:
    """Every thread's stack, for a failure's evidence (a hang seen once in a soak shows where
    it waited)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame))
        for ident, frame in sys._current_frames().items()
    )


def collect(source: KafkaSource | RdKafkaSource, timeout: float = 60) -> list[Record]:
    """Every record of ``source.batches()`` (see :func:`collect_batches`)."""
    return [record for batch in collect_batches(source, timeout) for record in batch]


def collect_batches(source: KafkaSource | RdKafkaSource, timeout: float = 60) -> list[list[Record]]:
    """Every batch of ``source.batches()``, checking that none is empty.

    Iterates in a thread; if the iteration has not ended after ``timeout`` seconds, the
    source is closed and the test fails (instead of hanging).
    """
    batches: list[list[Record]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            for batch in source.batches():
                assert batch, "a source must never yield an empty batch"
                batches.append(batch)
        except BaseException as exc:  # noqa: BLE001 - re-raised below
            errors.append(exc)

    thread = threading.Thread(target=run, name="collect", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        stuck = thread_stacks()  # where it waits, before close() changes it
        source.close()
        thread.join(30)
        after = "ended" if not thread.is_alive() else "did not end either"
        pytest.fail(
            f"batches() of {source!r} did not end within {timeout:g} s (after close(): "
            f"{after}, {sum(map(len, batches))} records read); the threads then:"
            f"\n{stuck}"
        )
    if errors:
        raise errors[0]
    return batches


def triples(records: list[Record]) -> list[tuple[int | None, int, bytes]]:
    """``(partition, offset, value)`` of records."""
    return [(r.position.partition, r.position.offset, r.value) for r in records]


class Learner:
    """Mimics the engine: checkpoints next offsets, resumes from them, commits on revoke.

    Attributes
    ----------
    records : list of Record
        Every record handled, in order.
    next_offsets : dict
        Per partition, the offset after the last record handled (the "checkpoint").
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.next_offsets: dict[TopicPartitionKey, int] = {}
        self.assigned: list[list[TopicPartitionKey]] = []
        self.revoked: list[list[TopicPartitionKey]] = []
        self.commits: list[bool] = []
        self.threads: set[str] = set()
        self.source: KafkaSource | RdKafkaSource | None = None
        self.lock = threading.Lock()

    def handle(self, batch: list[Record]) -> None:
        with self.lock:
            for record in batch:
                self.records.append(record)
                key = (record.position.source, record.position.partition)
                self.next_offsets[key] = record.position.offset + 1  # type: ignore[assignment]

    def on_assign(self, partitions: list[TopicPartitionKey]) -> dict[TopicPartitionKey, int]:
        self.threads.add(threading.current_thread().name)
        self.assigned.append(partitions)
        with self.lock:
            return {p: self.next_offsets[p] for p in partitions if p in self.next_offsets}

    def on_revoke(self, partitions: list[TopicPartitionKey]) -> None:
        self.threads.add(threading.current_thread().name)
        self.revoked.append(partitions)
        assert self.source is not None
        with self.lock:
            offsets = {p: self.next_offsets[p] for p in partitions if p in self.next_offsets}
        self.commits.append(self.source.commit(offsets))


def wait_for(condition: Callable[[], bool], what: str, timeout: float = 60) -> None:
    """Poll ``condition`` every 50 ms; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Member:
    """A source consumed by a learner in a thread of its own."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        client_id: str,
        client: str = "kafka-python",
        **kwargs: Any,
    ) -> None:
        self.learner = Learner()
        self.source = make_source(
            client,
            bootstrap,
            [topic],
            group,
            on_assign=self.learner.on_assign,
            on_revoke=self.learner.on_revoke,
            client_options={**FAST_GROUP, "client_id": client_id},
            **kwargs,
        )
        self.learner.source = self.source
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=client_id)
        self.thread.start()

    def _run(self) -> None:
        try:
            for batch in self.source.batches():
                self.learner.handle(batch)
        except BaseException as exc:  # noqa: BLE001 - reported by stop()
            self.error = exc

    def stop(self) -> None:
        """Close the source, wait for the thread, re-raise what it raised."""
        self.source.close()
        self.thread.join(60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error
