"""What a test needs besides Python, as pytest markers (not a test module).

``make check`` runs every test that needs none of these (``-m "not kafka and not browser and
not services and not newer_python"``); ``make test`` runs them all. A test gets its marker
from the fixture it asks for (``kafka_bootstrap``: ``kafka``) or from its module's
``pytestmark``; the helpers that start a real part call :func:`require` first, so a test
that starts one without its marker fails at once, naming the marker it lacks, instead of
slipping into ``make check`` and failing there for want of a broker or a browser.
"""

from __future__ import annotations

#: marker -> what it means (registered by ``tests/conftest.py``)
NEEDS = {
    "kafka": "needs a real Kafka broker (the test command starts one on 127.0.0.1)",
    "browser": "drives the system Chromium through chromium-driver",
    "services": "runs a real Prometheus or Pushgateway server (Debian packages)",
    "newer_python": "runs tests on a newer CPython than the venv's (3.13 or 3.12, pyenv)",
}

#: the markers of the test running now in this process (set by an autouse fixture)
current: frozenset[str] | None = None
current_name = ""


def require(marker: str) -> None:
    """Fail unless the running test carries ``marker`` (outside a test: nothing to check)."""
    if marker not in NEEDS:
        raise ValueError(f"unknown need {marker!r}: one of {sorted(NEEDS)}")
    if current is not None and marker not in current:
        raise AssertionError(
            f"{current_name} starts what the {marker!r} marker stands for ({NEEDS[marker]}) "
            f"without that marker: add `pytestmark = pytest.mark.{marker}` to its module, or "
            "ask for the fixture that brings it"
        )
