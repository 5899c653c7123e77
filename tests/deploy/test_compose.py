"""deploy/docker-compose.yml: the Compose Specification schema (vendored in check-jsonschema, so
no network), and what the stack needs: KRaft Kafka, loopback-only ports, files that exist."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from deploy_testutil import (
    COMPOSE_FILE,
    DEPLOY,
    GRAFANA_DIR,
    METRICS_PORT,
    REPO,
    load_yaml,
    require_module,
    run_tool,
)


@pytest.fixture(scope="module")
def compose() -> dict:
    return load_yaml(COMPOSE_FILE)


def check_compose_schema(path: Path) -> str:
    require_module("check_jsonschema", "check-jsonschema")
    return run_tool(
        sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec", path
    )


def test_matches_the_compose_spec_schema():
    assert "ok" in check_compose_schema(COMPOSE_FILE)


def test_schema_check_can_fail(tmp_path):
    bad = tmp_path / "docker-compose.yml"
    text = COMPOSE_FILE.read_text().replace("condition: service_healthy", "condition: healthy")
    bad.write_text(text.replace("    restart: unless-stopped", "    restartt: unless-stopped", 1))
    with pytest.raises(pytest.fail.Exception, match="exited 1"):
        check_compose_schema(bad)


def test_services(compose):
    assert {"kafka", "kafka-init", "engine", "producer", "prometheus", "grafana"} <= set(
        compose["services"]
    )


def test_ports_published_on_loopback_only(compose):
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            if isinstance(port, dict):
                assert port.get("host_ip") == "127.0.0.1", f"{name}: {port}"
            else:
                assert str(port).startswith("127.0.0.1:"), f"{name}: {port} is not on 127.0.0.1"


def test_kafka_runs_kraft_single_node(compose):
    env = compose["services"]["kafka"]["environment"]
    assert compose["services"]["kafka"]["image"].startswith("apache/kafka:")
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert env["KAFKA_CONTROLLER_LISTENER_NAMES"] in env["KAFKA_LISTENERS"]
    for key in (
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR",
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR",
    ):
        assert int(env[key]) == 1, key
    assert "kafka:19092" in env["KAFKA_ADVERTISED_LISTENERS"]


def test_topics_created_before_use(compose):
    init = "\n".join(compose["services"]["kafka-init"]["command"])
    engine = compose["services"]["engine"]["command"]
    for flag in ("--topic=", "--predictions-topic=", "--dead-letter-topic="):
        (topic,) = [a.removeprefix(flag) for a in engine if a.startswith(flag)]
        assert f"--topic {topic} " in init, f"kafka-init does not create {topic}"
    for name in ("engine", "producer"):
        deps = compose["services"][name]["depends_on"]
        assert deps["kafka-init"]["condition"] == "service_completed_successfully", name


def test_three_workers_in_shared_model_mode(compose):
    workers = [compose["services"][name] for name in ("engine", "engine-2", "engine-3")]
    ids = []
    for worker in workers:
        args = worker["command"]
        assert args[0] == "run"
        for expected in (
            "--source=kafka",
            "--bootstrap-servers=kafka:19092",
            "--model-topic=stream-perceptron-model",
            f"--metrics-port={METRICS_PORT}",
            "--metrics-host=0.0.0.0",
        ):
            assert expected in args
        assert not any(a.startswith(("--checkpoint=", "--resume")) for a in args)
        # the same command but for its own id (static membership, transactional id)
        ids += [a for a in args if a.startswith("--instance-id=")]
        assert [a for a in args if not a.startswith("--instance-id=")] == [
            a for a in workers[0]["command"] if not a.startswith("--instance-id=")
        ]
    assert len(set(ids)) == 3


def test_engine_image_builds_from_the_repository(compose):
    for name in ("engine", "example-data"):
        build = compose["services"][name]["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == REPO, name
        assert (context / build["dockerfile"]).is_file(), name


def test_producer_streams_the_bundled_data_set(compose):
    command = " ".join(compose["services"]["example-data"]["command"])
    assert "stream-perceptron example-data phishing --format jsonl" in command
    producer = "\n".join(compose["services"]["producer"]["command"])
    assert "kafka-console-producer.sh --bootstrap-server kafka:19092 --topic examples" in producer


def bind_mounts(service: dict) -> list[tuple[Path, str]]:
    mounts = []
    for volume in service.get("volumes", []):
        source, target = volume.split(":")[:2]
        if source.startswith((".", "/")):
            mounts.append(((DEPLOY / source).resolve(), target))
    return mounts


def test_bind_mounted_files_exist(compose):
    for name, service in compose["services"].items():
        for source, target in bind_mounts(service):
            assert source.exists(), f"{name}: {source} (mounted at {target}) does not exist"


def test_prometheus_gets_config_and_rules(compose):
    mounts = dict((t, s) for s, t in bind_mounts(compose["services"]["prometheus"]))
    config = load_yaml(mounts["/etc/prometheus/prometheus.yml"])
    for rule_file in config["rule_files"]:
        assert f"/etc/prometheus/{rule_file}" in mounts, f"{rule_file} is not mounted"
    targets = [
        t
        for job in config["scrape_configs"]
        for sc in job.get("static_configs", [])
        for t in sc["targets"]
    ]
    for worker in ("engine", "engine-2", "engine-3"):
        assert f"{worker}:{METRICS_PORT}" in targets


def test_grafana_gets_provisioning_and_dashboards(compose):
    grafana = compose["services"]["grafana"]
    mounts = {t: s for s, t in bind_mounts(grafana)}
    assert (
        mounts["/etc/grafana/provisioning/datasources"] == GRAFANA_DIR / "provisioning/datasources"
    )
    assert mounts["/etc/grafana/provisioning/dashboards"] == GRAFANA_DIR / "provisioning/dashboards"
    providers = [
        p
        for f in sorted((GRAFANA_DIR / "provisioning/dashboards").glob("*.yml"))
        for p in load_yaml(f)["providers"]
    ]
    for provider in providers:
        path = provider["options"]["path"]
        assert mounts.get(path) == GRAFANA_DIR / "dashboards", f"{path} is not the dashboards mount"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    home_dir, _, home_file = home.rpartition("/")
    assert (mounts[home_dir] / home_file).is_file()
    datasources = load_yaml(GRAFANA_DIR / "provisioning/datasources/prometheus.yml")
    (url,) = [d["url"] for d in datasources["datasources"]]
    host_port = url.removeprefix("http://")
    host, port = host_port.split(":")
    assert host in compose["services"] and port == "9090"
