"""deploy/prometheus: promtool checks, rule unit tests and their coverage, and every PromQL
expression of the rules and the Grafana dashboard (parses, uses only the engine's metrics)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from deploy_testutil import PROMETHEUS_DIR, load_yaml, require_tool, run_tool
from promql import (
    ENGINE_METRICS,
    PROMETHEUS_METRICS,
    RULES_FILE,
    iter_promql_expressions,
    metric_names,
    recorded_names,
    yaml,
)

CONFIG = PROMETHEUS_DIR / "prometheus.yml"
RULES_TEST = PROMETHEUS_DIR / "rules_test.yml"


def alerts_in(rules_file: Path) -> list[str]:
    groups = load_yaml(rules_file)["groups"]
    return [rule["alert"] for group in groups for rule in group["rules"] if "alert" in rule]


def alert_test_coverage(rules_test: dict) -> dict[str, set[str]]:
    """alertname -> {"fires", "silent"}: which kinds of case rules_test.yml has for it."""
    cover: dict[str, set[str]] = {}
    for case in rules_test.get("tests", []):
        for check in case.get("alert_rule_test", []):
            kind = "fires" if check.get("exp_alerts") else "silent"
            cover.setdefault(check["alertname"], set()).add(kind)
    return cover


def test_promtool_check_config():
    promtool = require_tool("promtool")
    out = run_tool(promtool, "check", "config", CONFIG)
    assert "SUCCESS" in out


def test_promtool_check_rules():
    promtool = require_tool("promtool")
    out = run_tool(promtool, "check", "rules", RULES_FILE)
    assert f"SUCCESS: {sum(len(g['rules']) for g in load_yaml(RULES_FILE)['groups'])} rules" in out


def test_promtool_test_rules():
    promtool = require_tool("promtool")
    out = run_tool(promtool, "test", "rules", RULES_TEST.name, cwd=PROMETHEUS_DIR)
    assert "SUCCESS" in out


def test_config_scrapes_the_engine_and_loads_the_rules():
    config = load_yaml(CONFIG)
    assert [Path(f).name for f in config["rule_files"]] == [RULES_FILE.name]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    assert "stream-perceptron" in jobs, "the alerts select job=stream-perceptron"
    targets = [t for sc in jobs["stream-perceptron"]["static_configs"] for t in sc["targets"]]
    assert targets and all(t.endswith(":9108") for t in targets)


def test_every_alert_has_a_firing_and_a_silent_case():
    alerts = alerts_in(RULES_FILE)
    assert len(alerts) >= 5
    rules_test = load_yaml(RULES_TEST)
    assert rules_test["rule_files"] == [RULES_FILE.name]
    cover = alert_test_coverage(rules_test)
    missing = {
        alert: sorted({"fires", "silent"} - cover.get(alert, set()))
        for alert in alerts
        if cover.get(alert) != {"fires", "silent"}
    }
    assert not missing, f"rules_test.yml lacks cases (alert: kinds missing): {missing}"
    unknown = set(cover) - set(alerts)
    assert not unknown, f"rules_test.yml tests alerts that rules.yml does not define: {unknown}"


def test_coverage_check_notices_a_missing_case():
    # The check above must be able to fail: a test file with only firing cases is incomplete.
    only_firing = {"tests": [{"alert_rule_test": [{"alertname": "A", "exp_alerts": [{}]}]}]}
    assert alert_test_coverage(only_firing) == {"A": {"fires"}}
    assert alert_test_coverage({"tests": [{"alert_rule_test": [{"alertname": "A"}]}]}) == {
        "A": {"silent"}
    }


def test_every_recording_rule_is_unit_tested():
    tested = " ".join(
        check["expr"]
        for case in load_yaml(RULES_TEST)["tests"]
        for check in case.get("promql_expr_test", [])
    )
    untested = {name for name in recorded_names() if name not in tested}
    assert not untested, f"no promql_expr_test in rules_test.yml for: {untested}"


def test_alerts_have_severity_and_summary():
    for group in load_yaml(RULES_FILE)["groups"]:
        for rule in group["rules"]:
            if "alert" in rule:
                assert rule["labels"]["severity"] in {"warning", "critical"}, rule["alert"]
                assert rule["annotations"]["summary"], rule["alert"]


def test_required_recording_rules():
    exprs = {
        rule["record"]: " ".join(rule["expr"].split())
        for group in load_yaml(RULES_FILE)["groups"]
        for rule in group["rules"]
        if "record" in rule
    }
    assert (
        "rate(stream_perceptron_mistakes_total[1m]) / rate(stream_perceptron_examples_total[1m])"
        in exprs.values()
    )
    assert "rate(stream_perceptron_examples_total[1m])" in exprs.values()


def test_promql_expressions_are_collected():
    exprs = list(iter_promql_expressions())
    sources = {e.source for e in exprs}
    assert sources == {
        "deploy/prometheus/rules.yml",
        "deploy/grafana/dashboards/stream-perceptron.json",
    }
    assert len(exprs) >= 20
    assert all(e.expr and "$" not in e.expr for e in exprs)


def test_every_promql_expression_parses(tmp_path):
    """promtool parses each expression as a recording rule (a typo fails here)."""
    promtool = require_tool("promtool")
    exprs = list(iter_promql_expressions())
    rules = [{"record": f"deploy_check_expr_{i}", "expr": e.expr} for i, e in enumerate(exprs)]
    path = tmp_path / "all_expressions.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "deploy-check", "rules": rules}]}))
    legend = "\n".join(f"deploy_check_expr_{i}: {e.source} {e.where}" for i, e in enumerate(exprs))
    promtool_out = run_tool_or_explain(promtool, path, legend)
    assert f"SUCCESS: {len(exprs)} rules found" in promtool_out


def run_tool_or_explain(promtool: str, path: Path, legend: str) -> str:
    try:
        return run_tool(promtool, "check", "rules", path)
    except pytest.fail.Exception as exc:
        pytest.fail(f"{exc}\nwhich expression is which:\n{legend}", pytrace=False)


def test_promql_uses_only_known_metrics():
    allowed = ENGINE_METRICS | PROMETHEUS_METRICS | recorded_names()
    unknown = {}
    for e in iter_promql_expressions():
        names = metric_names(e.expr)
        assert names, f"{e.source} {e.where}: selects no metric: {e.expr}"
        if names - allowed:
            unknown[f"{e.source} {e.where}"] = sorted(names - allowed)
    assert not unknown, f"metric names the engine does not expose: {unknown}"


def test_metric_name_check_catches_a_renamed_metric():
    expr = "rate(stream_perceptron_example_total[5m]) / rate(stream_perceptron_mistakes_total[5m])"
    assert metric_names(expr) - ENGINE_METRICS == {"stream_perceptron_example_total"}


def test_promtool_rejects_a_typo(tmp_path):
    # The parse check above must be able to fail.
    promtool = require_tool("promtool")
    path = tmp_path / "typo.yml"
    path.write_text(
        yaml.safe_dump(
            {"groups": [{"name": "g", "rules": [{"record": "r", "expr": "rate(x[5m]"}]}]}
        )
    )
    with pytest.raises(pytest.fail.Exception, match=re.escape("exited 1")):
        run_tool(promtool, "check", "rules", path)
