"""Checkpoints: the file (:mod:`.store`) and the protocol that saves and commits
(:mod:`.coordinator`)."""

from __future__ import annotations

from stream_perceptron.checkpoint.coordinator import CheckpointCoordinator, RunState
from stream_perceptron.checkpoint.store import (
    Checkpoint,
    PositionKey,
    file_size,
    load_checkpoint,
    save_checkpoint,
)

__all__ = [
    "Checkpoint",
    "CheckpointCoordinator",
    "PositionKey",
    "RunState",
    "file_size",
    "load_checkpoint",
    "save_checkpoint",
]
