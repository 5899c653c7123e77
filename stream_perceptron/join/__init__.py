"""``--join-key``: events joined to the outcomes that come after them (labels that come later).

:mod:`~stream_perceptron.join.pending` holds what waits, :mod:`~stream_perceptron.join.counts`
what the join counted, :mod:`~stream_perceptron.join.blocks` plans a block of records at once,
:mod:`~stream_perceptron.join.changelog` writes the store as keyed records and reads it back;
the engine's step is :mod:`stream_perceptron.engine.delayed` (a record) and
:mod:`stream_perceptron.engine.delayed_blocks` (a block).
"""

from __future__ import annotations

from stream_perceptron.join.counts import DELAY_BUCKETS, DELAY_SECONDS_BUCKETS, JoinCounts
from stream_perceptron.join.pending import Expired, PendingEvent, PendingJoin, PendingOutcome

__all__ = ["DELAY_BUCKETS",
    "DELAY_SECONDS_BUCKETS", "Expired", "JoinCounts", "PendingEvent", "PendingJoin",
           "PendingOutcome"]  # fmt: skip
