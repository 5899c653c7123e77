"""Shared-model mode's learning core: mixing learner states (iterative parameter mixing) and the
records workers exchange about them. Nothing here knows Kafka; the engine's shared-model
coordinator joins it to the model topic."""

from __future__ import annotations

from stream_perceptron.sharing.mixing import MixError, divergence, mix_states
from stream_perceptron.sharing.records import (
    Increment,
    Mixture,
    PartitionState,
    RecordFormatError,
)

__all__ = [
    "MixError",
    "Increment",
    "Mixture",
    "PartitionState",
    "RecordFormatError",
    "divergence",
    "mix_states",
]
