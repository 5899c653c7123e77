"""The engine: the prequential loop (:mod:`.loop`), its block path (:mod:`.blocks`), the one
outcome path (:mod:`.outcomes`), the outputs it writes (:mod:`.outputs`) and the window of
recent examples the metrics read (:mod:`.window`)."""

from __future__ import annotations

from stream_perceptron.engine.loop import BLOCK_BATCH_SIZE, Engine
from stream_perceptron.engine.outcomes import BadRecordError, EngineError, Outcomes
from stream_perceptron.engine.outputs import Outputs
from stream_perceptron.engine.window import RecentWindow
from stream_perceptron.formats.base import LABEL_OUTSIDE_ENCODING

__all__ = [
    "BLOCK_BATCH_SIZE",
    "LABEL_OUTSIDE_ENCODING",
    "BadRecordError",
    "Engine",
    "EngineError",
    "Outcomes",
    "Outputs",
    "RecentWindow",
]
