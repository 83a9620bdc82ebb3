"""deploy/kubernetes/: `kubectl kustomize` renders each overlay, and what it renders keeps the
server's contract: probes on /readyz and /livez with a start-up budget, one GPU a server on the GPU
overlay and none on the CPU one, a grace period longer than the drain, a PDB and an HPA on the
servers, servers that wait for the export Job's manifests, a restricted security context, and only
`OMNI_*` variables the server knows.

kubectl is the pinned one of tests/deploy/get_kubectl.sh (from PyPI), else one on PATH; the
Kubernetes API's schemas come with kubernetes-validate (tests/deploy/get_kubernetes_validate.sh)."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import yaml

from app.config import _ENV_NAMES, OTHER_VARIABLES, Settings
from models.export import memory_size
from app.metrics import Metrics
from models.manifest import MANIFEST
from tests.conftest import ROOT
from tests.deploy import tools

K8S = os.path.join(ROOT, "deploy", "kubernetes")
OVERLAYS = ("gpu", "cpu")
SERVER_LABELS = {
    "app.kubernetes.io/name": "system1-omni",
    "app.kubernetes.io/component": "server",
    "app.kubernetes.io/instance": "omni",
}
# The oldest Kubernetes the manifests are checked against (kubectl 1.27 ships Kustomize 5), and the newest
# kubernetes-validate knows.
KUBERNETES_VERSIONS = ("1.27.0", "1.37.0")
# What a server needs after SIGTERM beyond its requests' deadline and Granian's kill timeout:
# flushing its traces (app/tracing.py flushes the batch span processor on shutdown).
FLUSH_S = 5


@pytest.fixture(scope="module")
def validator() -> str:
    proc = tools.script("get_kubernetes_validate.sh", timeout=600)
    if proc.returncode != 0:
        tools.cannot_run(
            "kubernetes-validate cannot be installed (tests/deploy/get_kubernetes_validate.sh): "
            + proc.stderr.strip()[-1000:]
        )
    return proc.stdout.strip().splitlines()[-1]


def kustomize(kubectl: str, path: str) -> list[dict]:
    proc = subprocess.run([kubectl, "kustomize", path], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@pytest.fixture(scope="module")
def rendered(kubectl) -> dict[str, list[dict]]:
    return {name: kustomize(kubectl, os.path.join(K8S, "overlays", name)) for name in OVERLAYS}


def one(docs: list[dict], kind: str, name: str | None = None) -> dict:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [d["metadata"]["name"] for d in docs if d["kind"] == kind])
    return found[0]


def server(docs) -> dict:
    """The servers' Deployment (the balancer component adds another)."""
    (found,) = [
        d
        for d in docs
        if d["kind"] == "Deployment"
        and d["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/component"] == "server"
    ]
    return found


def container(pod_spec: dict, name: str, init: bool = False) -> dict:
    return next(c for c in pod_spec["initContainers" if init else "containers"] if c["name"] == name)


def env_of(docs: list[dict], c: dict) -> dict[str, str]:
    """A container's environment: its ConfigMaps (envFrom), then its own `env` values."""
    env = {}
    for source in c.get("envFrom", []):
        env.update(one(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
    env.update({e["name"]: e["value"] for e in c.get("env", []) if "value" in e})
    return env


def dockerfile() -> str:
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        return f.read()


def entrypoint_option(flag: str) -> int:
    """A number the runtime image's Granian entrypoint passes (`"--flag", "N"`)."""
    m = re.search(r'"%s",\s*"(\d+)"' % re.escape(flag), dockerfile())
    assert m, flag
    return int(m.group(1))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_overlay_renders_the_whole_stack(rendered, overlay):
    docs = rendered[overlay]
    kinds = sorted(
        (d["kind"], d["metadata"]["name"].rsplit("-", 1)[0] if d["kind"] == "ConfigMap" else d["metadata"]["name"])
        for d in docs
    )
    assert kinds == sorted(
        [
            ("ConfigMap", "omni-env"),
            ("ConfigMap", "omni-export-env"),
            ("Deployment", "omni-server"),
            ("HorizontalPodAutoscaler", "omni-server"),
            ("Job", "omni-export"),
            ("PersistentVolumeClaim", "omni-hf-cache"),
            ("PersistentVolumeClaim", "omni-models"),
            ("PodDisruptionBudget", "omni-server"),
            ("Service", "omni-server"),
        ]
    )
    for d in docs:
        assert d["apiVersion"] and d["metadata"]["labels"]["app.kubernetes.io/part-of"] == "system1-omni"
        assert "namespace" not in d["metadata"], "the operator picks the namespace (kubectl apply -n)"


def assert_valid(validator: str, docs: list, path) -> None:
    """Every object of `docs` (written to `path`) is valid against each KUBERNETES_VERSIONS'
    API schemas, strictly: a misspelt or misplaced field is refused."""
    path.write_text(yaml.safe_dump_all(docs))
    for version in KUBERNETES_VERSIONS:
        proc = subprocess.run(
            [validator, "-m", "kubernetes_validate", "--strict", "--quiet", "-k", version, str(path)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, (version, proc.stdout + proc.stderr)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_valid_against_the_kubernetes_api_schemas(rendered, validator, overlay, tmp_path):
    """Strict: a misspelt or misplaced field is refused, as the API server would refuse it."""
    assert_valid(validator, rendered[overlay], tmp_path / (overlay + ".yaml"))


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_probes_ask_readyz_and_livez_on_the_served_port_with_a_startup_budget(rendered, overlay):
    pod = server(rendered[overlay])["spec"]["template"]["spec"]
    c = container(pod, "server")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports == {"http": 8000}
    assert "EXPOSE 8000" in dockerfile() and '"--port", "8000"' in dockerfile()
    assert "command" not in c and "args" not in c, "the image's Granian entrypoint runs as shipped"
    paths = {kind: c[kind]["httpGet"] for kind in ("startupProbe", "readinessProbe", "livenessProbe")}
    assert paths == {
        "startupProbe": {"path": "/readyz", "port": "http"},
        "readinessProbe": {"path": "/readyz", "port": "http"},
        "livenessProbe": {"path": "/livez", "port": "http"},
    }
    # The start-up budget covers at least the image's own HEALTHCHECK start period (the largest
    # export's load, capture and warm-up), and each probe's timeout fits its period.
    start_period = int(re.search(r"--start-period=(\d+)s", dockerfile()).group(1))
    startup = c["startupProbe"]
    assert startup["periodSeconds"] * startup["failureThreshold"] >= start_period
    for kind in paths:
        assert c[kind]["timeoutSeconds"] < c[kind]["periodSeconds"]
    assert c["livenessProbe"]["failureThreshold"] >= 3


def test_the_gpu_overlay_gives_each_server_and_the_export_one_gpu(rendered):
    docs = rendered["gpu"]
    for obj, name in ((server(docs), "server"), (one(docs, "Job", "omni-export"), "export")):
        pod = obj["spec"]["template"]["spec"]
        c = container(pod, name)
        assert c["resources"]["limits"]["nvidia.com/gpu"] == 1
        assert pod["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
        assert c["image"].split(":")[1] == "0.1.0"
    assert env_of(docs, container(server(docs)["spec"]["template"]["spec"], "server"))["OMNI_DEVICE"] == "cuda"
    export_env = env_of(docs, container(one(docs, "Job")["spec"]["template"]["spec"], "export"))
    assert (export_env["OMNI_EXPORT_DTYPE"], export_env["OMNI_LAYA_EXPORT_DTYPE"], export_env["OMNI_GDN_KERNEL"]) == (
        "float16",
        "float16",
        "gated_delta_net_fused",
    )
    assert one(docs, "PersistentVolumeClaim", "omni-models")["spec"]["accessModes"] == ["ReadWriteMany"]


def test_the_cpu_overlay_asks_for_no_gpu_and_runs_the_cpu_images(rendered, kubectl):
    docs = rendered["cpu"]
    assert "nvidia" not in yaml.safe_dump_all(docs)
    pods = [server(docs)["spec"]["template"]["spec"], one(docs, "Job")["spec"]["template"]["spec"]]
    images = {c["image"] for p in pods for c in p["containers"] + p.get("initContainers", [])}
    assert images == {"system1-omni:0.1.0-cpu", "system1-omni-export:0.1.0-cpu"}
    env = env_of(docs, container(pods[0], "server"))
    assert env["OMNI_DEVICE"] == "cpu" and env["OMNI_MODELS"] == "english=demo"
    export_env = env_of(docs, container(pods[1], "export"))
    assert (export_env["OMNI_EXPORT_DTYPE"], export_env["OMNI_GDN_KERNEL"]) == ("float32", "linear_attention")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_grace_period_outlasts_prestop_and_the_drain(rendered, overlay):
    docs = rendered[overlay]
    pod = server(docs)["spec"]["template"]["spec"]
    c = container(pod, "server")
    pre_stop = c["lifecycle"]["preStop"]["exec"]["command"]
    assert pre_stop[0] == "sleep"
    sleep_s = int(pre_stop[1])
    assert sleep_s >= 5, "long enough for the endpoint to leave the Service before SIGTERM"
    env = env_of(docs, c)
    request_timeout = float(env.get("OMNI_REQUEST_TIMEOUT_S") or Settings().request_timeout_s)
    drain = max(request_timeout, entrypoint_option("--workers-kill-timeout"))
    assert pod["terminationGracePeriodSeconds"] > sleep_s + drain + FLUSH_S


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_service_pdb_and_hpa_are_the_servers(rendered, overlay):
    docs = rendered[overlay]
    deployment = server(docs)
    assert deployment["spec"]["selector"]["matchLabels"] == SERVER_LABELS
    assert SERVER_LABELS.items() <= deployment["spec"]["template"]["metadata"]["labels"].items()
    assert "replicas" not in deployment["spec"], "the HPA owns the count; an apply would reset it"
    assert one(docs, "Service")["spec"]["selector"] == SERVER_LABELS
    assert one(docs, "Service")["spec"]["ports"][0]["targetPort"] == "http"
    pdb = one(docs, "PodDisruptionBudget")["spec"]
    assert pdb["selector"]["matchLabels"] == SERVER_LABELS and pdb["maxUnavailable"] == 1
    hpa = one(docs, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "omni-server"}
    assert 1 <= pdb["maxUnavailable"] < hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    (metric,) = hpa["spec"]["metrics"]
    assert metric["type"] == "Pods" and metric["pods"]["target"]["type"] == "AverageValue"
    # The server's gauge as the adapter's rule serves it (test_the_adapter_rule_is_chart_values_...).
    assert metric["pods"]["metric"]["name"].startswith("omni_queue_depth")


def test_the_adapter_rule_is_chart_values_serving_the_hpa_metric_from_the_servers_gauge(rendered):
    """The rule is the prometheus-adapter chart's `rules.custom` (added to the operator's release,
    never a ConfigMap that replaces the chart's): it reads the gauge the server exports and serves
    it under the name the HPA asks for, apart from the name the chart's default rules give it."""
    with open(os.path.join(K8S, "prometheus-adapter", "values.yaml")) as f:
        values = yaml.safe_load(f)
    assert set(values) == {"rules"} and set(values["rules"]) == {"custom"}, (
        "only the rule: --reuse-values keeps the rest"
    )
    (rule,) = values["rules"]["custom"]
    gauges = {m.name for m in Metrics().registry.collect() if m.type == "gauge"}
    series = re.match(r"(\w+)\{", rule["seriesQuery"]).group(1)
    assert series in gauges and re.fullmatch(rule["name"]["matches"], series)
    assert "<<.Series>>{<<.LabelMatchers>>}" in rule["metricsQuery"] and "by (<<.GroupBy>>)" in rule["metricsQuery"]
    assert rule["resources"]["overrides"] == {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}
    for overlay in OVERLAYS:
        hpa = one(rendered[overlay], "HorizontalPodAutoscaler")["spec"]["metrics"][0]["pods"]["metric"]["name"]
        assert hpa == rule["name"]["as"] != series


def monitored_overlay(tmp_path, resource: str, components: bool, extra: str = "") -> str:
    """An overlay of the operator's: `resource` with the ServiceMonitor component added, as the
    docs say, plus `extra` lines."""
    d = tmp_path / ("monitored-%d" % len(list(tmp_path.iterdir())))
    d.mkdir()
    text = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [%s]\n" % resource
    if components:
        text += "components: [%s]\n" % ", ".join(
            os.path.relpath(os.path.join(K8S, "components", c), d) for c in ("servicemonitor", "balancer")
        )
    (d / "kustomization.yaml").write_text(text + extra)
    return str(d)


def selects(selector: dict, labels: dict) -> bool:
    return selector.items() <= labels.items()


@pytest.mark.parametrize("where", ["in-the-group-base", "in-each-group"])
def test_with_the_documented_split_each_server_is_scraped_once(kubectl, tmp_path, where):
    """Two groups of models (the docs' split overlay beside the plain one), the ServiceMonitor and
    the balancer added either to the overlay both groups build on or to each group's own: every
    server pod is behind one monitor endpoint, the one of its own group, and each group's balancer
    resolves its own servers."""
    gpu = os.path.join(K8S, "overlays", "gpu")
    plain = monitored_overlay(tmp_path, os.path.relpath(gpu, tmp_path / "monitored-0"), components=True)
    split_dir = tmp_path / "gpu-jev27b"
    split_dir.mkdir()
    if where == "in-the-group-base":
        split_text = docs_split_overlay().replace("../gpu", os.path.relpath(plain, split_dir))
    else:
        split_text = docs_split_overlay().replace("../gpu", os.path.relpath(gpu, split_dir))
        split_text += "components: [%s]\n" % ", ".join(
            os.path.relpath(os.path.join(K8S, "components", c), split_dir) for c in ("servicemonitor", "balancer")
        )
    (split_dir / "kustomization.yaml").write_text(split_text)
    docs = kustomize(kubectl, plain) + kustomize(kubectl, str(split_dir))
    monitors = [d for d in docs if d["kind"] == "ServiceMonitor"]
    assert {m["metadata"]["name"] for m in monitors} == {"omni-server", "omni-server-jev27b"}
    services = [d for d in docs if d["kind"] == "Service"]
    for deployment in (
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].startswith("omni-server")
    ):
        pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
        ports = {p["name"] for c in deployment["spec"]["template"]["spec"]["containers"] for p in c["ports"]}
        scrapes = [
            (m["metadata"]["name"], s["metadata"]["name"], e["port"])
            for s in services
            if s["spec"].get("selector") and selects(s["spec"]["selector"], pod_labels)
            for m in monitors
            if selects(m["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
            for e in m["spec"]["endpoints"]
            if e["port"] in {p["name"] for p in s["spec"]["ports"]}
        ]
        name = deployment["metadata"]["name"]
        assert scrapes == [(name, name, "http")], (name, scrapes)
        assert "http" in ports
    for m in monitors:
        assert m["spec"]["endpoints"] == [{"port": "http", "path": "/metrics", "interval": "15s"}]
    # Each group's balancer resolves its own group's servers, and only them.
    deployments = [d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].startswith("omni-server")]
    for suffix in ("", "-jev27b"):
        (c,) = one(docs, "Deployment", "omni-balancer" + suffix)["spec"]["template"]["spec"]["containers"]
        servers = {e["name"]: e.get("value") for e in c["env"]}["SERVERS"]
        assert servers == "omni-server-pods" + suffix
        headless = one(docs, "Service", servers)["spec"]["selector"]
        for d in deployments:
            mine = d["metadata"]["name"] == "omni-server" + suffix
            assert selects(headless, d["spec"]["template"]["metadata"]["labels"]) == mine


BALANCER_CFG = os.path.join(K8S, "components", "balancer", "haproxy.cfg")
COMPOSE_CFG = os.path.join(ROOT, "deploy", "haproxy", "haproxy.cfg")


def directives(cfg: str) -> list[str]:
    return [line.rstrip() for line in cfg.splitlines() if line.strip() and not line.lstrip().startswith("#")]


@pytest.fixture(scope="module")
def balanced(kubectl, tmp_path_factory) -> list[dict]:
    """The gpu overlay with the balancer component, added as docs/deployment.md says."""
    d = tmp_path_factory.mktemp("balanced")
    gpu = os.path.relpath(os.path.join(K8S, "overlays", "gpu"), d)
    component = os.path.relpath(os.path.join(K8S, "components", "balancer"), d)
    (d / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
        "resources: [%s]\ncomponents: [%s]\n" % (gpu, component)
    )
    return kustomize(kubectl, str(d))


def balancer_config(docs) -> tuple[str, dict[str, str]]:
    """The rendered haproxy.cfg and the balancer container's environment (fieldRefs as None)."""
    (c,) = one(docs, "Deployment", "omni-balancer")["spec"]["template"]["spec"]["containers"]
    (config_map,) = [d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"].startswith("omni-balancer")]
    return config_map["data"]["haproxy.cfg"], {e["name"]: e.get("value") for e in c["env"]}


def test_the_balancer_spreads_requests_over_the_ready_servers(balanced, validator, tmp_path):
    """Clients call omni-balancer; its HAProxy resolves the headless Service of the ready server
    pods and sends each request to the one with the fewest in flight, with the compose balancer's
    retries and checks."""
    docs = balanced
    assert_valid(validator, docs, tmp_path / "balanced.yaml")
    servers = server(docs)["spec"]["template"]["metadata"]["labels"]
    balancer = one(docs, "Deployment", "omni-balancer")
    (c,) = balancer["spec"]["template"]["spec"]["containers"]
    entry = one(docs, "Service", "omni-balancer")["spec"]
    assert selects(entry["selector"], balancer["spec"]["template"]["metadata"]["labels"])
    assert not selects(entry["selector"], servers)
    assert [(p["port"], p["targetPort"]) for p in entry["ports"]] == [(8000, "http")]
    assert {p["name"]: p["containerPort"] for p in c["ports"]} == {"http": 8000, "metrics": 8404}
    cfg, env = balancer_config(docs)
    headless = one(docs, "Service", env["SERVERS"])["spec"]
    assert headless["clusterIP"] == "None" and headless["publishNotReadyAddresses"] is False
    assert selects(headless["selector"], servers)
    # The compose balancer's configuration, apart from how it finds the servers and its readiness.
    with open(COMPOSE_CFG) as f:
        compose = directives(f.read())
    swapped = {"resolvers docker", "    nameserver dns 127.0.0.11:53"}
    ours = [line for line in directives(cfg) if "monitor" not in line]
    assert [line for line in compose if line not in swapped and "server-template" not in line] == [
        line
        for line in ours
        if line not in ("resolvers cluster", "    parse-resolv-conf") and "server-template" not in line
    ]
    m = re.search(
        r'^    server-template omni (\d+) "\$\{SERVERS\}\.\$\{POD_NAMESPACE\}\.svc\.\$\{CLUSTER_DOMAIN\}:8000" '
        r"resolvers cluster init-addr none$",
        cfg,
        re.M,
    )
    assert m and int(m.group(1)) >= one(docs, "HorizontalPodAutoscaler")["spec"]["maxReplicas"]
    assert "balance leastconn" in cfg and "option httpchk GET /readyz" in cfg and "retry-on" in cfg
    # Ready while a server is in rotation; its requests drain within the grace period.
    assert c["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert "monitor-uri /healthz" in cfg and "monitor fail if { nbsrv(servers) lt 1 }" in cfg
    timeout_server = int(re.search(r"^    timeout server (\d+)s$", cfg, re.M).group(1))
    assert balancer["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] > timeout_server
    assert balancer["spec"]["replicas"] >= 2
    assert c["imagePullPolicy"] == "IfNotPresent" and c["image"].startswith("haproxy:2.6")


def test_haproxy_accepts_the_rendered_balancer_configuration(balanced, tmp_path):
    """Debian's HAProxy (the 2.6 branch the image runs) checks the ConfigMap's file with the
    environment the balancer's pod has."""
    from tests.deploy.test_balancer import haproxy_binary

    cfg, env = balancer_config(balanced)
    (tmp_path / "haproxy.cfg").write_text(cfg)
    env = {**env, "POD_NAMESPACE": "omni"}
    proc = subprocess.run(
        [haproxy_binary(), "-c", "-f", str(tmp_path / "haproxy.cfg")],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert proc.returncode == 0 and "WARNING" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def test_the_server_pods_carry_the_scrape_annotations(rendered):
    annotations = server(rendered["gpu"])["spec"]["template"]["metadata"]["annotations"]
    assert annotations == {
        "prometheus.io/scrape": "true",
        "prometheus.io/port": "8000",
        "prometheus.io/path": "/metrics",
    }


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_servers_export_to_the_volume_they_read(rendered, overlay):
    """Each server's init container is the export (the Job's container, its env and volume): it
    writes /models, the server reads it, and the Job exports to the same place ahead of them."""
    docs = rendered[overlay]
    job_pod = one(docs, "Job", "omni-export")["spec"]["template"]["spec"]
    pod = server(docs)["spec"]["template"]["spec"]
    claims = {
        v["name"]: v["persistentVolumeClaim"]["claimName"]
        for p in (job_pod, pod)
        for v in p["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims["models"] == "omni-models"
    root = env_of(docs, container(pod, "server"))["OMNI_MODEL_ROOT"]
    job_export, init = container(job_pod, "export"), container(pod, "export", init=True)
    assert init["image"] == job_export["image"] and "command" not in init, "the export image's entrypoint"
    for export in (job_export, init):
        assert {"name": "models", "mountPath": root} in export["volumeMounts"]  # written
        assert env_of(docs, export)["OMNI_MODEL_ROOT"] == root
    assert (
        env_of(docs, init).items()
        >= {
            k: v for k, v in env_of(docs, job_export).items() if k not in ("HF_HOME", "OMNI_EXPORT_MEMORY_LIMIT")
        }.items()
    )
    assert env_of(docs, init)["HF_HOME"].startswith(root + "/."), "a cache on the volume every node mounts"
    assert {"name": "models", "mountPath": root, "readOnly": True} in container(pod, "server")["volumeMounts"]
    assert job_pod["restartPolicy"] == "Never"
    assert one(docs, "Job")["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"] == [2]
    assert "ttlSecondsAfterFinished" not in one(docs, "Job")["spec"], "GitOps tools would run it again"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_pod_holds_a_gpu_while_it_waits_for_another(rendered, overlay):
    """No ordering of apply leaves GPUs held by pods that wait: every init container of a pod is
    the export, run on that pod's own resources (its GPU where the pod has one), and nothing runs
    before the server that waits for anything else. The only wait left is an export's lock on a
    model (models/publish.py), held by a pod that is exporting it on a GPU of its own."""
    docs = rendered[overlay]
    pods = [
        o["spec"]["template"]["spec"] for o in docs if o["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet")
    ]
    for pod in pods:
        gpus = [c for c in pod["containers"] if "nvidia.com/gpu" in c.get("resources", {}).get("limits", {})]
        for init in pod.get("initContainers", []):
            assert init["image"].startswith("system1-omni-export"), init["name"]
            if gpus:
                assert init["resources"]["limits"]["nvidia.com/gpu"] == gpus[0]["resources"]["limits"]["nvidia.com/gpu"]
    server_pod = server(docs)["spec"]["template"]["spec"]
    assert [c["name"] for c in server_pod["initContainers"]] == ["export"]
    with open(os.path.join(ROOT, "deploy", "export.sh"), encoding="utf-8") as f:
        script = f.read()
    assert "sleep" not in script and "--publish" in script, "the export waits on nothing but a model's lock"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_an_export_is_bounded_by_the_memory_of_the_server_it_is_for(rendered, overlay):
    """The server pod's export is refused past the server container's own memory limit, and on
    the gpu overlay the Job's past the same; the limit is below an H100's memory."""
    docs = rendered[overlay]
    pod = server(docs)["spec"]["template"]["spec"]
    (ref,) = [e for e in container(pod, "export", init=True)["env"] if e["name"] == "OMNI_EXPORT_MEMORY_LIMIT"]
    assert ref["valueFrom"]["resourceFieldRef"] == {"containerName": "server", "resource": "limits.memory"}
    limit = container(pod, "server")["resources"]["limits"]["memory"]
    if overlay == "gpu":
        job = container(one(docs, "Job")["spec"]["template"]["spec"], "export")
        assert {"name": "OMNI_EXPORT_MEMORY_LIMIT", "value": limit} in job["env"]
        assert memory_size(limit) < 80 * 10**9


def test_servers_exporting_one_model_at_once_take_turns_and_export_it_once(tmp_path):
    """Two exports of one version at once (two pods' init containers): the second waits on the
    lock while the first exports, then finds the version published and exports nothing."""
    import threading

    from models import publish

    exported, entered = [], threading.Event()
    release = threading.Event()

    def slow(out):
        entered.set()
        assert release.wait(30)
        exported.append(out)
        with open(os.path.join(out, MANIFEST), "w") as f:
            f.write("{}")

    directory = str(tmp_path / "english")
    first = threading.Thread(target=publish.publish, args=(directory, "v1", slow))
    first.start()
    assert entered.wait(30)
    second = threading.Thread(target=publish.publish, args=(directory, "v1", slow))
    second.start()
    second.join(0.5)
    assert second.is_alive(), "the second export waits for the first"
    release.set()
    first.join(30)
    second.join(30)
    assert len(exported) == 1 and publish.current(directory) == "v1"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_runs_restricted_as_the_images_user(rendered, overlay):
    docs = rendered[overlay]
    uid = int(re.search(r"^USER (\d+):(\d+)$", dockerfile(), re.M).group(1))
    for obj in (server(docs), one(docs, "Job")):
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"] == {
            "runAsNonRoot": True,
            "runAsUser": uid,
            "runAsGroup": uid,
            "fsGroup": uid,
            "seccompProfile": {"type": "RuntimeDefault"},
        }
        assert pod["automountServiceAccountToken"] is False
        writable = {v["name"] for v in pod["volumes"] if "emptyDir" in v}
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["securityContext"] == {
                "allowPrivilegeEscalation": False,
                "readOnlyRootFilesystem": True,
                "runAsNonRoot": True,
                "capabilities": {"drop": ["ALL"]},
            }
            assert "limits" in c["resources"] and "memory" in c["resources"]["limits"]
            assert "cpu" not in c["resources"]["limits"], "a throttled worker shows as latency"
        # The main containers' scratch space (HOME, /tmp) is an emptyDir.
        for c in pod["containers"]:
            mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
            assert mounts["/tmp"] in writable and env_of(docs, c)["HOME"] == "/tmp"


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_omni_variable_is_a_known_setting_and_the_server_takes_its_env(rendered, overlay):
    docs = rendered[overlay]
    pods = [server(docs)["spec"]["template"]["spec"], one(docs, "Job")["spec"]["template"]["spec"]]
    for pod in pods:
        for c in pod["containers"] + pod.get("initContainers", []):
            names = set(env_of(docs, c)) | {e["name"] for e in c.get("env", [])}
            unknown = {n for n in names if n.startswith("OMNI_")} - _ENV_NAMES - OTHER_VARIABLES
            assert not unknown, (c["name"], unknown)
    env = env_of(docs, container(pods[0], "server"))
    settings = Settings.from_env(env)  # what the server does at start: no ConfigError
    assert settings.model_dirs() == [os.path.join(env["OMNI_MODEL_ROOT"], "english")]
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http")
    assert env["OTEL_TRACES_SAMPLER"] == "parentbased_traceidratio"


def docs_split_overlay() -> str:
    """The split overlay of docs/deployment.md ("Splitting models across Deployments")."""
    with open(os.path.join(ROOT, "docs", "deployment.md")) as f:
        text = f.read()
    section = text[text.index("**Splitting models across Deployments.**") :]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)


def test_the_documented_split_serves_its_own_models_on_pods_no_other_group_selects(kubectl, rendered, tmp_path):
    overlay = tmp_path / "gpu-jev27b"
    overlay.mkdir()
    text = docs_split_overlay()
    assert "resources: [../gpu]" in text
    (overlay / "kustomization.yaml").write_text(
        text.replace("../gpu", os.path.relpath(os.path.join(K8S, "overlays", "gpu"), overlay))
    )
    split, plain = kustomize(kubectl, str(overlay)), rendered["gpu"]
    deployment = one(split, "Deployment", "omni-server-jev27b")
    pod = deployment["spec"]["template"]["spec"]
    assert env_of(split, container(pod, "server"))["OMNI_MODELS"] == "open-jev-27b-v1.1"
    assert one(split, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] == "omni-server-jev27b"
    assert one(split, "Job")["metadata"]["name"] == "omni-export-jev27b"
    claims = {v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v}
    assert claims == {"omni-models-jev27b"}
    # Each group's Service, PDB and Deployment select its own pods and none of the other's.
    for mine, other in ((split, plain), (plain, split)):
        theirs = server(other)["spec"]["template"]["metadata"]["labels"]
        ours = server(mine)["spec"]["template"]["metadata"]["labels"]
        for selector in (
            one(mine, "Service")["spec"]["selector"],
            one(mine, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
            server(mine)["spec"]["selector"]["matchLabels"],
        ):
            assert selector.items() <= ours.items() and not selector.items() <= theirs.items()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_a_rollout_waits_out_the_startup_budget(rendered, overlay):
    """The Deployment's progress deadline outlasts the startup probe's budget, so a new pod that is
    still loading the largest export does not fail the rollout."""
    deployment = server(rendered[overlay])
    c = container(deployment["spec"]["template"]["spec"], "server")
    startup = c["startupProbe"]
    budget = startup.get("initialDelaySeconds", 0) + startup["periodSeconds"] * startup["failureThreshold"]
    assert deployment["spec"]["progressDeadlineSeconds"] > budget


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_service_links_are_off_because_the_server_refuses_them(rendered, overlay):
    """Kubernetes would give each pod a Service's link variables (`OMNI_SERVER_PORT` for the
    `omni-server` Service): unknown `OMNI_*` variables, which the server refuses to start with. So
    the pods turn service links off."""
    from app.config import ConfigError, Settings

    docs = rendered[overlay]
    assert server(docs)["spec"]["template"]["spec"]["enableServiceLinks"] is False
    services = [d["metadata"]["name"] for d in docs if d["kind"] == "Service"]
    links = {
        n.upper().replace("-", "_") + suffix: "tcp://10.0.0.1:8000"
        for n in services
        for suffix in ("_PORT", "_SERVICE_HOST", "_SERVICE_PORT")
    }
    omni_links = {k: v for k, v in links.items() if k.startswith("OMNI_")}
    assert omni_links  # the Service's name makes OMNI_ variables ...
    with pytest.raises(ConfigError, match="unknown variables? OMNI_SERVER_PORT"):
        Settings.from_env(omni_links)  # ... which the server would refuse


def docs_yaml_after(heading: str) -> str:
    """The first yaml block of docs/deployment.md after `heading`."""
    with open(os.path.join(ROOT, "docs", "deployment.md")) as f:
        text = f.read()
    return re.search(r"```yaml\n(.*?)```", text[text.index(heading) :], re.S).group(1)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_container_states_its_pull_policy(rendered, overlay):
    for obj in (server(rendered[overlay]), one(rendered[overlay], "Job")):
        pod = obj["spec"]["template"]["spec"]
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["imagePullPolicy"] == "IfNotPresent", (obj["metadata"]["name"], c["name"])


def test_the_documented_release_overlay_runs_every_container_by_digest(kubectl, tmp_path):
    """docs/deployment.md's overlay with a release's `images:` lines (the balancer's mirrored
    HAProxy among them): every container of the servers, the export and the balancer names its
    image by registry and digest, never by a tag."""
    text = docs_yaml_after("## Releases")
    pins = {i["name"]: i for i in yaml.safe_load(text)["images"]}
    assert set(pins) == {"system1-omni", "system1-omni-export", "haproxy"}
    d = tmp_path / "release"
    d.mkdir()
    (d / "kustomization.yaml").write_text(
        text.replace(
            "../../components/balancer", os.path.relpath(os.path.join(K8S, "components", "balancer"), d)
        ).replace("../gpu", os.path.relpath(os.path.join(K8S, "overlays", "gpu"), d))
    )
    docs = kustomize(kubectl, str(d))
    images = []
    for obj in (server(docs), one(docs, "Job"), one(docs, "Deployment", "omni-balancer")):
        pod = obj["spec"]["template"]["spec"]
        images += [c["image"] for c in pod["containers"] + pod.get("initContainers", [])]
    assert len(images) == 4
    for image in images:
        name, _, digest = image.partition("@")
        pin = next(p for p in pins.values() if p["newName"] == name)
        assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest) and digest == pin["digest"], image
        assert ":" not in name.rsplit("/", 1)[1], "no tag beside the digest"


PROMQL_WORDS = {"sum", "max", "min", "avg", "by", "on", "and", "or", "unless", "rate", "histogram_quantile", "without"}


def test_every_dashboard_expression_reads_only_the_servers_targets():
    """Each expression's series are the server's own (`omni_*`), or are joined on (job, instance)
    to one of them: metrics every process exports (`process_*`) would otherwise show another job's
    processes (the collector's, Prometheus' own) as the server's."""
    import json as _json

    with open(os.path.join(ROOT, "deploy", "grafana", "dashboards", "system1-omni.json")) as f:
        dashboard = _json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if "expr" in t]
    assert len(exprs) > 10
    joined = re.compile(r"\band on \(job, instance\) (omni_\w+)")
    for expr in exprs:
        # What is left once label matchers, ranges, grouping labels and joins are taken out.
        bare = re.sub(r"\{[^}]*\}|\[[^]]*\]|\b(?:by|on) \([^)]*\)|\$\w+", " ", joined.sub(" ", expr))
        names = {w for w in re.findall(r"[A-Za-z_:][\w:]*", bare) if w not in PROMQL_WORDS}
        foreign = {n for n in names if not n.startswith("omni_")}
        assert not foreign or joined.search(expr), (expr, foreign)
        assert names, expr
