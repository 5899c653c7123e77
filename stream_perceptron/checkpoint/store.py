"""The checkpoint file: the model, the stream positions it has learned up to, the run's counters
and the sizes of its file outputs, as versioned JSON written atomically."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from connectors import PositionKey
from stream_perceptron.checkpoint.inputs import valid
from stream_perceptron.errors import StateError
from stream_perceptron.learners import StreamClassifier
from stream_perceptron.state import MAX_COUNT, read_json, write_json_atomic
from stream_perceptron.stats import RunStats

__all__ = ["Checkpoint", "PositionKey", "file_size", "load_checkpoint", "save_checkpoint"]

CHECKPOINT_KIND = "stream-perceptron-checkpoint"
#: Version 2 added ``inputs``: each input file's identity (``checkpoint/inputs.py``). A version 1
#: checkpoint still loads (with no identities: its input is matched as a file by its name).
CHECKPOINT_VERSION = 2
#: Version 3 added ``join``: the pending events and outcomes of ``--join-key``
#: (``join/pending.py``). Only a checkpoint that holds them is written as version 3, so one
#: without stays readable by the releases that read version 2 (which would drop them unread).
JOIN_VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)



@dataclass
class Checkpoint:
    """Everything needed to continue a run as if it had never stopped."""

    model: StreamClassifier
    next_offsets: dict[PositionKey, int] = field(default_factory=dict)
    stats: dict[str, Any] | None = None
    outputs: dict[str, int] = field(default_factory=dict)  # output path -> size at checkpoint
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # source name -> identity
    join: dict[str, Any] | None = None  # --join-key: PendingJoin.get_state()

    def to_json(self) -> dict[str, Any]:
        join = {} if self.join is None else {"join": self.join}
        return {
            "kind": CHECKPOINT_KIND,
            "schema_version": CHECKPOINT_VERSION if self.join is None else JOIN_VERSION,
            "saved_at": time.time(),
            "model": self.model.get_state(),
            "positions": [
                {"source": s, "partition": p, "next_offset": n}
                for (s, p), n in sorted(self.next_offsets.items(), key=repr)
            ],
            "stats": self.stats,
            "outputs": self.outputs,
            "inputs": self.inputs,
            **join,
        }

    @classmethod
    def from_json(cls, data: Any) -> Checkpoint:
        if not isinstance(data, dict) or data.get("kind") != CHECKPOINT_KIND:
            raise StateError("not a stream-perceptron checkpoint")
        if data.get("schema_version") not in _READABLE_VERSIONS:
            raise StateError(
                f"checkpoint schema_version {data.get('schema_version')!r} is not one of "
                f"{_READABLE_VERSIONS}, the versions this release reads"
            )
        try:
            model = StreamClassifier.from_state(data["model"])
        except StateError as e:  # it names the field
            raise StateError(f"corrupt checkpoint: model: {e}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as e:
            raise StateError(f"corrupt checkpoint: its model does not load: {e!r}") from e
        positions = _field(data, "positions", list)
        next_offsets: dict[PositionKey, int] = {}
        for p in positions:
            if not isinstance(p, dict):
                raise StateError(f"corrupt checkpoint: a position is {p!r}")
            source, partition = p.get("source"), p.get("partition")
            if not isinstance(source, str) or not (
                partition is None or _is_count(partition)
            ):
                raise StateError(f"corrupt checkpoint: a position is {p!r}")
            if (source, partition) in next_offsets:  # which one would the run start from?
                raise StateError(f"corrupt checkpoint: the position of {source!r} partition "
                                 f"{partition} is there twice")  # fmt: skip
            next_offsets[(source, partition)] = _count(p.get("next_offset"), "next_offset")
        stats = data.get("stats")
        if stats is not None:
            try:  # StateError for anything it cannot hold (its drift states too)
                RunStats().load_state(stats, model)
            except StateError as e:
                raise StateError(f"corrupt checkpoint: stats: {e}") from None
        outputs = _field(data, "outputs", dict, default={})
        inputs = _field(data, "inputs", dict, default={})  # version 1: none
        for name, entry in inputs.items():
            if not valid(entry):
                raise StateError(f"corrupt checkpoint: the input {name!r} is {entry!r}")
        join = _field(data, "join", dict, default={}) or None
        if join is not None:
            from stream_perceptron.join import PendingJoin

            try:
                PendingJoin(1, 0).load_state(join)  # checked here; the run loads it again
            except StateError as e:
                raise StateError(f"corrupt checkpoint: {e}") from None
        return cls(
            model=model,
            next_offsets=next_offsets,
            stats=stats,
            outputs={str(k): _count(v, f"the size of {k}") for k, v in outputs.items()},
            inputs=inputs,
            join=join,
        )


def _is_count(value: Any) -> bool:
    return type(value) is int and 0 <= value <= MAX_COUNT


def _count(value: Any, what: str) -> int:
    if not _is_count(value):
        raise StateError(f"corrupt checkpoint: {what} is {value!r}, not a count")
    return int(value)


def _field(data: dict[str, Any], name: str, kind: type, default: Any = None) -> Any:
    value = data.get(name, default)
    if not isinstance(value, kind):
        raise StateError(f"corrupt checkpoint: {name} is {value!r}")
    return value


def save_checkpoint(path: str, checkpoint: Checkpoint) -> None:
    """Write the checkpoint atomically (temp file, fsync, rename)."""
    write_json_atomic(path, checkpoint.to_json())


def load_checkpoint(path: str) -> Checkpoint:
    """Read a checkpoint written by :func:`save_checkpoint`."""
    return Checkpoint.from_json(read_json(path))


def file_size(path: str) -> int:
    """Size of a file (0 when it does not exist)."""
    try:
        return os.path.getsize(path)
    except FileNotFoundError:
        return 0
