"""A model topic (or join changelog) a worker has just created is read only once the cluster's
metadata shows it: the broker answers the creation first, and a read at once failed with
"Unknown partition" (confluent-kafka, soak of session 37, beside two CPU hogs). The admin
calls are faked: what is tested is the order of the calls, not the broker."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.kafka.model_log import ModelLogBase


class _Created(ModelLogBase):
    """A log whose topic does not exist, whose creation succeeds, and whose metadata shows
    its partitions only after ``lag`` asks."""

    def __init__(self, lag: int) -> None:
        super().__init__(["127.0.0.1:9"], "model")
        self.calls: list[str] = []
        self._lag = lag

    def _admin(self) -> Any:
        return object()

    def _topics(self, admin: Any) -> set[str]:
        self.calls.append("topics")
        return {"events"}

    def _create_topic(self, admin: Any) -> bool:
        self.calls.append("create")
        return True

    def _partitions(self, admin: Any, topic: str | None = None) -> int | None:
        self.calls.append(f"partitions {topic or self.topic}")
        if topic is None and self._lag > 0:
            self._lag -= 1
            return None
        return 1 if topic is None else 3

    def _client_errors(self) -> tuple[type[BaseException], ...]:
        return ()


def test_a_created_model_topic_is_seen_in_the_metadata_before_ensure_returns(monkeypatch):
    monkeypatch.setattr("connectors.kafka.model_log.time.sleep", lambda s: None)
    log = _Created(lag=2)
    log.ensure()
    assert log.calls == ["topics", "create"] + ["partitions model"] * 3


def test_a_created_join_changelog_is_seen_in_the_metadata_before_it_returns(monkeypatch):
    monkeypatch.setattr("connectors.kafka.model_log.time.sleep", lambda s: None)
    log = _Created(lag=2)
    log.ensure_changelog("events")
    assert log.calls[-4:] == ["create"] + ["partitions model"] * 3


def test_metadata_that_never_shows_the_created_topic_is_an_error(monkeypatch):
    clock = iter(range(0, 1000, 5))
    monkeypatch.setattr("connectors.kafka.model_log.time.sleep", lambda s: None)
    monkeypatch.setattr("connectors.kafka.model_log.time.monotonic", lambda: next(clock))
    with pytest.raises(Exception, match="metadata did not show"):
        _Created(lag=10**6).ensure()
