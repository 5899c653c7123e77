"""Benchmark suite of stream-perceptron: ``python -m benchmarks`` from the repository root.

Every row measures our figure and its anchor (River, scikit-learn, Vowpal Wabbit, or the same
command without the feature under test) in the same run, each as the median of a few repeats
interleaved with each other, and reports the ratio, which survives a noisy machine better than
the figures themselves. Goals are printed, never asserted. See ``benchmarks/README.md``.
"""

from __future__ import annotations

import os

# Before NumPy is imported: no figure here uses a multi-threaded BLAS, and OpenBLAS's idle
# threads spin for a while after each call on one of the two cores, which made the learner
# rows' loops share their two cores with them (`perf`: 35 % of the samples of a multi-class
# row's loop run after its data was generated). The CLI turns them off the same way; a value
# set is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
