"""What shared-model workers write about the model, as versioned JSON: per input partition its
state (next offset and counts), per worker what it learned between two commits (increments,
until a mixture holds them), and the numbered mixtures. Each record has a key, so a compacted
log keeps only the latest of each (an increment a mixture holds is deleted with a tombstone).

A record that does not parse (another program's, a future version's) raises
:class:`RecordFormatError`; readers count and skip it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from stream_perceptron.errors import StreamPerceptronError

__all__ = [
    "KIND",
    "SCHEMA_VERSION",
    "Increment",
    "Mixture",
    "PartitionState",
    "RecordFormatError",
    "decode",
]

KIND = "stream-perceptron-shared-model"
SCHEMA_VERSION = 1
MIXTURE_KEY = "mixture"


class RecordFormatError(StreamPerceptronError):
    """A model-topic record that is not one this release writes."""


def _count(data: dict[str, Any], name: str) -> int:
    value = data.get(name)
    if type(value) is not int or value < 0:
        raise RecordFormatError(f"{name} is {value!r}, not a count")
    return value


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise RecordFormatError(f"{name} is {value!r}, not a name")
    return value


def _state(data: dict[str, Any]) -> dict[str, Any]:
    value = data.get("state")
    if not isinstance(value, dict):
        raise RecordFormatError("state is not a learner state")
    return value


def _envelope(record_type: str, body: dict[str, Any]) -> bytes:
    payload = {"kind": KIND, "schema_version": SCHEMA_VERSION, "type": record_type, **body}
    return json.dumps(payload, separators=(",", ":")).encode()


@dataclass(frozen=True)
class PartitionState:
    """One input partition's state: the first offset not yet processed, and the labelled
    examples learned from it and the mistakes made on them, since the stream began."""

    topic: str
    partition: int
    next_offset: int
    n_seen: int = 0
    n_mistakes: int = 0
    worker: str = ""

    @property
    def key(self) -> str:
        return f"partition:{self.topic}:{self.partition}"

    def encode(self) -> bytes:
        return _envelope(
            "partition",
            {
                "topic": self.topic,
                "partition": self.partition,
                "next_offset": self.next_offset,
                "n_seen": self.n_seen,
                "n_mistakes": self.n_mistakes,
                "worker": self.worker,
            },
        )


@dataclass(frozen=True)
class Increment:
    """What a worker learned between two of its commits (:class:`~stream_perceptron.sharing.
    increments.Form`, encoded), numbered ``seq`` per worker, learned on top of the mixture
    numbered ``base_version``; ``meta``: its learner state without the weights (learner,
    hyperparameters, label encoding, norm). Once a mixture holds it, it is deleted (a
    tombstone on its key)."""

    worker: str
    seq: int
    base_version: int
    delta: dict[str, Any]
    meta: dict[str, Any]
    published_at: float = field(default_factory=time.time)

    @property
    def key(self) -> str:
        return increment_key(self.worker, self.seq)

    @property
    def examples(self) -> int:
        return int(self.delta.get("n", 0))

    def encode(self) -> bytes:
        return _envelope(
            "increment",
            {
                "worker": self.worker,
                "seq": self.seq,
                "base_version": self.base_version,
                "published_at": self.published_at,
                "meta": self.meta,
                "delta": self.delta,
            },
        )


def increment_key(worker: str, seq: int) -> str:
    """The model-topic key of a worker's increment ``seq``."""
    return f"increment:{worker}:{seq}"


@dataclass(frozen=True)
class Mixture:
    """A mixed model, numbered: version 0 is the empty model, each mix adds one to the largest
    version it mixed. ``included``: per worker, the ``seq`` of its latest increment the
    mixture holds (it holds every earlier one too)."""

    version: int
    state: dict[str, Any]
    worker: str = ""
    mixed_at: float = field(default_factory=time.time)
    included: dict[str, int] = field(default_factory=dict)

    key = MIXTURE_KEY

    def encode(self) -> bytes:
        return _envelope(
            "mixture",
            {
                "version": self.version,
                "worker": self.worker,
                "mixed_at": self.mixed_at,
                "state": self.state,
                "included": self.included,
            },
        )


def decode(value: bytes | None) -> PartitionState | Increment | Mixture:
    """The record a model-topic message holds.

    Raises
    ------
    RecordFormatError
        If it is not JSON of this kind and schema version, or a field is wrong.

    Examples
    --------
    >>> decode(PartitionState("events", 2, 10, 9, 3, "w0").encode())
    PartitionState(topic='events', partition=2, next_offset=10, n_seen=9, n_mistakes=3, worker='w0')
    >>> decode(b"hello")
    Traceback (most recent call last):
    ...
    stream_perceptron.sharing.records.RecordFormatError: not JSON: ...

    """
    if value is None:
        raise RecordFormatError("a tombstone (no value)")
    try:
        data = json.loads(value)
    except (ValueError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"not JSON: {e}") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise RecordFormatError("not a stream-perceptron shared-model record")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise RecordFormatError(
            f"schema_version {data.get('schema_version')!r} (this release reads {SCHEMA_VERSION})"
        )
    kind = data.get("type")
    if kind == "partition":
        return PartitionState(
            _text(data, "topic"),
            _count(data, "partition"),
            _count(data, "next_offset"),
            _count(data, "n_seen"),
            _count(data, "n_mistakes"),
            str(data.get("worker", "")),
        )
    stamp = data.get("published_at" if kind == "increment" else "mixed_at", 0.0)
    if not isinstance(stamp, (int, float)):
        raise RecordFormatError(f"the time stamp is {stamp!r}")
    if kind == "increment":
        delta, meta = data.get("delta"), data.get("meta")
        if not isinstance(delta, dict) or not isinstance(delta.get("classes"), list):
            raise RecordFormatError("delta is not an increment")
        if not isinstance(meta, dict) or not isinstance(meta.get("learner"), str):
            raise RecordFormatError("meta is not a learner description")
        _count(delta, "n")
        return Increment(
            _text(data, "worker"),
            _count(data, "seq"),
            _count(data, "base_version"),
            delta,
            meta,
            float(stamp),
        )
    if kind == "mixture":
        included = data.get("included", {})
        if not isinstance(included, dict) or not all(
            isinstance(w, str) and type(s) is int for w, s in included.items()
        ):
            raise RecordFormatError(f"included is {included!r}, not increments per worker")
        return Mixture(_count(data, "version"), _state(data), str(data.get("worker", "")),
                       float(stamp), dict(included))  # fmt: skip
    raise RecordFormatError(f"unknown record type {kind!r}")
