"""``make test``'s order (tests/slow_first.py): the slow tests at the head of the shares that
pytest-xdist's own worksteal scheduler gives its processes, balanced, the rest in order."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import slow_first
from xdist.scheduler.worksteal import WorkStealingScheduling


class _Node:
    """What the scheduler calls on a worker process: records the items it was sent."""

    def __init__(self, name: str) -> None:
        self.gateway = type("Gateway", (), {"id": name})()
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indices: list[int]) -> None:
        self.sent += indices

    def shutdown(self) -> None:  # pragma: no cover - not reached before any test ran
        self.shutting_down = True


class _Config:
    def __init__(self, workers: int) -> None:
        self.workers = workers

    def getvalue(self, name: str) -> object:
        return [f"{self.workers}*popen"] if name == "tx" else None


def xdist_shares(collection: list[str], workers: int) -> list[list[str]]:
    """The items each process gets first from pytest-xdist's worksteal scheduler."""
    sched = WorkStealingScheduling(_Config(workers))  # type: ignore[arg-type]
    nodes = [_Node(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)  # type: ignore[arg-type]
    for node in nodes:
        sched.add_node_collection(node, collection)  # type: ignore[arg-type]
    sched.schedule()
    return [[collection[i] for i in node.sent] for node in nodes]


@pytest.mark.parametrize("workers", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("seed", range(5))
def test_each_process_starts_with_its_slow_tests_balanced(workers: int, seed: int) -> None:
    rng = random.Random(seed)
    names = [f"t{i}" for i in range(rng.randint(40, 400))]
    slow = {n: rng.choice([25.0, 30.0, 60.0, 155.0]) for n in rng.sample(names, 12)}
    ordered = slow_first.spread_slow_first(names, names, slow, workers)
    assert sorted(ordered) == sorted(names)
    # the rest keep their order
    assert [n for n in ordered if n not in slow] == [n for n in names if n not in slow]

    shares = xdist_shares(ordered, workers)
    assert sum(map(len, shares)) == len(names)
    heads = []
    for share in shares:
        k = 0
        while k < len(share) and share[k] in slow:
            k += 1
        assert not set(share[k:]) & set(slow), "a slow test after a quick one in a share"
        assert [slow[n] for n in share[:k]] == sorted((slow[n] for n in share[:k]), reverse=True)
        heads.append(sum(slow[n] for n in share[:k]))
    # dealt longest first to the least loaded: no share's slow time exceeds another's by more
    # than its own smallest slow test (the greedy rule's bound)
    assert max(heads) - min(heads) <= max(slow.values())
    if workers > 1:
        assert min(heads) > 0


def test_without_the_order_a_slow_test_can_sit_late_in_a_share() -> None:
    """What the order is for: the collected order puts these at the end of the last share."""
    names = [f"t{i}" for i in range(100)]
    slow = {"t98": 60.0, "t99": 155.0}
    last = xdist_shares(names, 4)[-1]
    assert last[-2:] == ["t98", "t99"]
    shares = xdist_shares(slow_first.spread_slow_first(names, names, slow, 4), 4)
    assert [s[0] for s in shares[:2]] == ["t99", "t98"]


def test_the_file_reads_seconds_and_names(tmp_path: Path) -> None:
    path = tmp_path / "slow.txt"
    path.write_text("# a comment\n\n155.3 tests/a.py::test_x[1-b]\n25.0 tests/b.py::test_y\n")
    assert slow_first.read_slow_tests(path) == {
        "tests/a.py::test_x[1-b]": 155.3,
        "tests/b.py::test_y": 25.0,
    }
    assert slow_first.read_slow_tests(tmp_path / "none.txt") == {}


def test_the_committed_list_names_collected_tests(request: pytest.FixtureRequest) -> None:
    """A renamed test drops out of the order silently; at least most must still be there."""
    listed = slow_first.read_slow_tests()
    assert listed, "tests/slow_tests.txt is empty"
    root = Path(request.config.rootpath)
    files = {nodeid.split("::")[0] for nodeid in listed}
    missing = sorted(f for f in files if not (root / f).exists())
    assert not missing, f"tests/slow_tests.txt names files that are gone: {missing}"
