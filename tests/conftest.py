"""Shared test set-up: the tests/ folder is importable (helpers: cli_helpers, services, ...)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
