"""Command line: ``stream-perceptron run | inspect | example-data``.

:mod:`.main` builds the argument parser and dispatches; :mod:`.run` builds and runs the engine,
:mod:`.kafka` its Kafka source and sinks, :mod:`.inspect` shows a checkpoint.
"""

from __future__ import annotations

from stream_perceptron.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
