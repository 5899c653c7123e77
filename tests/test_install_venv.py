"""``scripts/install-venv.sh``: uv installs where it works, pip where it does not. The venv's
programs are stand-ins here that log how they were called (the real install is what every
``make test`` does first)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _program(path: Path, log: Path, code: int) -> None:
    path.write_text(f'#!/bin/sh\necho "$(basename "$0") $*" >> {log}\nexit {code}\n')
    path.chmod(0o755)


def _setup(tmp_path: Path, uv: int | None, pip_gets_uv: bool = False) -> tuple[Path, Path]:
    """A copy of the script (so no other venv's uv is found) and a venv of stand-ins."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "install-venv.sh", tmp_path / "scripts")
    venv, log = tmp_path / "venv", tmp_path / "calls.log"
    (venv / "bin").mkdir(parents=True)
    if uv is not None:
        _program(venv / "bin" / "uv", log, uv)
    getting_uv = f'[ "$5" = uv ] && printf "#!/bin/sh\\necho \\"uv \\$*\\" >> {log}\\n" > {venv}/bin/uv && chmod +x {venv}/bin/uv'  # noqa: E501
    python = venv / "bin" / "python"
    python.write_text(
        f'#!/bin/sh\necho "python $*" >> {log}\n'
        + (getting_uv + "\n" if pip_gets_uv else '[ "$5" = uv ] && exit 1\n')
        + "exit 0\n"
    )
    python.chmod(0o755)
    return venv, log


def _run(tmp_path: Path, venv: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PIP_FIND_LINKS"}
    return subprocess.run(
        ["bash", str(tmp_path / "scripts" / "install-venv.sh"), str(venv), "-e", ".[test]"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip


def test_uv_installs_and_pip_is_not_asked(tmp_path: Path) -> None:
    venv, log = _setup(tmp_path, uv=0)
    proc = _run(tmp_path, venv)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls == [f"uv pip install --quiet --python {venv}/bin/python -e .[test]"]


def test_uv_fetched_into_the_venv_when_missing(tmp_path: Path) -> None:
    venv, log = _setup(tmp_path, uv=None, pip_gets_uv=True)
    proc = _run(tmp_path, venv)
    assert proc.returncode == 0, proc.stderr
    calls = log.read_text().splitlines()
    assert calls == [
        "python -m pip install --quiet uv",
        f"uv pip install --quiet --python {venv}/bin/python -e .[test]",
    ]


def test_pip_installs_when_uv_fails(tmp_path: Path) -> None:
    venv, log = _setup(tmp_path, uv=1)
    proc = _run(tmp_path, venv)
    assert proc.returncode == 0, proc.stderr
    assert "uv failed; installing with pip" in proc.stderr
    calls = log.read_text().splitlines()
    assert calls[-1] == "python -m pip install --quiet --no-compile -e .[test]"


def test_pip_installs_when_uv_cannot_be_had(tmp_path: Path) -> None:
    venv, log = _setup(tmp_path, uv=None)
    proc = _run(tmp_path, venv)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == [
        "python -m pip install --quiet uv",
        "python -m pip install --quiet --no-compile -e .[test]",
    ]
