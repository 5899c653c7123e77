"""What shared-model workers write about the model, as versioned JSON: per input partition its
state (next offset and counts), per worker what it learned between two commits (increments,
until a mixture holds them), and the numbered mixtures. Each record has a key, so a compacted
log keeps only the latest of each (an increment a mixture holds is deleted with a tombstone).

A record that does not parse (another program's, a future version's, a hostile one: too
large, nested too deep, non-finite numbers, wrong fields) raises :class:`RecordFormatError`
with a short ``reason``; readers count it by reason and skip it, never fold it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from stream_perceptron.errors import StreamPerceptronError
from stream_perceptron.state import NonFiniteNumberError, finite_float, no_constant

__all__ = [
    "KIND",
    "SCHEMA_VERSION",
    "Increment",
    "Mixture",
    "PartitionState",
    "RecordFormatError",
    "decode",
    "parse_increment_key",
    "parse_json",
]

KIND = "stream-perceptron-shared-model"
SCHEMA_VERSION = 1
MIXTURE_KEY = "mixture"
#: the largest record value read (the model topic's max.message.bytes plus its headroom)
MAX_RECORD_BYTES = 17 * 1024 * 1024
#: the largest record key read (worker ids, topic names and a number)
MAX_KEY_BYTES = 1024
#: the largest count in a record (a seq, an offset, examples): 2**63 - 1, Kafka's offsets
MAX_COUNT = 2**63 - 1


class RecordFormatError(StreamPerceptronError):
    """A model-topic record that is not one this release writes; ``reason``: a short
    machine-readable word (a metric label): ``too_large``, ``not_json``, ``foreign``,
    ``schema_version``, ``malformed``, ``non_finite``, ``bad_key``, ``mismatch``, ``stale``,
    ``implausible``, ``replayed``."""

    def __init__(self, message: str, reason: str = "malformed") -> None:
        super().__init__(message)
        self.reason = reason


def _count(data: dict[str, Any], name: str) -> int:
    value = data.get(name)
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise RecordFormatError(f"{name} is {_short(value)}, not a count")
    return value


def _text(data: dict[str, Any], name: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value or len(value) > MAX_KEY_BYTES:
        raise RecordFormatError(f"{name} is {_short(value)}, not a name")
    return value


def _state(data: dict[str, Any]) -> dict[str, Any]:
    value = data.get("state")
    if not isinstance(value, dict):
        raise RecordFormatError("state is not a learner state")
    return value


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def parse_json(value: bytes) -> Any:
    """``value`` as JSON, refusing what no worker writes: over ``MAX_RECORD_BYTES``, nesting
    deeper than the interpreter's recursion limit, NaN, infinities and numbers that overflow a
    float, integers of more than 4,300 digits, bytes that are not UTF-8.

    Examples
    --------
    >>> parse_json(b'{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> parse_json(b"[" * 100_000)
    Traceback (most recent call last):
    ...
    stream_perceptron.sharing.records.RecordFormatError: not JSON: nested too deep
    >>> parse_json(b'{"w": 1e400}')
    Traceback (most recent call last):
    ...
    stream_perceptron.sharing.records.RecordFormatError: the number 1e400 is not finite
    """
    if len(value) > MAX_RECORD_BYTES:
        raise RecordFormatError(f"{len(value)} bytes (at most {MAX_RECORD_BYTES})", "too_large")
    try:
        return json.loads(value, parse_float=finite_float, parse_constant=no_constant)
    except NonFiniteNumberError as e:  # the state files' parse hooks
        raise RecordFormatError(str(e), "non_finite") from None
    except RecursionError:
        raise RecordFormatError("not JSON: nested too deep", "not_json") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise RecordFormatError(f"not JSON: {e}", "not_json") from None


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
    #: the weights' and biases' change from the previous mixture, sparse, in the increments'
    #: encoding (``None``: not given): readers place the averaged increments made on an older
    #: mixture with it
    step: dict[str, Any] | None = None

    key = MIXTURE_KEY

    def encode(self) -> bytes:
        body = {
            "version": self.version,
            "worker": self.worker,
            "mixed_at": self.mixed_at,
            "state": self.state,
            "included": self.included,
        }
        if self.step is not None:
            body["step"] = self.step
        return _envelope("mixture", body)


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
    data = parse_json(value)
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise RecordFormatError("not a stream-perceptron shared-model record", "foreign")
    if data.get("schema_version") != SCHEMA_VERSION:
        raise RecordFormatError(
            f"schema_version {_short(data.get('schema_version'))} (this release reads "
            f"{SCHEMA_VERSION})", "schema_version"
        )  # fmt: skip
    kind = data.get("type")
    if kind == "partition":
        return PartitionState(
            _text(data, "topic"),
            _count(data, "partition"),
            _count(data, "next_offset"),
            _count(data, "n_seen"),
            _count(data, "n_mistakes"),
            _name(data.get("worker", "")),
        )
    stamp = data.get("published_at" if kind == "increment" else "mixed_at", 0.0)
    if not isinstance(stamp, (int, float)) or isinstance(stamp, bool):
        raise RecordFormatError(f"the time stamp is {_short(stamp)}")
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
            isinstance(w, str) and len(w) <= MAX_KEY_BYTES and type(s) is int
            and 0 <= s <= MAX_COUNT for w, s in included.items()
        ):
            raise RecordFormatError(f"included is {_short(included)}, not increments per worker")
        step = data.get("step")
        if step is not None and not (isinstance(step, dict) and isinstance(step.get("classes"),
                                                                           list)):  # fmt: skip
            raise RecordFormatError("step is not a mixture's change")
        return Mixture(_count(data, "version"), _state(data), _name(data.get("worker", "")),
                       float(stamp), dict(included), step)  # fmt: skip
    raise RecordFormatError(f"unknown record type {_short(kind)}", "foreign")


def _name(value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_KEY_BYTES:
        raise RecordFormatError(f"worker is {_short(value)}, not a name")
    return value


def parse_increment_key(key: bytes | None) -> tuple[str, int] | None:
    """``(worker, seq)`` of an increment's key; ``None`` for any other key.

    Raises
    ------
    RecordFormatError
        For a key that starts like an increment's but is not one (reason ``bad_key``).

    Examples
    --------
    >>> parse_increment_key(increment_key("w:0", 12).encode())
    ('w:0', 12)
    >>> parse_increment_key(b"mixture") is None
    True
    >>> parse_increment_key(b"increment:x:" + b"9" * 5000)
    Traceback (most recent call last):
    ...
    stream_perceptron.sharing.records.RecordFormatError: not an increment key: ...
    """
    if not key or not key.startswith(b"increment:"):
        return None
    if len(key) > MAX_KEY_BYTES:
        raise RecordFormatError(f"not an increment key: {len(key)} bytes", "bad_key")
    worker, _, seq = key[len(b"increment:"):].decode("utf-8", "replace").rpartition(":")
    if not (worker and seq.isascii() and seq.isdigit() and len(seq) <= 18):
        raise RecordFormatError(f"not an increment key: {_short(key)}", "bad_key")
    return worker, int(seq)
