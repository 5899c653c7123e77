"""The learner and C-tier tests on a newer CPython than the venv's (3.13, else 3.12, from
pyenv): the dict API's C helpers must hold to the pure-Python reference, bit for bit, on every
CPython the package supports (issue #25). One test item, so that ``make test`` runs it beside
the others (pytest-xdist) rather than before them; ``scripts/test-newer-python.sh`` builds its
venv (``.venv313``) on first use and runs the selection there."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.newer_python


def test_learners_and_tiers_on_a_newer_python() -> None:
    proc = subprocess.run(
        [str(REPO / "scripts" / "test-newer-python.sh")],
        cwd=REPO, capture_output=True, text=True, timeout=1500, check=False,
    )  # fmt: skip
    out = proc.stdout + proc.stderr
    if "WARNING: no newer Python found" in out:
        pytest.skip("no newer Python found (pyenv 3.13 or 3.12, or NEWER_PYTHON): " + out[-300:])
    assert proc.returncode == 0, out[-6000:]
    print(out[-600:])
