"""deploy/Dockerfile: parsed line by line (no Docker engine here), and linted by hadolint."""

from __future__ import annotations

import json
import re
import shlex

import pytest
from deploy_testutil import DEPLOY, DOCKERFILE, METRICS_PORT, REPO, require_tool, run_tool


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped.

    >>> instructions("FROM a\\n# c\\nRUN x \\\\\\n    && y\\n")
    [('FROM', 'a'), ('RUN', 'x && y')]
    """
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1].strip() + " "
            continue
        logical = pending + stripped
        pending = ""
        keyword, _, args = logical.partition(" ")
        out.append((keyword.upper(), args.strip()))
    return out


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def args_of(parsed, keyword: str) -> list[str]:
    return [args for kw, args in parsed if kw == keyword]


def context_sources(parsed) -> list[str]:
    """What the COPY instructions take from the build context (not from another stage)."""
    return [
        source
        for args in args_of(parsed, "COPY")
        if not args.startswith("--from=")
        for source in shlex.split(args)[:-1]
    ]


def test_base_images(parsed):
    stages = args_of(parsed, "FROM")
    assert len(stages) == 2, stages  # a build stage with a compiler, then the image
    for base in stages:
        assert re.fullmatch(r"python:3\.11(\.\d+)?-slim(-\w+)?( AS \w+)?", base), base


def test_the_c_kernels_are_built_and_checked(parsed):
    runs = args_of(parsed, "RUN")
    assert any("gcc" in run and "apt-get install" in run for run in runs)
    assert any("pip wheel" in run for run in runs)
    check = "import stream_perceptron._dense, stream_perceptron._speedups"
    assert any(check in run for run in runs)
    assert args_of(parsed, "COPY")[-1].startswith("--from=build /wheels")


def test_the_image_has_the_fast_kafka_client(parsed):
    # --kafka-client auto (the default) and the deploy files' confluent-kafka need the extra
    install = next(run for run in args_of(parsed, "RUN") if "pip install" in run)
    assert "[rdkafka]" in install and "import confluent_kafka" in install, install


def test_runs_as_non_root(parsed):
    users = args_of(parsed, "USER")
    assert users, "no USER: the container would run as root"
    user = users[-1].split(":")[0]
    assert user not in {"root", "0"}, f"last USER is {users[-1]}"


def test_installs_the_package_from_the_build_context(parsed):
    sources = context_sources(parsed)
    assert {"pyproject.toml", "setup.py", "README.md", "stream_perceptron", "connectors"} <= set(
        sources
    )
    for source in sources:
        assert (REPO / source).exists(), f"COPY {source}: not in the build context (repo root)"
    assert any("pip install" in run for run in args_of(parsed, "RUN"))


def test_dockerignore_keeps_what_is_copied(parsed):
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines()
    kept = {line[1:].rstrip("/") for line in ignore if line.startswith("!")}
    sources = context_sources(parsed)
    assert set(sources) <= kept, f"Dockerfile.dockerignore excludes {set(sources) - kept}"


def test_entrypoint_expose_volume(parsed):
    (entrypoint,) = args_of(parsed, "ENTRYPOINT")
    assert json.loads(entrypoint) == ["stream-perceptron"]
    exposed = [p.split("/")[0] for args in args_of(parsed, "EXPOSE") for p in args.split()]
    assert str(METRICS_PORT) in exposed
    volumes = [v for args in args_of(parsed, "VOLUME") for v in json.loads(args)]
    assert "/data" in volumes


def test_healthcheck_fetches_metrics_with_python(parsed):
    (healthcheck,) = args_of(parsed, "HEALTHCHECK")
    options, _, command = healthcheck.partition("CMD ")
    assert command, "HEALTHCHECK needs a CMD"
    argv = json.loads(command)
    assert argv[0] == "python" and argv[1] == "-c"
    assert f"http://127.0.0.1:{METRICS_PORT}/metrics" in argv[2]
    assert "curl" not in healthcheck and "wget" not in healthcheck, "slim images have neither"
    compile(argv[2], "HEALTHCHECK", "exec")  # the Python snippet is valid
    assert "--timeout=" in options


def test_parser_sees_a_root_user():
    # The non-root check must be able to fail.
    users = args_of(instructions("FROM python:3.11-slim\nUSER app\nUSER 0:0\n"), "USER")
    assert users[-1].split(":")[0] == "0"


def test_hadolint():
    hadolint = require_tool("hadolint")
    run_tool(hadolint, "--no-color", DOCKERFILE)


def test_hadolint_can_fail(tmp_path):
    hadolint = require_tool("hadolint")
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text() + "USER root\n")
    with pytest.raises(pytest.fail.Exception, match="DL3002"):
        run_tool(hadolint, "--no-color", bad)
