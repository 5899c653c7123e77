"""``scripts/compile_bytecode.py``: the install's bytecode, compiled one process a core."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "compile_bytecode.py"
_spec = importlib.util.spec_from_file_location("compile_bytecode", SCRIPT)
assert _spec is not None and _spec.loader is not None
compile_bytecode = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(compile_bytecode)


def _site(tmp_path: Path) -> Path:
    site = tmp_path / "site-packages"
    for pkg, files in {"big": 6, "mid": 3, "small": 1, "tiny": 1}.items():
        for i in range(files):
            path = site / pkg / "sub" / f"m{i}.py"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(f"X = {'1 + ' * 200 * files}0\n")
    (site / "single.py").write_text("Y = 2\n")
    (site / "broken.py").write_text("def f(:\n")  # a file that does not compile
    (site / "data").mkdir()
    (site / "data" / "notes.txt").write_text("no Python here\n")
    (site / "x.pth").write_text("import os\n")
    (site / "big" / "tests").mkdir()  # a package's own test suite: left to its first import
    (site / "big" / "tests" / "test_big.py").write_text("Z = 3\n")
    return site


def test_every_package_is_in_one_group_the_largest_apart(tmp_path: Path) -> None:
    site = _site(tmp_path)
    groups = compile_bytecode.groups(site, 2)
    dealt = [p.name for g in groups for p in g]
    assert sorted(dealt) == ["big", "broken.py", "mid", "single.py", "small", "tiny"]
    assert len(groups) == 2 and "big" in [p.name for p in groups[0]]
    assert "big" not in [p.name for p in groups[1]] and "mid" in [p.name for p in groups[1]]
    assert len(compile_bytecode.groups(site, 1)) == 1


def test_every_file_that_compiles_gets_its_bytecode(tmp_path: Path) -> None:
    site = _site(tmp_path)
    proc = subprocess.run([sys.executable, str(SCRIPT), str(site)], capture_output=True)
    assert proc.returncode == 0, proc.stderr  # a file that does not compile is not an error
    sources = [p for p in site.rglob("*.py") if p.name not in ("broken.py", "test_big.py")]
    assert len(sources) == 12
    for source in sources:
        tag = sys.implementation.cache_tag
        assert (source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc").exists(), source
    assert not list(site.glob("__pycache__/broken.*"))
    assert not (site / "big" / "tests" / "__pycache__").exists()
