"""deploy/grafana: provisioning files and the dashboard (structure, datasource, what it shows).
Its PromQL is checked in test_prometheus.py."""

from __future__ import annotations

import json

import pytest
from deploy_testutil import GRAFANA_DIR, load_yaml
from promql import DASHBOARD, ENGINE_METRICS, iter_promql_expressions, metric_names

DATASOURCES = sorted((GRAFANA_DIR / "provisioning/datasources").glob("*.yml"))
PROVIDERS = sorted((GRAFANA_DIR / "provisioning/dashboards").glob("*.yml"))


@pytest.fixture(scope="module")
def dashboard() -> dict:
    return json.loads(DASHBOARD.read_text())


def provisioned_datasources() -> list[dict]:
    return [d for f in DATASOURCES for d in load_yaml(f)["datasources"]]


def test_provisioning_files():
    assert DATASOURCES and PROVIDERS
    for path in DATASOURCES + PROVIDERS:
        assert load_yaml(path)["apiVersion"] == 1, path
    (prometheus,) = provisioned_datasources()
    assert prometheus["type"] == "prometheus"
    assert prometheus["uid"] and prometheus["url"].startswith("http")
    for path in PROVIDERS:
        for provider in load_yaml(path)["providers"]:
            assert provider["type"] == "file" and provider["options"]["path"], path


def test_only_one_dashboard_and_it_is_well_formed(dashboard):
    assert [p.name for p in (GRAFANA_DIR / "dashboards").glob("*.json")] == [DASHBOARD.name]
    assert dashboard["uid"] and dashboard["title"]
    assert isinstance(dashboard["schemaVersion"], int)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert 0 <= grid["x"] and grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]
        assert panel["targets"], f"panel {panel['title']!r} has no query"
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), panel["title"]


def test_panels_do_not_overlap(dashboard):
    cells: dict[tuple[int, int], str] = {}
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in cells, f"{panel['title']!r} overlaps {cells[(x, y)]!r}"
                cells[(x, y)] = panel["title"]


def test_every_query_uses_the_provisioned_datasource(dashboard):
    (prometheus,) = provisioned_datasources()
    expected = {"type": "prometheus", "uid": prometheus["uid"]}
    for panel in dashboard["panels"]:
        assert panel["datasource"] == expected, panel["title"]
        for target in panel["targets"]:
            assert target["datasource"] == expected, (panel["title"], target["refId"])


def test_dashboard_shows_what_an_operator_needs():
    used = {
        name
        for e in iter_promql_expressions()
        if e.source.endswith(DASHBOARD.name)
        for name in metric_names(e.expr)
    }
    needed = {
        "stream_perceptron_examples_total",  # examples/s
        "stream_perceptron_mistakes_total",  # mistakes/s, mistake rate, mistake count
        "stream_perceptron_accuracy",
        "stream_perceptron_rolling_accuracy",
        "stream_perceptron_mistake_bound",
        "stream_perceptron_recent_margin",  # the margins, on noisy streams too
        "stream_perceptron_recent_wrong_side_ratio",
        "stream_perceptron_weight",  # largest weights
        "stream_perceptron_bias",
        "stream_perceptron_weight_norm",
        "stream_perceptron_kafka_consumer_lag",
        "stream_perceptron_invalid_records_total",
        "stream_perceptron_checkpoint_last_success_timestamp_seconds",
        "stream_perceptron_drifts_total",  # the drift annotation
        # shared-model mode: the cluster and each worker
        "stream_perceptron_model_version",
        "stream_perceptron_mixes_total",
        "stream_perceptron_seconds_since_last_mix",
        "stream_perceptron_mix_divergence",
        "stream_perceptron_partitions_owned",
        "stream_perceptron_state_restores_total",
        # --join-key: what waits, against its cap; the delay; the served accuracy; what is lost
        "stream_perceptron_pending_examples",
        "stream_perceptron_pending_examples_limit",
        "stream_perceptron_label_delay_records_bucket",
        "stream_perceptron_served_accuracy",
        "stream_perceptron_joined_examples_total",
        "stream_perceptron_expired_events_total",
        "stream_perceptron_unmatched_outcomes_total",
        "stream_perceptron_duplicate_outcomes_total",
        "stream_perceptron_duplicate_events_total",
    }
    assert needed <= ENGINE_METRICS
    assert not needed - used, f"the dashboard does not show {sorted(needed - used)}"


def test_breakdowns(dashboard):
    exprs = {p["title"]: [t["expr"] for t in p["targets"]] for p in dashboard["panels"]}
    lag = [e for t, es in exprs.items() for e in es if "consumer_lag" in e]
    assert lag and all("partition" in e for e in lag), "consumer lag must be shown by partition"
    invalid = [e for es in exprs.values() for e in es if "invalid_records" in e]
    assert invalid and all("reason" in e for e in invalid), "invalid records must be by reason"
    assert any("topk(" in e for es in exprs.values() for e in es), "largest weights need topk"
    pending = [e for es in exprs.values() for e in es if "pending_examples" in e]
    assert any("kind" in e for e in pending), "pending examples must be shown by kind"
    delay = [e for es in exprs.values() for e in es if "label_delay_records" in e]
    assert delay and all("histogram_quantile(" in e and "le)" in e for e in delay), (
        "the label delay is a histogram: quantiles over its le buckets"
    )


def test_drifts_are_marked_by_an_annotation(dashboard):
    (annotation,) = [a for a in dashboard["annotations"]["list"] if a.get("name") == "Drifts"]
    assert annotation["enable"] is True
    assert "stream_perceptron_drifts_total" in annotation["expr"]
    assert annotation["datasource"] == {"type": "prometheus", "uid": "prometheus"}
