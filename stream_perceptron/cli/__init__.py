"""Command line: ``stream-perceptron run | inspect | example-data``.

:mod:`.main` builds the argument parser and dispatches; :mod:`.run` builds and runs the engine,
:mod:`.kafka` its Kafka source and sinks, :mod:`.inspect` shows a checkpoint.
"""

from __future__ import annotations

import os

# Before NumPy is imported: the command does no BLAS work (its kernels are the package's own C),
# and OpenBLAS's pool of threads would only spin beside the CSV scanner's helper thread (13 % of
# a 1M-line run's CPU samples on two cores). A value the user set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from stream_perceptron.cli._gc import imports_without_gc  # noqa: E402

with imports_without_gc():
    from stream_perceptron.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
