"""The shape of the code, drawn from the code: the import graph (no circles, no import that runs
back up a floor), module sizes, and the CLI's namespace kept in the CLI.

The graph is read with :mod:`ast` (no module is imported), so a lazy import inside a function
counts as much as one at the top; imports under ``if TYPE_CHECKING:`` are left out (they exist
for annotations only and never run), but for the learners, where no circle is allowed even
among those.

Each check was seen to fail before issue 27's redesign (4 circles, 7 upward imports, modules of
up to 781 lines, 9 reads of the namespace outside the parser), which brought every count to 0.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("stream_perceptron", "connectors")

#: ``stream_perceptron/__init__.py`` alone (its name is every module's prefix): the version and
#: the project's error; it hands out the learners by ``importlib`` when first asked.
PACKAGE_FACE = "stream_perceptron"

#: Floors, lowest first. A module may import its own floor and those below, never above.
#: Within a floor the modules import each other freely, without circles.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("connectors",),  # moving bytes: nothing of stream_perceptron
    (
        "stream_perceptron.errors",
        "stream_perceptron.paths",
        "stream_perceptron.lazy_numpy",
        "stream_perceptron._speedups",
        "stream_perceptron._dense",
        "stream_perceptron._features",
        "stream_perceptron._drift",
        PACKAGE_FACE,
    ),
    ("stream_perceptron.native",),  # loading the C extensions
    (
        "stream_perceptron.allocator",
        "stream_perceptron.formats",
        "stream_perceptron.adwin",
        "stream_perceptron.state",
        "stream_perceptron.join",  # --join-key's pending store and counts (over state)
        "stream_perceptron.synthetic",
        "stream_perceptron.example_data",
    ),
    ("stream_perceptron.learners", "stream_perceptron.drift"),
    ("stream_perceptron.stats",),
    ("stream_perceptron.progress", "stream_perceptron.metrics", "stream_perceptron.checkpoint"),
    # the engine, and shared-model mode (its coordinator over the checkpoint coordinator)
    ("stream_perceptron.engine", "stream_perceptron.sharing"),
    ("stream_perceptron.cli",),
)

MAX_LINES = 450


def _modules() -> dict[str, Path | None]:
    """Every module of the packages by dotted name (C extensions as ``None``: leaves)."""
    found: dict[str, Path | None] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
        for source in (ROOT / package).glob("*.c"):
            found[f"{package}.{source.stem}"] = None
    return found


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                skipped.update(id(n) for n in ast.walk(child))
    return skipped


def _imported(module: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")
        if not is_package:
            base.pop()
        if node.level > 1:
            base = base[: len(base) - (node.level - 1)]
        prefix = ".".join(base + ([node.module] if node.module else []))
    else:
        prefix = node.module or ""
    return [f"{prefix}.{alias.name}" for alias in node.names] + [prefix]


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    """Module -> the project's modules it imports at run time (``type_only``: and those it
    imports for annotations only, under ``if TYPE_CHECKING:``)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        graph[module] = set()
        if path is None:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skipped = set() if type_only else _type_checking_nodes(tree)
        for node in ast.walk(tree):
            if id(node) in skipped or not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            names = _imported(module, node, path.name == "__init__.py")
            if isinstance(node, ast.ImportFrom):
                # "from package import submodule" imports the submodule, not the package's
                # other names: keep the submodules named, else the package itself
                submodules = [n for n in names[:-1] if n in modules]
                names = submodules if submodules else names[-1:]
            for name in names:
                while name not in modules and "." in name:
                    name = name.rsplit(".", 1)[0]
                if name in modules and name != module:
                    graph[module].add(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def floor_of(module: str) -> int:
    """The floor of the longest prefix of ``module`` that FLOORS names."""
    best, floor = -1, -1
    for level, names in enumerate(FLOORS):
        for name in names:
            inside = module.startswith(name + ".") and name != PACKAGE_FACE
            if (module == name or inside) and len(name) > best:
                best, floor = len(name), level
    return floor


def test_the_graph_sees_imports_at_every_depth() -> None:
    graph = import_graph()
    assert "stream_perceptron.learners._base" in graph["stream_perceptron.learners.perceptron"]
    assert "stream_perceptron._speedups" in graph["stream_perceptron.native"]  # in a function
    # a lone cycle is found, and a chain without one is not
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles() -> None:
    assert circles(import_graph()) == []


def test_no_type_only_import_circles_in_the_learners() -> None:
    """A circle of annotations is a circle of knowledge: a kernel's glue that names its model's
    class, the model that calls the glue (issue 43: four in learners/, all gone)."""
    graph = import_graph(type_only=True)
    assert "stream_perceptron.learners._base" in graph["stream_perceptron.learners._stored"]
    learners = [c for c in circles(graph) if any(".learners." in m for m in c)]
    assert learners == []


def test_every_module_has_a_floor() -> None:
    assert [m for m in import_graph() if floor_of(m) < 0] == []


def test_no_import_runs_up_a_floor() -> None:
    upward = [
        f"{module} (floor {floor_of(module)}) imports {target} (floor {floor_of(target)})"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if floor_of(target) > floor_of(module)
    ]
    assert upward == []


def _line_counts() -> dict[str, int]:
    return {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
    }


def test_no_module_is_longer_than_the_limit() -> None:
    counts = _line_counts()
    assert len(counts) > 100, "the packages' modules were not found"
    over = {path: n for path, n in counts.items() if n > MAX_LINES}
    assert over == {}, f"split these by job (at most {MAX_LINES} lines a module)"


def _namespace_probes() -> dict[str, int]:
    found: dict[str, int] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            n = path.read_text(encoding="utf-8").count("getattr(args")
            if n:
                found[str(path.relative_to(ROOT))] = n
    return found


def test_the_namespace_is_read_only_by_the_parser() -> None:
    assert _namespace_probes() == {}, "pass the typed run configuration, not the namespace"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_floors_name_only_existing_modules(package: str) -> None:
    modules = _modules()
    for names in FLOORS:
        for name in names:
            if name.split(".")[0] == package:
                assert name in modules, name
