"""The chart's PrometheusRule and Grafana dashboard ConfigMap: off by default, the same rules as the plain file
(checked by promtool once rendered), every threshold a value, the dashboard JSON carried as it is in the repo."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml
from chartkit import CHART_DIR, NAMESPACE, RELEASE

from service.monitoring import __main__ as generate
from service.monitoring import rules
from tests.conftest import need

pytestmark = pytest.mark.helm
FULLNAME = f"{RELEASE}-rmq-namesrv"
ENABLED = {"prometheusRule": {"enabled": True}, "grafanaDashboard": {"enabled": True}}


def test_rendered_files_are_current():
    assert generate.stale() == [], "run `python -m service.monitoring`"


def test_off_by_default(render):
    r = render()
    assert r.maybe("PrometheusRule") is None
    assert not [d for d in r.all("ConfigMap") if d["metadata"]["name"].endswith("-dashboard")]


def test_prometheus_rule_is_the_plain_rules_for_this_release(render, tmp_path):
    pr = render({"prometheusRule": {"enabled": True, "labels": {"release": "prom"}}}).one("PrometheusRule")
    assert pr["metadata"]["labels"]["release"] == "prom"
    up = f'job="{FULLNAME}", namespace="{NAMESPACE}"'
    assert pr["spec"]["groups"] == yaml.safe_load(rules.plain(up=up))["groups"]
    need("promtool")
    f = tmp_path / "rendered.yaml"
    f.write_text(yaml.safe_dump({"groups": pr["spec"]["groups"]}))
    out = subprocess.run(["promtool", "check", "rules", str(f)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_threshold_is_a_value(render):
    tuned = {"redisUnavailableFor": "7m", "redisErrorsPerSecond": 0.25, "runbookBaseUrl": "https://wiki/ops"}
    pr = render({"prometheusRule": {"enabled": True, **tuned}}).one("PrometheusRule")
    alerts = {a["alert"]: a for g in pr["spec"]["groups"] for a in g["rules"] if "alert" in a}
    redis = alerts["NamesrvRedisUnavailable"]
    assert redis["for"] == "7m" and redis["expr"].endswith("> 0.25")
    assert redis["annotations"]["runbook_url"] == "https://wiki/ops#runbook-namesrvredisunavailable"
    assert "{{ $labels.job }}" in redis["annotations"]["description"]  # Prometheus's own templating survives Helm


def test_values_carry_every_rule_parameter_at_its_default(chart):
    values = chart.values["prometheusRule"]
    assert {k: v for k, v in values.items() if k not in ("enabled", "labels")} == rules.DEFAULTS
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())["properties"]["prometheusRule"]
    assert set(schema["properties"]) == set(values)


def test_dashboard_configmap_for_the_grafana_sidecar(render):
    r = render({"grafanaDashboard": {"enabled": True, "label": "my_dashboards", "labelValue": "yes",
                                     "annotations": {"grafana_folder": "RocketMQ"}}})
    (cm,) = [d for d in r.all("ConfigMap") if d["metadata"]["name"] == f"{FULLNAME}-dashboard"]
    assert cm["metadata"]["labels"]["my_dashboards"] == "yes"
    assert cm["metadata"]["annotations"] == {"grafana_folder": "RocketMQ"}
    shipped = (CHART_DIR / "monitoring" / "grafana-dashboard.json").read_text()
    assert json.loads(cm["data"]["rmq-namesrv.json"]) == json.loads(shipped)
    default = render(ENABLED)
    (cm,) = [d for d in default.all("ConfigMap") if d["metadata"]["name"] == f"{FULLNAME}-dashboard"]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
