"""The code examples of README.md and docs/*.md, as the tests run them (not a test module).

Every fenced block with a language is an example, and a test runs it (``test_docs_examples.py``);
the Python ones (``>>>``) run as doctests too (pytest's ``--doctest-glob``). How a block is
run is said by an HTML comment on the line before it, ``<!-- example: MODE[: why] -->``:

``run`` (no comment: the default)
    a shell block, run by bash (``set -euo pipefail``) in a fresh directory holding the files
    the examples name (``data.csv``, ``events.csv``, ``events.jsonl``: River's Phishing data set
    as the project writes it), with the venv's ``stream-perceptron`` first on ``PATH``; it must
    exit 0.
``serve``
    a shell block that serves until stopped (``--ui``): it must print the live page's address
    within the timeout, then it is stopped.
``kafka``
    a shell block run against the suite's Kafka broker (marker ``kafka``): ``make kafka-up``
    and ``make kafka-down`` stand for that broker (the same ``kafka/kafka-up.sh``), the
    placeholders ``HOST:PORT``, ``127.0.0.1:PORT`` and ``kafka:9092`` become its address, every
    topic and group name gets a unique suffix, a topic the block reads and does not write
    itself is made first holding Phishing as JSON lines, and each ``run --source kafka`` gets
    ``--exit-at-end`` (a worker otherwise runs until SIGTERM) and ``--metrics-port 0`` (its
    metrics on a free port: the default 9108 is taken by the first of two tests at once).
``python``
    a ``python`` block: run as a doctest when it has ``>>>``, else compiled and imported.
``promql``
    every metric name it uses is one the engine exposes (``tests/deploy/promql.py``).
``skip: why``
    not run; the reason is required and says what covers it instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: the files whose examples run: the README and every page of the site
PAGES = (REPO / "README.md", *sorted((REPO / "docs").glob("*.md")))

MODES = {"run", "serve", "kafka", "python", "promql", "skip"}

_FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[a-z]*)\s*$")
_DIRECTIVE = re.compile(r"^\s*<!-- example: (?P<mode>[a-z]+)(?::\s*(?P<why>.*?))?\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    """One fenced block: where it is, its language, its code and how it is run."""

    page: Path
    line: int
    lang: str
    code: str
    mode: str
    why: str

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def examples(pages: tuple[Path, ...] = PAGES) -> list[Example]:
    """Every fenced block with a language in ``pages``, with its mode.

    A block without a language (a drawing, a tree) is not code and is not collected.
    """
    found: list[Example] = []
    for page in pages:
        lines = page.read_text(encoding="utf-8").split("\n")
        i = 0
        while i < len(lines):
            m = _FENCE.match(lines[i])
            if not m:
                i += 1
                continue
            indent, lang = m["indent"], m["lang"]
            end = i + 1
            while not lines[end].startswith(f"{indent}```"):
                end += 1
            if lang:
                code = "\n".join(line[len(indent) :] for line in lines[i + 1 : end])
                d = _DIRECTIVE.match(lines[i - 1]) if i else None
                mode = d["mode"] if d else {"sh": "run"}.get(lang, lang)
                why = (d["why"] or "") if d else ""
                found.append(Example(page, i + 1, lang, code, mode, why))
            i = end + 1
    return found
