"""deploy/k8s: built-in kinds against the Kubernetes JSON schemas shipped by kubernetes-validate;
the two Prometheus Operator kinds (no schema shipped by any validator here) by promtool
(PrometheusRule) and by hand (ServiceMonitor); and the references between the manifests."""

from __future__ import annotations

import re
import shlex

import pytest
from deploy_testutil import (
    COMPOSE_FILE,
    K8S_DIR,
    METRICS_PORT,
    PROMETHEUS_DIR,
    k8s_documents,
    load_yaml,
    require_module,
    require_tool,
    run_tool,
)
from promql import RULES_FILE, yaml

OPERATOR_KINDS = {"ServiceMonitor", "PrometheusRule"}
BUILTIN_KINDS = {"ConfigMap", "Service", "StatefulSet"}


def resources(kind: str) -> list[dict]:
    found = [doc for _, doc in k8s_documents() if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind} in deploy/k8s, found {len(found)}"
    return found


def one(kind: str) -> dict:
    return resources(kind)[0]


def test_expected_resources():
    kinds = sorted(doc["kind"] for _, doc in k8s_documents())
    assert kinds == sorted(BUILTIN_KINDS | OPERATOR_KINDS)


def test_kustomization_lists_every_manifest():
    kustomization = load_yaml(K8S_DIR / "kustomization.yaml")
    assert kustomization["kind"] == "Kustomization"
    files = {p.name for p in K8S_DIR.glob("*.yaml")} - {"kustomization.yaml"}
    assert sorted(kustomization["resources"]) == sorted(files)


@pytest.mark.parametrize("kind", sorted(BUILTIN_KINDS))
def test_builtin_kinds_match_the_kubernetes_schema(kind):
    kv = require_module("kubernetes_validate", "kubernetes-validate")
    version = kv.latest_version()  # newest schema set the package ships (no network)
    for doc in resources(kind):
        try:
            kv.validate(doc, version, strict=True)
        except kv.ValidationError as exc:
            path = "/".join(map(str, exc.path))
            pytest.fail(f"{kind} invalid for Kubernetes {version} at {path}: {exc.message}")


def test_schema_validation_can_fail():
    kv = require_module("kubernetes_validate", "kubernetes-validate")
    bad = yaml.safe_load(yaml.safe_dump(one("StatefulSet")))
    bad["spec"]["replicas"] = "one"
    bad["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] = "Sometimes"
    bad["spec"]["template"]["spec"]["restartPolicyy"] = "Always"
    with pytest.raises(kv.ValidationError):
        kv.validate(bad, kv.latest_version(), strict=True)


def test_prometheusrule_holds_exactly_rules_yml():
    rule = one("PrometheusRule")
    assert rule["apiVersion"] == "monitoring.coreos.com/v1"
    assert set(rule) == {"apiVersion", "kind", "metadata", "spec"}
    assert set(rule["spec"]) == {"groups"}
    assert rule["spec"]["groups"] == load_yaml(RULES_FILE)["groups"], (
        "deploy/k8s/prometheusrule.yaml spec.groups differ from deploy/prometheus/rules.yml groups"
    )


def test_prometheusrule_passes_promtool(tmp_path):
    promtool = require_tool("promtool")
    path = tmp_path / "prometheusrule-groups.yml"
    path.write_text(yaml.safe_dump({"groups": one("PrometheusRule")["spec"]["groups"]}))
    assert "SUCCESS" in run_tool(promtool, "check", "rules", path)


# ServiceMonitor: the fields of monitoring.coreos.com/v1 that this check accepts (a subset of
# the CRD; a typo in a field name fails), and the CRD's duration pattern.
SERVICEMONITOR_SPEC_FIELDS = {
    "selector", "endpoints", "namespaceSelector", "jobLabel", "targetLabels",
    "podTargetLabels", "sampleLimit", "targetLimit", "labelLimit", "attachMetadata",
}  # fmt: skip
ENDPOINT_FIELDS = {
    "port", "targetPort", "path", "scheme", "interval", "scrapeTimeout", "params",
    "honorLabels", "honorTimestamps", "relabelings", "metricRelabelings", "tlsConfig",
    "bearerTokenSecret", "authorization", "basicAuth", "followRedirects", "enableHttp2",
    "filterRunning", "proxyUrl",
}  # fmt: skip
DURATION = re.compile(
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)


def servicemonitor_problems(monitor: dict, service: dict) -> list[str]:
    problems = []
    if monitor.get("apiVersion") != "monitoring.coreos.com/v1":
        problems.append(f"apiVersion {monitor.get('apiVersion')!r}")
    extra = set(monitor) - {"apiVersion", "kind", "metadata", "spec"}
    if extra:
        problems.append(f"unknown top-level fields {extra}")
    if not monitor.get("metadata", {}).get("name"):
        problems.append("metadata.name missing")
    spec = monitor.get("spec", {})
    if set(spec) - SERVICEMONITOR_SPEC_FIELDS:
        problems.append(f"unknown spec fields {set(spec) - SERVICEMONITOR_SPEC_FIELDS}")
    selector = spec.get("selector", {}).get("matchLabels", {})
    labels = service["metadata"].get("labels", {})
    if not selector or any(labels.get(k) != v for k, v in selector.items()):
        problems.append(f"selector {selector} does not select the Service (labels {labels})")
    endpoints = spec.get("endpoints")
    if not isinstance(endpoints, list) or not endpoints:
        problems.append("spec.endpoints must be a non-empty list")
        endpoints = []
    port_names = {p.get("name") for p in service["spec"]["ports"]}
    for i, endpoint in enumerate(endpoints):
        if set(endpoint) - ENDPOINT_FIELDS:
            problems.append(f"endpoints[{i}]: unknown fields {set(endpoint) - ENDPOINT_FIELDS}")
        if endpoint.get("port") not in port_names:
            problems.append(f"endpoints[{i}].port {endpoint.get('port')!r} not in {port_names}")
        if endpoint.get("path", "/metrics") != "/metrics":
            problems.append(f"endpoints[{i}].path {endpoint['path']!r}")
        for key in ("interval", "scrapeTimeout"):
            if key in endpoint and not DURATION.match(str(endpoint[key])):
                problems.append(f"endpoints[{i}].{key} {endpoint[key]!r} is not a duration")
    return problems


def test_servicemonitor_structure_and_target():
    assert servicemonitor_problems(one("ServiceMonitor"), one("Service")) == []


def test_servicemonitor_check_can_fail():
    monitor = yaml.safe_load(yaml.safe_dump(one("ServiceMonitor")))
    monitor["spec"]["endpoints"][0].update(port="http", interval="15 seconds", pathh="/")
    monitor["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] = "other"
    assert len(servicemonitor_problems(monitor, one("Service"))) == 4


def test_service_statefulset_and_configmap_fit_together():
    service, sts, config = one("Service"), one("StatefulSet"), one("ConfigMap")
    pod = sts["spec"]["template"]
    pod_labels = pod["metadata"]["labels"]
    assert sts["spec"]["serviceName"] == service["metadata"]["name"]
    assert sts["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert service["spec"]["selector"].items() <= pod_labels.items()
    (container,) = pod["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": METRICS_PORT}
    (svc_port,) = service["spec"]["ports"]
    assert svc_port["name"] == "metrics" and svc_port["targetPort"] in ("metrics", METRICS_PORT)
    # every $(VAR) in the arguments is defined, from the ConfigMap or the env list
    defined = set(config["data"]) | {e["name"] for e in container.get("env", [])}
    assert [r["configMapRef"]["name"] for r in container["envFrom"]] == [config["metadata"]["name"]]
    used = set(re.findall(r"\$\(([A-Z0-9_]+)\)", " ".join(container["args"])))
    assert used <= defined, f"undefined variables in args: {used - defined}"
    assert {"STREAM_PERCEPTRON_KAFKA_USERNAME", "STREAM_PERCEPTRON_KAFKA_PASSWORD"} <= defined
    # shared-model mode: 3 workers, their state in Kafka (no volume, no checkpoint file)
    assert sts["spec"]["replicas"] == 3
    assert "volumeClaimTemplates" not in sts["spec"]
    args = flags(container["args"])
    assert args["model-topic"] == "$(KAFKA_MODEL_TOPIC)" and args["mix-every"]
    assert args["instance-id"] == "$(POD_NAME)"
    assert "checkpoint" not in args and "resume" not in args
    assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"] == {"path": "/metrics", "port": "metrics"}


def flags(args: list[str]) -> dict[str, str | None]:
    """--name=value / --name value / --switch -> {name: value or None}."""
    out: dict[str, str | None] = {}
    for i, arg in enumerate(args):
        if arg.startswith("--"):
            name, eq, value = arg[2:].partition("=")
            following = args[i + 1] if i + 1 < len(args) else None
            if not eq and following is not None and not following.startswith("--"):
                value = following
            out[name] = value or None
    return out


def test_k8s_and_compose_run_the_engine_alike():
    (container,) = one("StatefulSet")["spec"]["template"]["spec"]["containers"]
    compose_command = load_yaml(COMPOSE_FILE)["services"]["engine"]["command"]
    if isinstance(compose_command, str):
        compose_command = shlex.split(compose_command)
    assert container["args"][0] == compose_command[0] == "run"
    assert flags(container["args"]).keys() == flags(compose_command).keys()
    k8s_flags = flags(container["args"])
    assert k8s_flags["metrics-port"] == str(METRICS_PORT)
    assert k8s_flags["metrics-host"] == "0.0.0.0"
    assert k8s_flags["source"] == "kafka"


def test_job_label_matches_the_alerts():
    # The ServiceMonitor's job label is the Service name; the Down alert selects it.
    assert one("Service")["metadata"]["name"] == "stream-perceptron"
    assert "jobLabel" not in one("ServiceMonitor")["spec"]
    assert 'job="stream-perceptron"' in (PROMETHEUS_DIR / "rules.yml").read_text()
