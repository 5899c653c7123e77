"""Benchmark suite of stream-perceptron: ``python -m benchmarks`` from the repository root.

Every row measures our figure and its anchor (River, scikit-learn, Vowpal Wabbit, or the same
command without the feature under test) in the same run, each as the median of a few repeats
interleaved with each other, and reports the ratio, which survives a noisy machine better than
the figures themselves. Goals are printed, never asserted. See ``benchmarks/README.md``.
"""

from __future__ import annotations
