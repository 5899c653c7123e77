"""Hypothesis profiles for the fuzzing suite: ``ci`` (the default, part of ``make test``) and
``nightly`` (``pytest tests/fuzz --hypothesis-profile=nightly``: 50x the examples)."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import HealthCheck, settings

sys.path.insert(0, str(Path(__file__).resolve().parent))

_common = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("ci", max_examples=60, **_common)
settings.register_profile("nightly", max_examples=3000, **_common)
settings.load_profile("ci")
