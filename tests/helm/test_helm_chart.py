"""The Helm chart, rendered by Helm's own engine, checked against Kubernetes schemas and the real application.

Ties to the code, never to hand-written lists: ConfigMap keys against service.config.SETTINGS, probe and test
paths against the routes of service.http.app.create_app, the CronJob's command against service.cli.build_parser.
"""

from __future__ import annotations

import base64
import re
import tomllib
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import pytest
import yaml
from chartkit import (
    CHART_DIR,
    DERIVED,
    K8S_VERSION,
    NAMESPACE,
    PRODUCTION_VALUES,
    README_END,
    README_START,
    RELEASE,
    ROOT,
    Rendered,
    ci_value_files,
    value_sets,
    values_reference,
    values_table,
)

from service.config import BY_NAME, SETTINGS, load_settings, parse_broker_tokens

pytestmark = pytest.mark.helm

SECRET_ENVS = {s.env for s in SETTINGS if s.secret}
PLAIN_ENVS = {s.env for s in SETTINGS if not s.secret}
# Settings the chart derives instead of exposing under `config`:
# the port from containerPort, the URL from `redis`.
# Chart defaults that deliberately differ from the application's defaults.
CHART_OVERRIDES = {"log_json": True}
DOWNWARD_API = {"POD_IP"}  # worker env entries the kubelet fills in (status.podIP), read by other entries
# Kinds not in the Kubernetes OpenAPI schemas (CRDs): skipped by kubernetes-validate, checked by hand.
CRD_KINDS = {("monitoring.coreos.com/v1", "ServiceMonitor"), ("monitoring.coreos.com/v1", "PrometheusRule")}
FULLNAME = f"{RELEASE}-rmq-namesrv"

ALL_VALUE_SETS = value_sets()


def _b64(value: str) -> str:
    return base64.b64decode(value).decode()


def _secret_data(r: Rendered, name: str) -> dict[str, str] | None:
    for d in r.all("Secret"):
        if d["metadata"]["name"] == name:
            return {k: _b64(v) for k, v in d.get("data", {}).items()} | dict(d.get("stringData", {}))
    return None


TLS_DIR = "/etc/rmq-namesrv/redis-tls"  # where the chart mounts Sentinel mode's TLS Secrets


def _as_mounted(env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """`env` with the chart's mounted TLS files standing in a temporary directory (the app checks they exist)."""
    out = {}
    for key, value in env.items():
        if value.startswith(TLS_DIR + "/"):
            value = str(tmp_path / value.removeprefix(TLS_DIR + "/"))
            Path(value).write_text("-")
        out[key] = value
    return out


def _cronjob_container(r: Rendered) -> dict[str, Any]:
    cron = r.one("CronJob")
    (container,) = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    return container


# --------------------------------------------------------------------------- lint, schema, Kubernetes schemas


def test_ci_value_files_exist():
    names = {p.name for p in ci_value_files()}
    assert {"production-values.yaml", "minimal-values.yaml"} <= names


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_lint_strict(values):
    report = helm.lint(CHART_DIR, values, strict=True, kube_version=f"v{K8S_VERSION}")
    assert report["errors"] == []
    # Severity 1 (info, e.g. "icon is recommended") is allowed; warnings (2) and errors (3) are not.
    assert [m for m in report["messages"] if m["severity"] >= 2] == []


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_manifests_valid_for_kubernetes(render, values):
    r = render(values)
    assert r.docs
    for doc in r.docs:
        where = f"{r.sources[id(doc)]}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        assert doc["metadata"]["namespace"] == NAMESPACE, where
        if (doc["apiVersion"], doc["kind"]) in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            path = ".".join(str(p) for p in e.path)
            pytest.fail(f"{where}: {path}: {e.message}")


def test_long_names_fit_kubernetes_limits(render):
    r = render({"fullnameOverride": "x" * 53, "serviceMonitor": {"enabled": True}})
    for doc in r.docs:
        name = doc["metadata"]["name"]
        # CronJob: the Job controller appends 11 characters; StatefulSet: so does controller-revision-hash.
        limit = 52 if doc["kind"] in ("CronJob", "StatefulSet") else 63
        assert len(name) <= limit, f"{doc['kind']}/{name}"
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name), name
    assert r.configmap["NAMESRV_REDIS_URL"].startswith(f"redis://{r.one('StatefulSet')['metadata']['name']}.")


@pytest.mark.parametrize(
    "values",
    [
        {"replicaCount": "two"},
        {"replicas": "two"},
        {"typo": 1},
        {"config": {"logLevel": "TRACE"}},
        {"config": {"notASetting": 1}},
        {"config": {"adminToken": "in-the-configmap"}},
        {"config": {"maxBodyBytes": 10}},
        {"redis": {"enabled": False}},  # external Redis needs a URL
        {"redis": {"enabled": False, "url": "http://redis:6379"}},
        {"auth": {"adminToken": "short"}},
        {"auth": {"brokerTokens": "clusterA:short"}},
        {"pdb": {"maxUnavailable": 0}},
    ],
    ids=repr,
)
def test_schema_rejects_bad_values(chart, values):
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(values)


def test_schema_broker_token_pattern_agrees_with_the_app(chart):
    for spec in (
        "clusterA:tok1-0123456789",
        "*:0123456789abcdef",
        "bare-token-0123456789",
        "a:0123456789ab, b.c_d-e:0123456789ab",
    ):
        parse_broker_tokens(spec)
        chart.validate_schema({"auth": {"brokerTokens": spec}})


def test_schema_config_matches_settings(chart):
    props = chart.schema["properties"]["config"]["properties"]
    kinds = {bool: "boolean", int: "integer", float: "number", str: "string"}
    for key, prop in props.items():
        matches = [s for s in SETTINGS if s.camel == key]
        assert matches, f"config.{key} is not a setting of service/config.py"
        s = matches[0]
        assert not s.secret, f"config.{key} is a secret setting: it belongs in a Secret"
        assert prop["type"] == kinds[s.kind], key
        if s.minimum is not None:
            assert prop.get("minimum") == s.minimum, key
        if s.maximum is not None:
            assert prop.get("maximum") == s.maximum, key
        if s.choices is not None:
            assert set(prop["enum"]) == set(s.choices), key


def test_values_expose_every_plain_setting(chart):
    config = chart.values["config"]
    exposed = {name for name in BY_NAME if BY_NAME[name].camel in config}
    plain = {s.name for s in SETTINGS if not s.secret}
    assert exposed | DERIVED == plain, "values.yaml `config` must list every non-secret setting"
    assert set(chart.schema["properties"]["config"]["properties"]) == set(config)
    for name in exposed:
        want = CHART_OVERRIDES.get(name, BY_NAME[name].default)
        assert config[BY_NAME[name].camel] == want, (
            f"config.{BY_NAME[name].camel}: chart default drifted from the app"
        )


def test_every_value_documented():
    """helm-docs style: every key in values.yaml has a `# --` comment block right above it."""
    lines = (CHART_DIR / "values.yaml").read_text().splitlines()
    missing = []
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)([A-Za-z0-9_.-]+):", line)
        if not m:
            continue
        j = i - 1
        documented = False
        while j >= 0 and lines[j].strip().startswith("#"):
            if lines[j].strip().startswith("# --"):
                documented = True
                break
            j -= 1
        if not documented:
            missing.append(f"line {i + 1}: {line.strip()}")
    assert missing == []


def test_readme_values_table_is_current():
    readme = (CHART_DIR / "README.md").read_text()
    table = readme.split(README_START, 1)[1].split(README_END, 1)[0]
    assert table.strip().splitlines() == values_table(), (
        "helm/README.md's values table is stale: run `python tests/helm/chartkit.py --write`"
    )
    assert all(desc for _, _, desc in values_reference())


# ------------------------------------------------------------------ workers: replicas, HPA, PDB, probes


def test_default_replicas_at_least_two(chart, render):
    assert chart.values["replicaCount"] >= 2 and "replicas" not in chart.values
    r = render()
    assert r.deployment["spec"]["replicas"] >= 2
    assert r.maybe("HorizontalPodAutoscaler") is None


def test_replicas_is_a_deprecated_alias_of_replica_count(render):
    assert render({"replicaCount": 4}).deployment["spec"]["replicas"] == 4
    r = render({"replicas": 3})
    assert r.deployment["spec"]["replicas"] == 3
    assert "`replicas` is deprecated" in r.notes


@pytest.mark.parametrize("values", [{"autoscaling": {"enabled": True}}, PRODUCTION_VALUES])
def test_hpa_replaces_replicas(render, values):
    r = render(values)
    assert "replicas" not in r.deployment["spec"]
    hpa = r.one("HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        "apps/v1",
        "Deployment",
        r.deployment["metadata"]["name"],
    )
    assert 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert hpa["spec"]["metrics"]


def test_hpa_min_above_max_refused(render):
    with pytest.raises(helm.HelmRenderError):
        render({"autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 3}})


def test_pdb_max_unavailable_one(render):
    r = render()
    pdb = r.one("PodDisruptionBudget")
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]
    assert pdb["spec"]["selector"] == r.deployment["spec"]["selector"]


def test_probes(render):
    r = render()
    c = r.worker
    assert c["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz"
    port_names = {p["name"]: p["containerPort"] for p in c["ports"]}
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        assert c[probe]["httpGet"]["port"] == "http"
    assert port_names == {"http": 8080, "remoting": 9876}
    assert r.configmap["NAMESRV_PORT"] == "8080" and r.configmap["NAMESRV_REMOTING_PORT"] == "9876"


def test_service(render):
    r = render()
    svc = r.one("Service", suffix=FULLNAME)
    assert svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"},
                                    {"name": "remoting", "port": 9876, "targetPort": "remoting", "protocol": "TCP"}]
    # /rocketmq/nsaddr answers the workers' announced pod addresses by default, not a fixed list
    assert r.configmap["NAMESRV_ADVERTISED_ADDRS"] == ""
    pod_labels = r.deployment["spec"]["template"]["metadata"]["labels"]
    assert svc["spec"]["selector"].items() <= pod_labels.items()
    redis_labels = r.one("StatefulSet")["spec"]["template"]["metadata"]["labels"]
    assert not svc["spec"]["selector"].items() <= redis_labels.items(), "worker Service must not select Redis"
    assert r.deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_pods_hardened(render, values):
    r = render(values)
    for name, spec in r.pod_specs():
        pod_sc = spec.get("securityContext", {})
        assert spec.get("automountServiceAccountToken") is False, name
        # a Service named namesrv-… in the namespace would otherwise set NAMESRV_PORT=tcp://… in every pod, which
        # the workers read as their port setting and refuse to start on (issue 39, second round)
        assert spec.get("enableServiceLinks") is False, name
        for c in spec["containers"]:
            sc = c.get("securityContext", {})
            where = f"{name}/{c['name']}"
            assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, where
            assert sc.get("runAsUser", pod_sc.get("runAsUser", 0)) != 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert "ALL" in sc.get("capabilities", {}).get("drop", []), where
            seccomp = sc.get("seccompProfile", pod_sc.get("seccompProfile", {}))
            assert seccomp.get("type") == "RuntimeDefault", where
            assert c["resources"]["requests"]["memory"], where
            assert c["resources"]["limits"]["memory"], where


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_termination_grace_exceeds_drain(render, values):
    r = render(values)
    spec = r.deployment["spec"]["template"]["spec"]
    drain = float(r.configmap.get("NAMESRV_DRAIN_GRACE_S", BY_NAME["drain_grace_s"].default))
    pre_stop = 0
    hook = r.worker.get("lifecycle", {}).get("preStop", {})
    if hook:
        assert hook["exec"]["command"][0] == "sleep"
        pre_stop = float(hook["exec"]["command"][1])
    assert spec["terminationGracePeriodSeconds"] > drain + pre_stop


def test_too_short_termination_grace_refused(render):
    with pytest.raises(helm.HelmRenderError, match="terminationGracePeriodSeconds"):
        render({"terminationGracePeriodSeconds": 20})
    with pytest.raises(helm.HelmRenderError, match="terminationGracePeriodSeconds"):
        render({"config": {"drainGraceS": 40}})


def test_topology_spread(render):
    r = render()
    spread = r.deployment["spec"]["template"]["spec"]["topologySpreadConstraints"]
    assert {c["topologyKey"] for c in spread} == {"kubernetes.io/hostname", "topology.kubernetes.io/zone"}
    for c in spread:
        assert c["labelSelector"]["matchLabels"] == r.deployment["spec"]["selector"]["matchLabels"]
    custom = [
        {
            "maxSkew": 2,
            "topologyKey": "zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"a": "b"}},
        }
    ]
    r = render({"topologySpreadConstraints": custom})
    assert r.deployment["spec"]["template"]["spec"]["topologySpreadConstraints"] == custom


# --------------------------------------------------------------------------- ConfigMap, Secrets, checksums


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_configmap_keys_are_real_settings(render, values, tmp_path):
    r = render(values)
    data = r.configmap
    for key in data:
        assert key in PLAIN_ENVS, f"ConfigMap key {key} is not a non-secret setting of service/config.py"
    assert not (set(data) & SECRET_ENVS)
    assert not load_settings(env=_as_mounted(data, tmp_path)).embedded, (
        "the chart must never run the workers in embedded mode")
    extra = {e["name"] for e in r.merged["extraEnv"]} | DOWNWARD_API
    for env in r.worker.get("env", []):
        assert env["name"] in PLAIN_ENVS | SECRET_ENVS | extra, env["name"]
        if env["name"] in SECRET_ENVS:
            assert "secretKeyRef" in env["valueFrom"], env["name"]
    for doc in r.all("Secret"):
        for key in doc.get("data", {}):
            assert key in SECRET_ENVS or key == "redis-password", f"{doc['metadata']['name']}: {key}"


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_app_accepts_rendered_config(render, values, tmp_path):
    """What the pod's environment will hold (ConfigMap + chart Secrets) loads through service.config."""
    r = render(values)
    env = dict(r.configmap)
    auth = r.merged["auth"]
    if auth["enabled"] and not auth["existingSecret"]:
        env |= _secret_data(r, f"{FULLNAME}-auth")
    pod = {}  # what the kubelet fills in from the downward API, and expands as $(NAME) in later values
    for item in r.worker.get("env", []):
        ref = item.get("valueFrom", {}).get("secretKeyRef")
        if ref:
            data = _secret_data(r, ref["name"])
            if data is not None:
                env[item["name"]] = data[ref["key"]]
        elif item.get("valueFrom", {}).get("fieldRef"):
            pod[item["name"]] = {"status.podIP": "10.244.1.7"}[item["valueFrom"]["fieldRef"]["fieldPath"]]
        elif "value" in item and item["name"].startswith("NAMESRV_"):
            env[item["name"]] = re.sub(r"\$\((\w+)\)", lambda m: pod[m.group(1)], item["value"])
    settings = load_settings(env=_as_mounted(env, tmp_path))
    assert settings.port == r.merged["containerPort"]
    assert not settings.embedded
    assert settings.max_body_bytes == r.merged["config"]["maxBodyBytes"]


def _env(r) -> dict[str, dict]:
    return {e["name"]: e for e in r.worker.get("env", [])}


def test_each_pod_announces_its_own_ip_for_the_address_server(render):
    r = render()
    env = _env(r)
    assert env["POD_IP"]["valueFrom"] == {"fieldRef": {"fieldPath": "status.podIP"}}
    names = list(env)
    assert names.index("POD_IP") < names.index("NAMESRV_ANNOUNCE_ADDR")  # $(POD_IP) expands from earlier entries
    assert env["NAMESRV_ANNOUNCE_ADDR"]["value"] == "$(POD_IP):9876"
    assert "NAMESRV_ANNOUNCE_ADDR" not in r.configmap
    assert r.configmap["NAMESRV_ANNOUNCE_LEASE_MS"] == "15000"
    v6 = _env(render({"config": {"host": "::"}, "remotingPort": 19876}))
    assert v6["NAMESRV_ANNOUNCE_ADDR"]["value"] == "[$(POD_IP)]:19876"
    fixed = render({"config": {"announceAddr": "ns.example:9876", "advertisedAddrs": "lb.example:9876"}})
    assert "POD_IP" not in _env(fixed) and "NAMESRV_ANNOUNCE_ADDR" not in _env(fixed)
    assert fixed.configmap["NAMESRV_ANNOUNCE_ADDR"] == "ns.example:9876"
    assert fixed.configmap["NAMESRV_ADVERTISED_ADDRS"] == "lb.example:9876"
    # controller mode keeps the Service as the controller's leader address (the first advertised address)
    for values in ({"controller": {"enabled": True}}, {"config": {"controller": True}}):
        assert render(values).configmap["NAMESRV_ADVERTISED_ADDRS"] == f"{FULLNAME}.{NAMESPACE}.svc:9876"


@pytest.mark.parametrize("addr", ["no-port", "a:1;b:2", "h:123456"])
def test_schema_refuses_a_bad_announce_addr(chart, addr):
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema({"config": {"announceAddr": addr}})


def test_auth_on_by_default_with_generated_tokens(render):
    r = render()
    data = _secret_data(r, f"{FULLNAME}-auth")
    assert data is not None
    assert set(data) == {"NAMESRV_BROKER_TOKENS", "NAMESRV_ADMIN_TOKEN"}  # reads stay open by default
    ((cluster, token),) = parse_broker_tokens(data["NAMESRV_BROKER_TOKENS"])
    assert cluster == "*" and len(token) == 32 and token.isalnum()
    assert len(data["NAMESRV_ADMIN_TOKEN"]) == 32
    assert {"secretRef": {"name": f"{FULLNAME}-auth"}} in r.worker["envFrom"]
    assert data["NAMESRV_ADMIN_TOKEN"] not in str(r.configmap)


def test_explicit_tokens_and_read_token(render):
    r = render(
        {
            "auth": {
                "adminToken": "admin-0123456789",
                "brokerTokens": "c1:broker-0123456789",
                "generateReadToken": True,
            }
        }
    )
    data = _secret_data(r, f"{FULLNAME}-auth")
    assert data["NAMESRV_ADMIN_TOKEN"] == "admin-0123456789"
    assert data["NAMESRV_BROKER_TOKENS"] == "c1:broker-0123456789"
    assert len(data["NAMESRV_READ_TOKEN"]) == 32
    # Between the auth Secret and the Redis password, the chart can supply every secret setting there is (the
    # sentinels' own password in Sentinel mode only: test_redis_sentinel_mode).
    supplied = set(data) | {e["name"] for e in r.worker["env"] if "secretKeyRef" in e.get("valueFrom", {})}
    assert supplied | {"NAMESRV_REDIS_SENTINEL_PASSWORD"} == SECRET_ENVS


def test_auth_disabled_renders_no_token_secret(render):
    r = render({"auth": {"enabled": False}})
    assert _secret_data(r, f"{FULLNAME}-auth") is None
    assert all("secretRef" not in ref for ref in r.worker["envFrom"])


@pytest.mark.parametrize(
    "values",
    [
        {"auth": {"existingSecret": "my-tokens"}, "redis": {"existingSecret": "my-redis"}},
        PRODUCTION_VALUES,
        yaml.safe_load((CHART_DIR / "ci" / "production-values.yaml").read_text()),
    ],
)
def test_no_secret_rendered_with_existing_secrets(render, values):
    r = render(values)
    assert r.all("Secret") == []
    auth_secret = r.merged["auth"]["existingSecret"]
    assert {"secretRef": {"name": auth_secret}} in r.worker["envFrom"]
    (pw,) = [e for e in r.worker["env"] if e["name"] == "NAMESRV_REDIS_PASSWORD"]
    assert pw["valueFrom"]["secretKeyRef"] == {
        "name": r.merged["redis"]["existingSecret"],
        "key": r.merged["redis"]["existingSecretPasswordKey"],
    }
    # the generated-token hint is not shown when nothing is generated
    assert "generated at install" not in r.notes


def test_existing_auth_secret_only_keeps_redis_secret(render):
    r = render({"auth": {"existingSecret": "my-tokens"}})
    assert [d["metadata"]["name"] for d in r.all("Secret")] == [f"{FULLNAME}-redis"]


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_references_resolve(render, values):
    """Every Secret/ConfigMap a pod reads is rendered by the chart (with that key) or named in the values."""
    r = render(values)
    rendered = {("Secret", d["metadata"]["name"]): set(d.get("data", {})) for d in r.all("Secret")}
    rendered |= {("ConfigMap", d["metadata"]["name"]): set(d["data"]) for d in r.all("ConfigMap")}
    external = {
        ("Secret", n) for n in (r.merged["auth"]["existingSecret"], r.merged["redis"]["existingSecret"],
                                r.merged["redis"]["sentinel"]["existingSecret"]) if n
    }
    for name, spec in r.pod_specs():
        for c in spec["containers"]:
            for src in c.get("envFrom", []):
                kind, ref = (
                    ("Secret", src["secretRef"]) if "secretRef" in src else ("ConfigMap", src["configMapRef"])
                )
                assert (kind, ref["name"]) in rendered or (kind, ref["name"]) in external, (name, ref)
            for e in c.get("env", []):
                ref = e.get("valueFrom", {}).get("secretKeyRef")
                if not ref:
                    continue
                key = ("Secret", ref["name"])
                if key in rendered:
                    assert ref["key"] in rendered[key] or ref.get("optional"), (name, ref)
                else:
                    assert key in external, (name, ref)


def test_checksum_tracks_config_and_is_stable(render):
    def checksums(values):
        ann = render(values).deployment["spec"]["template"]["metadata"]["annotations"]
        return ann["checksum/config"], ann["checksum/secret"]

    base = checksums({})
    # Stable across renders although the Secret's generated tokens change on every render.
    assert checksums({}) == base
    assert render({}).all("Secret")[0]["data"] != render({}).all("Secret")[0]["data"]
    changed = checksums({"config": {"logLevel": "DEBUG"}})
    assert changed[0] != base[0]
    assert checksums({"redis": {"enabled": False, "url": "redis://r:6379/0"}})[0] != base[0]
    assert checksums({"auth": {"adminToken": "admin-0123456789"}})[1] != base[1]
    assert checksums({"auth": {"adminToken": "admin-0123456789"}})[0] == base[0]


# --------------------------------------------------------------------------- Redis


def test_in_chart_redis_by_default(render):
    r = render()
    sts = r.one("StatefulSet")
    (c,) = sts["spec"]["template"]["spec"]["containers"]
    assert c["image"] == "redis:7-alpine"
    assert sts["spec"]["replicas"] == 1
    args = c["args"]
    assert args[args.index("--save") + 1] == ""
    assert "--requirepass" in args
    assert "volumeClaimTemplates" not in sts["spec"]
    svc = r.one("Service", suffix="-redis")
    assert svc["spec"]["ports"][0]["port"] == 6379
    assert svc["spec"]["selector"].items() <= sts["spec"]["template"]["metadata"]["labels"].items()
    assert r.configmap["NAMESRV_REDIS_URL"] == f"redis://{svc['metadata']['name']}.{NAMESPACE}.svc:6379/0"
    assert sts["spec"]["serviceName"] == r.one("Service", suffix="-redis-headless")["metadata"]["name"]


def test_redis_persistence(render):
    r = render({"redis": {"persistence": {"enabled": True, "size": "5Gi"}}})
    sts = r.one("StatefulSet")
    args = sts["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--save" not in args and args[args.index("--appendonly") + 1] == "yes"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"


def test_external_redis(render):
    r = render({"redis": {"enabled": False, "url": "rediss://managed:6380/2", "password": "pw-0123456789"}})
    assert r.maybe("StatefulSet") is None
    assert r.configmap["NAMESRV_REDIS_URL"] == "rediss://managed:6380/2"
    assert _secret_data(r, f"{FULLNAME}-redis") == {"redis-password": "pw-0123456789"}
    r = render({"redis": {"enabled": False, "url": "redis://managed:6379/0"}})
    assert _secret_data(r, f"{FULLNAME}-redis") is None
    assert all(e["name"] != "NAMESRV_REDIS_PASSWORD" for e in r.worker.get("env", []))


def test_redis_sentinel_mode(render):
    r = render({"redis": {"enabled": False, "mode": "sentinel", "existingSecret": "data-pw", "sentinel": {
        "addresses": ["s0:26379", "s1:26379", "[fd00::2]:26379"], "masterName": "rmq",
        "existingSecret": "sentinel-pw", "existingSecretPasswordKey": "pw"}}})
    assert r.maybe("StatefulSet") is None
    cm = r.configmap
    assert "NAMESRV_REDIS_URL" not in cm and "NAMESRV_REDIS_CLUSTER" not in cm
    assert (cm["NAMESRV_REDIS_SENTINELS"], cm["NAMESRV_REDIS_MASTER_NAME"]) == ("s0:26379,s1:26379,[fd00::2]:26379",
                                                                                "rmq")
    for container in (r.worker, _cronjob_container(r)):
        refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container.get("env", [])
            if "secretKeyRef" in e.get("valueFrom", {})}
        assert refs["NAMESRV_REDIS_PASSWORD"] == {"name": "data-pw", "key": "redis-password"}
        assert refs["NAMESRV_REDIS_SENTINEL_PASSWORD"] == {"name": "sentinel-pw", "key": "pw"}
    assert "--redis-url" not in _cronjob_container(r)["args"]  # the job reads the sentinels from the ConfigMap
    settings = load_settings(env={**cm, "NAMESRV_REDIS_PASSWORD": "x", "NAMESRV_REDIS_SENTINEL_PASSWORD": "y"})
    assert (settings.redis_mode, settings.redis_master_name) == ("sentinel", "rmq")
    assert _secret_data(r, f"{FULLNAME}-redis") is None  # both passwords come from existing Secrets


def test_redis_sentinel_tls(render, tmp_path):
    """TLS on: the ConfigMap turns it on for workers and the skew job, the CA and client Secrets are projected
    read-only into one directory of both pods, and the app accepts the result once those files exist."""
    sentinel = {"addresses": ["s0:26379", "s1:26379", "s2:26379"]}
    r = render({"redis": {"enabled": False, "mode": "sentinel", "sentinel": {**sentinel, "tls": {
        "enabled": True, "caSecret": "redis-ca", "caSecretKey": "bundle.pem", "clientSecret": "redis-client"}}}})
    cm = r.configmap
    tls_dir = TLS_DIR
    assert cm["NAMESRV_REDIS_SENTINEL_TLS"] == "true"
    assert (cm["NAMESRV_REDIS_TLS_CA_FILE"], cm["NAMESRV_REDIS_TLS_CERT_FILE"], cm["NAMESRV_REDIS_TLS_KEY_FILE"]) == (
        f"{tls_dir}/bundle.pem", f"{tls_dir}/tls.crt", f"{tls_dir}/tls.key")
    cron_pod = r.one("CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for pod, container in ((r.deployment["spec"]["template"]["spec"], r.worker), (cron_pod, _cronjob_container(r))):
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == "redis-tls"]
        assert mount == {"name": "redis-tls", "mountPath": tls_dir, "readOnly": True}
        (volume,) = [v for v in pod["volumes"] if v["name"] == "redis-tls"]
        assert [(src["secret"]["name"], [i["path"] for i in src["secret"]["items"]])
                for src in volume["projected"]["sources"]] == [("redis-ca", ["bundle.pem"]),
                                                               ("redis-client", ["tls.crt", "tls.key"])]
    assert load_settings(env=_as_mounted(cm, tmp_path)).sentinel_tls_options == {
        "ssl": True, "ssl_ca_certs": f"{tmp_path}/bundle.pem", "ssl_certfile": f"{tmp_path}/tls.crt",
        "ssl_keyfile": f"{tmp_path}/tls.key"}

    # TLS with the image's system CAs: nothing to mount
    r = render({"redis": {"enabled": False, "mode": "sentinel", "sentinel": {**sentinel, "tls": {"enabled": True}}}})
    assert r.configmap["NAMESRV_REDIS_SENTINEL_TLS"] == "true" and "NAMESRV_REDIS_TLS_CA_FILE" not in r.configmap
    assert all(v["name"] != "redis-tls" for v in r.deployment["spec"]["template"]["spec"]["volumes"])
    # TLS off (the default), or another mode: no TLS settings at all
    for values in ({"redis": {"enabled": False, "mode": "sentinel", "sentinel": sentinel}},
                   {"redis": {"enabled": False, "url": "redis://h:1", "sentinel": {"tls": {
                       "enabled": True, "caSecret": "redis-ca"}}}}):
        r = render(values)
        assert not any(k.startswith("NAMESRV_REDIS_TLS") or k == "NAMESRV_REDIS_SENTINEL_TLS" for k in r.configmap)
        assert all(v["name"] != "redis-tls" for v in r.deployment["spec"]["template"]["spec"]["volumes"])


def test_redis_cluster_mode(render):
    r = render({"redis": {"enabled": False, "mode": "cluster", "url": "redis://seed.redis:6379",
                          "cluster": {"seeds": ["seed-1.redis:6379", "seed-2.redis:6379"]},
                          "existingSecret": "cluster-pw"}, "config": {"redisWaitReplicas": 1}})
    cm = r.configmap
    assert (cm["NAMESRV_REDIS_URL"], cm["NAMESRV_REDIS_CLUSTER"]) == ("redis://seed.redis:6379", "true")
    assert cm["NAMESRV_REDIS_CLUSTER_NODES"] == "seed-1.redis:6379,seed-2.redis:6379"
    assert "NAMESRV_REDIS_SENTINELS" not in cm and cm["NAMESRV_REDIS_WAIT_REPLICAS"] == "1"
    settings = load_settings(env=cm)
    assert (settings.redis_mode, settings.redis_wait_replicas) == ("cluster", 1)
    assert all(e["name"] != "NAMESRV_REDIS_SENTINEL_PASSWORD" for e in r.worker.get("env", []))


def test_redis_single_mode_is_the_default(render):
    for values in ({}, {"redis": {"enabled": False, "url": "rediss://h:6380/0?ssl_ca_certs=/ca/ca.pem"}}):
        cm = render(values).configmap
        assert load_settings(env=cm).redis_mode == "single"
        assert "NAMESRV_REDIS_SENTINELS" not in cm and "NAMESRV_REDIS_CLUSTER" not in cm


@pytest.mark.parametrize(("values", "fragment"), [
    ({"redis": {"enabled": False, "mode": "sentinel"}}, "sentinel/addresses|sentinel.addresses"),
    ({"redis": {"enabled": False, "mode": "sentinel", "url": "redis://h:1", "sentinel": {"addresses": ["s:1"]}}},
     "redis/url|redis.url must be empty"),
    ({"redis": {"enabled": False, "mode": "cluster"}}, "redis/url|redis.url is required"),
    ({"redis": {"enabled": True, "mode": "cluster"}}, "redis/mode|redis.mode"),
    ({"redis": {"enabled": False, "mode": "sentinel", "sentinel": {"addresses": ["no-port"]}}}, "addresses"),
])
def test_redis_mode_misconfigurations_refused(render, values, fragment):
    # values.schema.json refuses them; the templates' own `fail`s back it up for --skip-schema-validation
    with pytest.raises((helm.HelmValuesError, helm.HelmRenderError), match=fragment):
        render(values, check_schema=False)


def test_external_redis_without_url_refused(render):
    # Helm's render checks values.schema.json first; the template's own `fail` backs it up for
    # --skip-schema-validation installs.
    with pytest.raises((helm.HelmValuesError, helm.HelmRenderError), match="redis[./]url"):
        render({"redis": {"enabled": False}}, check_schema=False)


# --------------------------------------------------------------------------- skew-report CronJob


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_cronjob(render, values):
    r = render(values)
    if not r.merged["skew"]["cronJob"]["enabled"]:
        assert r.maybe("CronJob") is None
        return
    cron = r.one("CronJob")
    assert cron["apiVersion"] == "batch/v1"
    c = _cronjob_container(r)
    assert c["command"] == ["namesrv"]
    args = c["args"]
    assert args[0] == "skew-report"
    if "NAMESRV_REDIS_URL" in r.configmap:
        assert args[args.index("--redis-url") + 1] == r.configmap["NAMESRV_REDIS_URL"]
    else:  # Sentinel mode: the sentinels come from the ConfigMap
        assert "--redis-url" not in args and r.configmap["NAMESRV_REDIS_SENTINELS"]
    assert args[args.index("--master") + 1] == r.merged["skew"]["master"]
    out = args[args.index("--out") + 1]
    mounts = [m["mountPath"] for m in c["volumeMounts"]]
    assert any(out == m or out.startswith(m.rstrip("/") + "/") for m in mounts), "report dir must be writable"
    assert "/tmp" in mounts and c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["image"].split(":")[0] == r.merged["skew"]["image"]["repository"]
    assert cron["spec"]["schedule"] == r.merged["skew"]["cronJob"]["schedule"]
    # the settings the job reads (key prefix, history length) come from the ConfigMap, as for the workers
    assert {"configMapRef": {"name": FULLNAME}} in c["envFrom"]
    assert r.configmap["NAMESRV_SKEW_HISTORY"] == str(r.merged["config"]["skewHistory"])


def test_skew_cronjob_enabled_and_schedule(render):
    assert render({"skew": {"cronJob": {"enabled": False}}}).maybe("CronJob") is None
    r = render({"skew": {"cronJob": {"schedule": "*/30 * * * *", "timeZone": "Europe/Paris"}}})
    cron = r.one("CronJob")
    assert (cron["spec"]["schedule"], cron["spec"]["timeZone"]) == ("*/30 * * * *", "Europe/Paris")
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"  # a slow run is never overlapped
    assert "*/30 * * * *" in r.notes


@pytest.mark.parametrize(
    "values",
    [
        {"skew": {"cronJob": {"enabled": "yes"}}},
        {"skew": {"cronJob": {"schedule": "hourly"}}},
        {"skew": {"cronJob": {"concurrencyPolicy": "Sometimes"}}},
        {"skew": {"enabled": True}},  # enabled lives under cronJob
        {"skewReport": {"enabled": True}},  # the old key: refused, not silently ignored
    ],
)
def test_skew_schema_refuses(chart, values):
    with pytest.raises(helm.HelmValuesError):
        chart.validate_schema(values)


def test_cronjob_defaults_to_local_spark(render):
    args = _cronjob_container(render())["args"]
    assert args[args.index("--master") + 1] == "local[*]"
    assert args[args.index("--out") + 1] == "/tmp/report"


# --------------------------------------------------------------------------- ServiceMonitor, helm test, NOTES


def test_service_monitor_off_by_default(render):
    assert render().maybe("ServiceMonitor") is None


def test_service_monitor(render):
    r = render({"serviceMonitor": {"enabled": True, "labels": {"release": "prom"}}})
    sm = r.one("ServiceMonitor")
    assert sm["apiVersion"] == "monitoring.coreos.com/v1"
    assert sm["metadata"]["labels"]["release"] == "prom"
    (ep,) = sm["spec"]["endpoints"]
    assert ep["port"] == "http" and ep["path"] == "/metrics"
    svc = r.one("Service", suffix=FULLNAME)
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()


def _test_pod_paths(r: Rendered) -> list[str]:
    pod = r.one("Pod")
    script = " ".join(pod["spec"]["containers"][0]["args"])
    return re.findall(r'\$base(/[^"\s]*)', script)


def test_helm_test_pod(render):
    r = render()
    pod = r.one("Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    assert set(_test_pod_paths(r)) == {"/readyz", "/v1/cluster-info"}
    script = pod["spec"]["containers"][0]["args"][0]
    assert f"http://{FULLNAME}.{NAMESPACE}.svc:8080" in script


def test_notes(render):
    r = render()
    assert FULLNAME in r.notes and "helm test" in r.notes
    assert "WARNING" in render({"auth": {"enabled": False}}).notes
    assert f"-Drocketmq.namesrv.domain={FULLNAME}.{NAMESPACE}.svc:8080" in r.notes
    assert "every live pod's IP at 9876" in r.notes
    assert "answers lb.example:9876" in render({"config": {"advertisedAddrs": "lb.example:9876"}}).notes
    controller = render({"controller": {"enabled": True}}).notes
    assert f"answers {FULLNAME}.{NAMESPACE}.svc:9876 (controller mode)" in controller


# --------------------------------------------------------------------------- the real application and CLI


def _import_or_skip(module: str):
    """Import a module another issue delivers; skip only while that module itself does not exist yet."""
    import importlib

    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name == module:
            pytest.skip(f"{module} does not exist yet")
        raise


async def test_chart_paths_are_app_routes(render):
    import fakeredis

    from service.core import NameServer
    from service.http.app import create_app
    from service.store import RouteStore

    settings = load_settings(env={})
    app = create_app(NameServer(RouteStore(fakeredis.FakeAsyncRedis(decode_responses=True)), settings))
    routes = {r.canonical for r in app.router.resources()}
    r = render({"serviceMonitor": {"enabled": True}})
    c = r.worker
    used = {c[p]["httpGet"]["path"] for p in ("livenessProbe", "readinessProbe", "startupProbe")}
    used |= {ep["path"] for ep in r.one("ServiceMonitor")["spec"]["endpoints"]}
    used |= set(_test_pod_paths(r))
    assert used == {"/livez", "/readyz", "/metrics", "/v1/cluster-info"}
    assert used <= routes, f"not served by service.http.app: {used - routes}"


@pytest.mark.parametrize("values", ALL_VALUE_SETS)
def test_container_commands_are_cli_subcommands(render, values):
    cli = _import_or_skip("service.cli")
    parser = cli.build_parser()
    r = render(values)
    commands = [r.worker["args"]]
    if r.maybe("CronJob") is not None:
        c = _cronjob_container(r)
        assert c["command"] == ["namesrv"]
        commands.append(c["args"])
    for argv in commands:
        try:
            parser.parse_args(argv)
        except SystemExit as e:  # argparse exits on an unknown subcommand or option
            pytest.fail(
                f"`namesrv {' '.join(argv)}` is not accepted by service.cli.build_parser(): exit {e.code}"
            )


# --------------------------------------------------------------------------- the image


def test_dockerfile_matches_chart_and_package(chart):
    dockerfile = (ROOT / "Dockerfile").read_text()
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "namesrv" in pyproject["project"]["scripts"]
    assert 'ENTRYPOINT ["namesrv"]' in dockerfile
    assert 'CMD ["serve"]' in dockerfile
    exposed = {int(p) for line in re.findall(r"^EXPOSE (.+)$", dockerfile, re.M) for p in line.split()}
    assert exposed == {chart.values["containerPort"], chart.values["remotingPort"]}, "EXPOSE both doors"
    uid = chart.values["podSecurityContext"]["runAsUser"]
    users = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert users and all(u == f"{uid}:{uid}" for u in users), "images must run as the chart's uid (numeric)"
    assert "default-jre-headless" in dockerfile and ".[spark]" in dockerfile
    # the skew image is a named stage of the same Dockerfile
    assert re.search(r"^FROM \S+ AS skew$", dockerfile, re.M)
    dockerignore = (ROOT / ".dockerignore").read_text().split()
    assert "*" in dockerignore and "!service" in dockerignore and "!lua" in dockerignore


# --------------------------------------------------------------------------- what helm/README.md says of the chart


def test_readme_names_every_port_of_the_service(render):
    """The "What gets installed" row of the Service names each port the chart's Service has, by number and name."""
    svc = render().one("Service", suffix=FULLNAME)
    row = next(x for x in (CHART_DIR / "README.md").read_text().splitlines() if x.startswith("| Service |"))
    for port in svc["spec"]["ports"]:
        assert f"{port['port']} named `{port['name']}`" in row, (port, row)


def test_readme_network_policy_admits_every_door_of_the_workers(chart):
    """The NetworkPolicy the README recommends is a valid one (Kubernetes' schema), selects the worker pods of a
    release named as in the example, and admits brokers and clients to every port of the Service (9876 too)."""
    readme = (CHART_DIR / "README.md").read_text()
    block = re.search(r"```yaml\n(apiVersion: networking.k8s.io/v1\nkind: NetworkPolicy\n.*?)```", readme, re.S)
    assert block, "helm/README.md shows no NetworkPolicy"
    policy = yaml.safe_load(block.group(1))
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    release = policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/instance"]
    namespace = policy["metadata"]["namespace"]
    manifests = chart.render({}, name=release, namespace=namespace)
    docs = [d for path, text in manifests.items() if not path.endswith("NOTES.txt")
            for d in yaml.safe_load_all(text) if d]
    deployment = next(d for d in docs if d.get("kind") == "Deployment")
    service = next(d for d in docs if d.get("kind") == "Service" and d["metadata"]["name"].endswith("rmq-namesrv"))
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod_labels.items()
    clients = policy["spec"]["ingress"][0]
    admitted = {p["port"] for p in clients["ports"]}
    assert {p["targetPort"] for p in service["spec"]["ports"]} <= admitted
    container_ports = {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
    assert admitted <= container_ports  # named ports the pods really have


def test_controller_enabled_turns_the_controller_on(render):
    """Issue 23 names the switch `controller.enabled`; `config.controller` is the same setting by the chart's rule."""
    assert render().configmap["NAMESRV_CONTROLLER"] == "false"
    assert render({"controller": {"enabled": True}}).configmap["NAMESRV_CONTROLLER"] == "true"
    assert render({"config": {"controller": True}}).configmap["NAMESRV_CONTROLLER"] == "true"
