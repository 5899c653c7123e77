"""The documentation site builds, strict (``make docs``), in every ``make test``.

A test rather than a step of the Makefile's test target: it runs beside the other tests on the
pytest-xdist workers instead of before them, in ``make check`` too (it needs no broker), and a
failure is reported like any other, with mkdocs' warnings. Broke it to watch it fail: a link to
a page that does not exist (``[x](nowhere.md)`` in docs/kafka.md), a page left out of the nav,
and a docstring section mkdocstrings cannot parse each fail the build (exit 1).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_site_builds_strict(tmp_path: Path):
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-5000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    # the reference is generated from the docstrings: a learner's numpydoc Parameters are there
    for name in ("Perceptron", "MulticlassPerceptron", "PassiveAggressive", "Preprocessed"):
        assert f'id="stream_perceptron.learners.{name}"' in api, name
    assert "Learning rate: the step of each update." in api
    # the live page's screenshot and the results table are in the site
    assert (tmp_path / "site" / "live-page.png").stat().st_size > 10_000
    results = (tmp_path / "site" / "results" / "index.html").read_text(encoding="utf-8")
    assert "<table>" in results
