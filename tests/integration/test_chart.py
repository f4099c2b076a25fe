"""The Helm chart: lint, render a matrix of values, server-side dry-run every object on the
real API server, check the rendered args with the binary's own flag parser, and exercise the
rendered RBAC for real with a ServiceAccount token."""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_reloader import metrics
from kube_reloader.cli.flags import FlagError, parse
from kube_reloader.core import hashing
from kube_reloader.devcluster.building import Builder
from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.resources import Resource
from tests import builders
from tests.harness import (
    auto_deployment_on_configmap,
    bearer_connection,
    env_of,
    service_account_token,
    update_cm,
)
from tests.waiting import eventually

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "kube-reloader"
# the chart has no default image: every render starts from this values file
IMAGE_VALUES = ROOT / "tests" / "data" / "chart-image.yaml"
KINDS = {
    "ServiceAccount": resources.SERVICEACCOUNTS,
    "ClusterRole": Resource("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    "ClusterRoleBinding": Resource("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    "Role": Resource("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    "RoleBinding": Resource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    "Deployment": resources.DEPLOYMENTS,
    "Service": Resource("", "v1", "services", "Service"),
    "Secret": resources.SECRETS,
    "ConfigMap": resources.CONFIGMAPS,
    "PodDisruptionBudget": Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    "NetworkPolicy": Resource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    "MutatingWebhookConfiguration": Resource("admissionregistration.k8s.io", "v1", "mutatingwebhookconfigurations",
                                             "MutatingWebhookConfiguration", namespaced=False),
}  # fmt: skip


def helm() -> Path:
    return Builder().ensure().path("helm")


def render(
    values: dict[str, Any],
    *,
    release: str = "rel",
    namespace: str = "ns",
    extra: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    out = subprocess.run(
        [str(helm()), "template", release, str(CHART), "--namespace", namespace, "--kube-version", "1.36.3",
         "-f", str(IMAGE_VALUES), "-f", "-", *extra],
        input=yaml.safe_dump(values), capture_output=True, text=True, check=False,
    )  # fmt: skip
    if out.returncode != 0:
        raise AssertionError(out.stderr)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


MATRIX: dict[str, dict[str, Any]] = {
    "defaults": {},
    "single namespace": {"reloader": {"watchGlobally": False}},
    "scoped namespaces": {"reloader": {"watchGlobally": False, "namespaces": "team-a, team-b"}},
    "ha": {"reloader": {"enableHA": True, "deployment": {"replicas": 2}}},
    "pod reloads": {"reloader": {"defaultStrategy": "evict", "workloadKinds": [
        "serving.knative.dev/v1/services:spec.template", "core.example.io/v1beta2/podsets:spec.pod.template"]}},
    "fleet safety": {"reloader": {"maxConcurrentRollouts": 10, "haltAfterFailures": 3, "freeze": True,
                                  "namespacePolicies": False}},
    "key-level and TLS": {"reloader": {"reloadScope": "keys", "reloadTlsSecrets": True}},
    "admission webhook": {"reloader": {"admission": {"enabled": True, "timeoutSeconds": 1, "certValidity": "12h", "grace": "1s",
                                                     "namespaceSelector": {"matchLabels": {"team": "a"}}},
                                       "netpol": {"enabled": True}}},
    "everything": {
        "reloader": {
            "autoReloadAll": True, "isArgoRollouts": True, "isOpenshift": True, "ignoreJobs": True,
            "ignoreSecrets": True, "reloadOnCreate": True, "reloadOnDelete": True, "syncAfterRestart": True,
            "reloadStrategy": "annotations", "enableCSIIntegration": True, "ignoreNamespaces": "kube-system",
            "namespaceSelector": "team in (a,b)", "resourceLabelSelector": "reload:yes", "logFormat": "json",
            "logLevel": "debug", "enablePProf": True, "enableMetricsByNamespace": True, "webhookUrl": "https://hook.example/x",
            "custom_annotations": {"auto": "example.com/auto", "configmap": "example.com/cm", "pausePeriod": "example.com/pause"},
            "service": {"port": 9090}, "podDisruptionBudget": {"enabled": True, "maxUnavailable": 0},
            "netpol": {"enabled": True}, "grafanaDashboard": {"enabled": True},
            "deployment": {"env": {"secret": {"ALERT_ON_RELOAD": "true", "ALERT_SINK": "slack",
                                              "ALERT_WEBHOOK_URL": "https://hooks.slack.example/x", "ALERT_WEBHOOK_PROXY": "http://proxy:3128"},
                                   "open": {"EXTRA": "1"}, "field": {"NODE": "spec.nodeName"}},
                           "resources": {"limits": {"cpu": "200m"}}},
        },
        "global": {"imagePullSecrets": ["regcred", {"name": "other"}]},
    },
}  # fmt: skip


@pytest.mark.parametrize("case", list(MATRIX))
def test_chart_renders_and_the_binary_accepts_the_rendered_args(case: str) -> None:
    docs = render(MATRIX[case])
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value", "x") for e in container.get("env", [])}
    if "POD_NAME" in env:
        env.update(POD_NAME="pod", POD_NAMESPACE="ns")
    env.pop("KUBERNETES_NAMESPACE", None)
    settings = parse(container["args"], env=env)
    opts = settings.options
    if case == "everything":
        assert opts.plan.match.auto_reload_all
        assert opts.argo_rollouts
        assert opts.csi
        assert opts.plan.strategy.value == "annotations"
        assert opts.plan.match.keys.auto == "example.com/auto"
        assert opts.plan.match.keys.pause_period == "example.com/pause"
        assert opts.namespace_selector == "team in (a,b)"
        assert opts.resource_label_selector == "reload=yes"
        assert opts.webhook_url == "https://hook.example/x"
        assert settings.pprof_addr == "127.0.0.1:6060"
        secret = next(d for d in docs if d["kind"] == "Secret")
        assert set(secret["data"]) == {
            "ALERT_ON_RELOAD",
            "ALERT_SINK",
            "ALERT_WEBHOOK_URL",
            "ALERT_WEBHOOK_PROXY",
        }
        pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")
        assert pdb["spec"]["maxUnavailable"] == 0
    if case == "fleet safety":
        assert (opts.max_concurrent_rollouts, opts.halt_after_failures) == (10, 3)
        assert opts.freeze
        assert not opts.namespace_policies
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        assert not any("namespaces" in r.get("resources", []) for r in role["rules"])
    if case == "defaults":
        assert (opts.max_concurrent_rollouts, opts.halt_after_failures, opts.freeze) == (
            0,
            0,
            False,
        )
        assert opts.namespace_policies
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        assert {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["list", "watch"]} in role[
            "rules"
        ]
    if case == "scoped namespaces":
        assert opts.namespaces == ("ns", "team-a", "team-b")
        assert {(d["kind"], d["metadata"]["namespace"]) for d in docs if d["kind"] == "Role"} == {
            ("Role", "ns"),
            ("Role", "team-a"),
            ("Role", "team-b"),
        }
    if case == "admission webhook":
        assert settings.admission is not None
        assert (settings.admission.addr, settings.admission.cert_validity) == (":9443", 12 * 3600)
        assert settings.admission.webhook_config == "rel-reloader"
        namespace = env["POD_NAMESPACE"]  # the pod's, from the downward API
        assert f"rel-reloader-admission.{namespace}.svc" in settings.admission.hosts
        hook = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")["webhooks"][0]
        assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Ignore", 1)
        assert hook["namespaceSelector"] == {"matchLabels": {"team": "a"}}
        netpol = next(d for d in docs if d["kind"] == "NetworkPolicy")
        assert {"ports": [{"port": "admission", "protocol": "TCP"}]} in netpol["spec"]["ingress"]
    else:
        assert settings.admission is None
        assert not any(d["kind"] == "MutatingWebhookConfiguration" for d in docs)
    if case == "ha":
        assert settings.ha is not None
        assert deployment["spec"]["replicas"] == 2
        lease_role = next(d for d in docs if d["kind"] == "Role")
        assert lease_role["metadata"]["namespace"] == "ns"
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    pod_sc = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (pod_sc["runAsNonRoot"], pod_sc["runAsUser"], pod_sc["seccompProfile"]["type"]) == (
        True,
        65534,
        "RuntimeDefault",
    )
    probes = (
        container["livenessProbe"]["httpGet"]["path"],
        container["readinessProbe"]["httpGet"]["path"],
    )
    assert probes == ("/live", "/readyz")
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app": "rel-reloader",
        "release": "rel",
    }


def test_helm_lint_passes() -> None:
    out = subprocess.run(
        [str(helm()), "lint", str(CHART), "--kube-version", "1.36.3", "-f", str(IMAGE_VALUES)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"reloader": {"ignoreSecrets": True, "ignoreConfigMaps": True}}, "cannot both be true"),
        (
            {"reloader": {"namespaces": ["a"]}},
            "reloader.namespaces needs reloader.watchGlobally: false",
        ),
        ({"reloader": {"reloadStrategy": "rolling"}}, "reloadStrategy"),
        ({"reloader": {"logLevel": "loud"}}, 'reloader.logLevel: "loud" is not one of'),
        ({"reloader": {"compat": "v3"}}, 'reloader.compat: "v3" is not v1'),
        ({"reloader": {"compat": "V2"}}, 'reloader.compat: "V2" is not v1'),
        (
            {"reloader": {"serviceMonitor": {"enable": True}}},
            "reloader.serviceMonitor.enable: not a key",
        ),
        (
            {"reloader": {"podMonitor": {"bearerTokenFile": "/t"}}},
            "reloader.podMonitor.bearerTokenFile: not a key",
        ),
        (
            {"reloader": {"serviceMonitor": {"podTargetLabels": ["a"]}}},
            "reloader.serviceMonitor.podTargetLabels: not a key",
        ),
        (
            {"reloader": {"verticalPodAutoscaler": {"updateMode": "Off"}}},
            "reloader.verticalPodAutoscaler.updateMode: not a key",
        ),
        (
            {"reloader": {"custom_annotations": {"reload": "x"}}},
            "reloader.custom_annotations.reload: not a key",
        ),
        (
            {"reloader": {"deployment": {"nodeSelectors": {"a": "b"}}}},
            "reloader.deployment.nodeSelectors: not a key",
        ),
        ({"reloader": {"watchGloballly": False}}, "reloader.watchGloballly: not a key"),
        (
            {"reloader": {"admission": {"enabled": True, "timeoutSeconds": 10}}},
            "reloader.admission.timeoutSeconds: 10 must be 1 or 2",
        ),
        (
            {"reloader": {"admission": {"failurePolicy": "Fail"}}},
            "reloader.admission.failurePolicy: not a key",
        ),
        ({"image": {"registry": "r.example"}}, "image.registry: not a key"),
        (
            {"reloader": {"deployment": {"gomaxprocsOverride": "2"}}},
            "reloader.deployment.gomaxprocsOverride tunes the Go runtime",
        ),
        (
            {"reloader": {"deployment": {"gomemlimitOverride": "400MiB"}}},
            "reloader.deployment.gomemlimitOverride tunes the Go runtime",
        ),
        ({"reloader": {"legacy": {"rbac": True}}}, "reloader.legacy.rbac: true is not supported"),
        ({"kubernetes": {"host": "https://api.example:6443"}}, "kubernetes.host is not used"),
        (
            {"reloader": {"watchGlobally": False, "ignoreNamespaces": "a"}},
            "reloader.ignoreNamespaces needs reloader.watchGlobally: true",
        ),
        (
            {"reloader": {"watchGlobally": False, "namespaceSelector": "a=b"}},
            "reloader.namespaceSelector needs reloader.watchGlobally: true",
        ),
        (
            {
                "reloader": {
                    "podDisruptionBudget": {"enabled": True, "minAvailable": 1, "maxUnavailable": 1}
                }
            },
            "reloader.podDisruptionBudget: set minAvailable or maxUnavailable, not both",
        ),
        (
            {"reloader": {"deployment": {"env": {"field": {"NODE": ""}}}}},
            "reloader.deployment.env.field.NODE needs a field path",
        ),
        (
            {"reloader": {"compat": "v2", "logLevel": "INFO"}},
            'reloader.logLevel: "INFO" is not one of trace, debug, info, warn, warning, error '
            "(with compat v2, exactly as Reloader v2 reads it)",
        ),
        (
            {"reloader": {"compat": "v2", "logFormat": "text"}},
            'reloader.logFormat: "text" is not json or empty (with compat v2',
        ),
        (
            {"reloader": {"custom_annotations": {"secretproviderclass_exclude": "x"}}},
            "reloader.custom_annotations.secretproviderclass_exclude is read only by Stakater's "
            "v2 chart: set reloader.compat: v2",
        ),
    ],
)
def test_bad_values_fail_rendering_with_a_clear_message(
    values: dict[str, Any], message: str
) -> None:
    with pytest.raises(AssertionError, match=re.escape(message)) as failed:
        render(values)
    # one line: "Error: execution error at (...): <message>", then helm's --debug hint
    assert len(str(failed.value).strip().splitlines()) <= 3


def test_service_monitor_renders_when_the_api_is_there() -> None:
    docs = render(
        {"reloader": {"serviceMonitor": {"enabled": True, "interval": "30s"}}},
        extra=("--api-versions", "monitoring.coreos.com/v1"),
    )
    sm = next(d for d in docs if d["kind"] == "ServiceMonitor")
    assert sm["spec"]["endpoints"] == [
        {"honorLabels": True, "interval": "30s", "path": "/metrics", "targetPort": "http"}
    ]
    assert any(d["kind"] == "Service" for d in docs)


DIGEST = "sha256:" + "ab" * 32


@pytest.mark.parametrize(
    ("image", "registry", "want"),
    [
        ({}, "", "localhost/kube-reloader:{app}"),
        ({"tag": "1.2.3"}, "", "localhost/kube-reloader:1.2.3"),
        ({"digest": DIGEST}, "", f"localhost/kube-reloader@{DIGEST}"),
        ({"repository": "r.example/kr"}, "", "r.example/kr:{app}"),
        ({}, "mirror.example", "mirror.example/kube-reloader:{app}"),
        ({"name": "team/kr", "tag": "9"}, "mirror.example/", "mirror.example/team/kr:9"),
        (
            {"digest": DIGEST},
            "mirror.example",
            f"mirror.example/kube-reloader@{DIGEST}",
        ),
        (
            {"digest": DIGEST, "tag": "9"},
            "mirror.example",
            f"mirror.example/kube-reloader:9@{DIGEST}",
        ),
        ({"digest": DIGEST, "tag": "9"}, "", f"localhost/kube-reloader:9@{DIGEST}"),
    ],
)
def test_the_image_keeps_its_digest_with_or_without_a_global_registry(
    image: dict[str, str], registry: str, want: str
) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    docs = render({"image": image, "global": {"imageRegistry": registry}})
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    got = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert got == want.format(app=app_version)


@pytest.mark.parametrize("values", [{}, {"image": {"repository": ""}}, {"image": {"tag": "1"}}])
def test_without_an_image_repository_rendering_fails_in_one_line_naming_make_image(
    values: dict[str, Any],
) -> None:
    argv = [str(helm()), "template", "rel", str(CHART), "--kube-version", "1.36.3", "-f", "-"]
    out = subprocess.run(
        argv, input=yaml.safe_dump(values), capture_output=True, text=True, check=False
    )
    assert out.returncode != 0
    first, *rest = out.stderr.strip().splitlines()
    assert "image.repository is not set" in first
    assert "`make image`" in first
    assert len(rest) <= 2  # helm's blank line and --debug hint


@pytest.mark.parametrize(
    ("values", "says"),
    [
        (
            {"image": {"repository": "ghcr.io/stakater/reloader", "tag": "v1.4.21"}},
            "the image ghcr.io/stakater/reloader is Stakater Reloader's",
        ),
        (
            {"global": {"imageRegistry": "mirror.example"}, "image": {"name": "stakater/reloader"}},
            "the image mirror.example/stakater/reloader is Stakater Reloader's",
        ),
        (
            {"global": {"imageRegistry": "mirror.example"}, "image": {"name": ""}},
            "global.imageRegistry is set but image.name is empty",
        ),
    ],
)
def test_an_image_left_from_stakaters_values_or_a_registry_without_a_name_fails_in_one_line(
    values: dict[str, Any], says: str
) -> None:
    argv = [str(helm()), "template", "rel", str(CHART), "--kube-version", "1.36.3", "-f", "-"]
    out = subprocess.run(
        argv, input=yaml.safe_dump(values), capture_output=True, text=True, check=False
    )
    assert out.returncode != 0
    first = out.stderr.strip().splitlines()[0]
    assert says in first
    assert "`make image`" in first


def test_a_global_registry_alone_names_the_image_under_it() -> None:
    argv = [str(helm()), "template", "rel", str(CHART), "--kube-version", "1.36.3", "-f", "-"]
    values = {"global": {"imageRegistry": "mirror.example"}}
    out = subprocess.run(
        argv, input=yaml.safe_dump(values), capture_output=True, text=True, check=True
    )
    deployment = next(d for d in yaml.safe_load_all(out.stdout) if d and d["kind"] == "Deployment")
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == f"mirror.example/kube-reloader:{app_version}"


def test_the_plain_manifests_match_the_chart() -> None:
    from scripts.render_manifests import OUT
    from scripts.render_manifests import render as render_manifests

    for name, text in render_manifests(helm()).items():
        assert (OUT / name).read_text() == text, (
            f"deploy/kubernetes/{name} is stale: run `make manifests`"
        )


def test_the_dashboard_only_uses_metrics_that_exist() -> None:
    dashboard = json.loads((CHART / "files" / "dashboard.json").read_text())
    exposed = set(metrics.names(metrics.Recorder(by_namespace=False)))
    exposed |= {"kube_reloader_watch_restarts_total", "kube_reloader_relists_total", "kube_reloader_cache_objects",
                "kube_reloader_pending_reloads", "kube_reloader_alerts_total",
                "kube_reloader_rollouts_in_flight", "kube_reloader_held_workloads"}  # fmt: skip
    for panel in dashboard["panels"]:
        for target in panel["targets"]:
            for name in re.findall(
                r"\b((?:reloader|kube_reloader|process)_[a-z_]+)", target["expr"]
            ):
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                assert base in exposed, f"panel {panel['title']!r} uses unknown metric {name}"


@pytest.mark.cluster
@pytest.mark.serial  # ClusterRoles and bindings, and what the cluster serves
@pytest.mark.parametrize("case", list(MATRIX))
async def test_every_rendered_object_passes_server_side_dry_run(client: Client, case: str) -> None:
    ns = f"chart-{secrets.token_hex(3)}"
    docs = render(MATRIX[case], namespace=ns)
    namespaces = {ns} | {
        d["metadata"].get("namespace") for d in docs if d["metadata"].get("namespace")
    }
    for n in sorted(namespaces):
        await client.create(
            resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
        )
    try:
        for doc in docs:
            res = KINDS[doc["kind"]]
            await client.patch(
                res, doc["metadata"]["name"], doc, namespace=doc["metadata"].get("namespace"),
                patch_type=PatchType.APPLY, field_manager="kube-reloader-chart-test", force=True, dry_run=True,
            )  # fmt: skip
    finally:
        for n in namespaces:
            await client.delete(resources.NAMESPACES, n)


# ------------------------------------------------------------------ RBAC, for real


async def _apply(client: Client, docs: list[dict[str, Any]]) -> None:
    for doc in docs:
        if doc["kind"] in ("Deployment",):
            continue  # the pod would be a kwok fake; the controller runs in this process instead
        await client.patch(
            KINDS[doc["kind"]], doc["metadata"]["name"], doc, namespace=doc["metadata"].get("namespace"),
            patch_type=PatchType.APPLY, field_manager="kube-reloader-chart-test", force=True,
        )  # fmt: skip


@pytest.mark.cluster
@pytest.mark.serial  # ClusterRoles and bindings, and what the cluster serves
async def test_the_rendered_rbac_lets_the_controller_work_and_nothing_more(
    client: Client, namespace: str, kubeconfig_path: Path
) -> None:
    from dataclasses import replace

    from kube_reloader.runtime.controller import Controller
    from kube_reloader.runtime.options import Options

    release = f"r{secrets.token_hex(3)}"
    docs = render({}, release=release, namespace=namespace)
    await _apply(client, docs)
    cluster_objects = [
        (d["kind"], d["metadata"]["name"]) for d in docs if d["kind"].startswith("Cluster")
    ]
    try:
        token = await service_account_token(client, namespace, f"{release}-reloader")
        as_sa = bearer_connection(config.load_kubeconfig([kubeconfig_path]), token)
        await auto_deployment_on_configmap(client, namespace, replicas=0)
        async with Client(as_sa) as sa:
            # all namespaces, as the chart's ClusterRole is meant for
            controller = Controller(sa, replace(Options(), deployment_configs=False))
            stop = asyncio.Event()
            task = asyncio.create_task(controller.run(stop))
            try:
                await asyncio.wait_for(controller.ready.wait(), 30)
                await update_cm(client, namespace, "c", {"a": "2"})

                async def reloaded() -> bool:
                    env = await env_of(client, "Deployment", namespace, "w")
                    return env.get("STAKATER_C_CONFIGMAP") == hashing.configmap_hash({"a": "2"})

                await eventually(reloaded, what="a reload done with the chart's RBAC")

                async def event() -> bool:
                    return any(
                        e["reason"] == "Reloaded"
                        for e in (await client.list(resources.EVENTS, namespace=namespace)).items
                    )

                await eventually(event, what="the Reloaded event recorded with the chart's RBAC")
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
            forbidden = [
                sa.patch(
                    resources.CONFIGMAPS,
                    "c",
                    {"data": {"x": "y"}},
                    namespace=namespace,
                    patch_type=PatchType.MERGE,
                ),
                sa.create(resources.SECRETS, builders.secret("s", namespace, {"k": "v"})),
                sa.delete(resources.CONFIGMAPS, "c", namespace=namespace),
                sa.delete(resources.PODS, "p", namespace=namespace),
                sa.list(Resource("", "v1", "services", "Service"), namespace=namespace),
                sa.delete(resources.DEPLOYMENTS, "w", namespace=namespace),
                sa.list(resources.NODES),
            ]
            for attempt in forbidden:
                with pytest.raises(errors.Forbidden):
                    await attempt
            await sa.list(resources.PODS, namespace=namespace)  # a workload's, before rolling it
    finally:
        for kind, name in cluster_objects:
            await client.delete(KINDS[kind], name)


@pytest.mark.cluster
@pytest.mark.serial  # ClusterRoles and bindings, and what the cluster serves
async def test_with_stakaters_rbac_list_without_watch_is_polled_and_reloads_still_happen(
    client: Client, namespace: str, kubeconfig_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Swapping only the image in Stakater's chart: its ClusterRole grants list/get on workloads
    but no watch. kube-reloader says so once, polls those kinds, and keeps reloading."""
    from dataclasses import replace

    from kube_reloader.runtime.controller import Controller
    from kube_reloader.runtime.options import Options

    name = f"stakater-{secrets.token_hex(3)}"
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": [
                {"apiGroups": [""], "resources": ["secrets", "configmaps"], "verbs": ["list", "get", "watch"]},
                {"apiGroups": ["apps"], "resources": ["deployments", "daemonsets", "statefulsets"], "verbs": ["list", "get", "update", "patch"]},
                {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["list", "get"]},
                {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create", "delete", "list", "get"]},
                {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]}  # fmt: skip
    binding = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
               "subjects": [{"kind": "ServiceAccount", "name": "reloader", "namespace": namespace}]}  # fmt: skip
    await client.create(
        resources.SERVICEACCOUNTS,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "reloader", "namespace": namespace},
        },
    )
    await client.create(KINDS["ClusterRole"], role)
    await client.create(KINDS["ClusterRoleBinding"], binding)
    try:
        token = await service_account_token(client, namespace, "reloader")
        as_sa = bearer_connection(config.load_kubeconfig([kubeconfig_path]), token)
        await client.create(resources.CONFIGMAPS, builders.configmap("c", namespace, {"a": "1"}))

        async def can_list() -> bool:  # RBAC changes take a moment to reach the authorizer
            async with Client(as_sa) as probe:
                try:
                    await probe.list(resources.DEPLOYMENTS, namespace=namespace)
                except errors.Forbidden:
                    return False
            return True

        await eventually(can_list, what="the role binding to take effect")
        async with Client(as_sa) as sa:
            opts = replace(
                Options(), namespaces=(namespace,), poll_interval=0.5, deployment_configs=False
            )
            controller = Controller(sa, opts)
            stop = asyncio.Event()
            task = asyncio.create_task(controller.run(stop))
            try:
                await asyncio.wait_for(controller.ready.wait(), 30)
                # created after startup: only polling can find it
                await client.create(
                    resources.DEPLOYMENTS,
                    builders.auto_deployment("late", namespace, configmaps=("c",), replicas=0),
                )

                async def indexed() -> bool:
                    return any(k.name == "late" for k in controller.index.workloads)

                await eventually(indexed, what="the polled Deployment in the cache")
                await update_cm(client, namespace, "c", {"a": "2"})

                async def reloaded() -> bool:
                    return "STAKATER_C_CONFIGMAP" in await env_of(
                        client, "Deployment", namespace, "late"
                    )

                await eventually(reloaded, what="a reload with Stakater's RBAC")
                text = controller.metrics.exposition().decode()
                assert 'kube_reloader_forbidden{resource="deployments.apps"} 1.0' in text
            finally:
                stop.set()
                await asyncio.wait_for(task, 30)
        polling = [r for r in caplog.records if "polling instead" in r.getMessage()]
        assert {r.__dict__.get("resource") for r in polling} >= {
            "deployments.apps",
            "cronjobs.batch",
            "jobs.batch",
        }
    finally:
        await client.delete(KINDS["ClusterRoleBinding"], name)
        await client.delete(KINDS["ClusterRole"], name)


def test_pod_reloads_and_workload_kinds_render_their_flags_and_exactly_their_rbac() -> None:
    docs = render(MATRIX["pod reloads"])
    args = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"][0]["args"]  # fmt: skip
    assert "--default-strategy=evict" in args
    assert "--workload-kind=serving.knative.dev/v1/services:spec.template" in args
    rules = [r for d in docs if d["kind"] == "ClusterRole" for r in d["rules"]]
    assert {"apiGroups": ["serving.knative.dev"], "resources": ["services"],
            "verbs": ["get", "list", "watch", "patch"]} in rules  # fmt: skip
    assert {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]} in rules
    plain = [r for d in render({}) if d["kind"] == "ClusterRole" for r in d["rules"]]
    assert not any("pods/eviction" in r["resources"] for r in plain)


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"reloader": {"watchGlobally": False}},
        {"reloader": {"watchGlobally": False, "namespaces": ["team-a", "team-b"]}},
        {"reloader": {"compat": "v2"}},
        {"reloader": {"compat": "v2", "watchGlobally": False, "namespaces": ["team-a"]}},
    ],
    ids=["cluster-wide", "one namespace", "scoped", "v2", "v2 scoped"],
)
def test_pods_list_is_granted_wherever_workloads_are_and_eviction_only_when_asked(
    values: dict[str, Any],
) -> None:
    """Before rolling a workload on time alone the controller lists its pods (freshness)."""
    pods = {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}
    eviction = {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
    for asked in (False, True):
        docs = render(nested("reloader.podReloads", asked, values))
        roles = [d for d in docs if d["kind"] in ("ClusterRole", "Role")
                 and d["metadata"]["name"].endswith("-role")]  # fmt: skip
        assert roles
        for role in roles:
            where = (role["kind"], role["metadata"].get("namespace"))
            assert pods in role["rules"], where
            assert (eviction in role["rules"]) is asked, where
            workloads = next(r for r in role["rules"] if "deployments" in r["resources"])
            assert "list" in workloads["verbs"]


# ------------------------------------------------------------------ Stakater's chart 2.x keys

APIS = ("--api-versions", "monitoring.coreos.com/v1", "--api-versions", "autoscaling.k8s.io/v1")


def helm_template(values: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(helm()), "template", "rel", str(CHART), "--namespace", "ns", "--kube-version", "1.36.3",
         "-f", str(IMAGE_VALUES), "-f", "-", *extra],
        input=yaml.safe_dump(values), capture_output=True, text=True, check=False,
    )  # fmt: skip


def nested(path: str, value: Any, into: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(json.dumps(into or {}))
    *parents, last = path.split(".")
    node = out
    for key in parents:
        node = node.setdefault(key, {})
    node[last] = value
    return out


# Every key of Stakater Reloader's chart 2.x values.yaml (v1.4.21), the commented-out ones
# included, and the values it only reads with another key set (the second element).
STAKATER_KEYS: list[tuple[str, Any, dict[str, Any]]] = [
    ("global.imageRegistry", "mirror.example", {}),
    ("global.imagePullSecrets", ["regcred"], {}),
    ("kubernetes.host", "https://api.example:6443", {}),
    ("nameOverride", "other", {}),
    ("fullnameOverride", "other", {}),
    ("image.name", "team/kr", {"global": {"imageRegistry": "mirror.example"}}),
    ("image.repository", "r.example/kr", {}),
    ("image.tag", "9", {}),
    ("image.digest", DIGEST, {}),
    ("image.pullPolicy", "Always", {}),
    *((f"reloader.{key}", True, {}) for key in (
        "autoReloadAll", "isArgoRollouts", "isOpenshift", "ignoreSecrets", "ignoreConfigMaps", "ignoreJobs",
        "ignoreCronJobs", "reloadOnCreate", "reloadOnDelete", "syncAfterRestart", "enableHA", "enablePProf",
        "enableCSIIntegration", "enableMetricsByNamespace")),
    ("reloader.reloadStrategy", "annotations", {}),
    ("reloader.ignoreNamespaces", "kube-system", {}),
    ("reloader.namespaceSelector", "team=a", {}),
    ("reloader.resourceLabelSelector", "reload=yes", {}),
    ("reloader.logFormat", "json", {}),
    ("reloader.logLevel", "debug", {}),
    ("reloader.watchGlobally", False, {}),
    ("reloader.namespaces", ["team-a"], {"reloader": {"watchGlobally": False}}),
    ("reloader.pprofAddr", ":7070", {"reloader": {"enablePProf": True}}),
    ("reloader.readOnlyRootFileSystem", False, {}),
    ("reloader.legacy.rbac", True, {}),
    ("reloader.matchLabels", {"tier": "ops"}, {}),
    ("reloader.deployment.dnsConfig", {"options": [{"name": "ndots", "value": "1"}]}, {}),
    ("reloader.deployment.replicas", 2, {}),
    ("reloader.deployment.revisionHistoryLimit", 5, {}),
    ("reloader.deployment.hostUsers", False, {}),
    ("reloader.deployment.nodeSelector", {"pool": "ops"}, {}),
    ("reloader.deployment.affinity", {"nodeAffinity": {}}, {}),
    ("reloader.deployment.volumeMounts", [{"name": "x", "mountPath": "/x"}], {}),
    ("reloader.deployment.volumes", [{"name": "x", "emptyDir": {}}], {}),
    ("reloader.deployment.securityContext", {"runAsUser": 1000}, {}),
    ("reloader.deployment.containerSecurityContext", {"privileged": False}, {}),
    ("reloader.deployment.tolerations", [{"key": "k", "operator": "Exists"}], {}),
    ("reloader.deployment.topologySpreadConstraints", [{"maxSkew": 1, "topologyKey": "zone",
                                                        "whenUnsatisfiable": "DoNotSchedule"}], {}),
    ("reloader.deployment.annotations", {"a": "b"}, {}),
    ("reloader.deployment.labels", {"a": "b"}, {}),
    ("reloader.deployment.env.open", {"EXTRA": ""}, {}),
    ("reloader.deployment.env.secret", {"ALERT_ADDITIONAL_INFO": "prod"}, {}),
    ("reloader.deployment.env.field", {"NODE": "spec.nodeName"}, {}),
    ("reloader.deployment.env.existing", {"alerts": {"ALERT_SINK": "sink"}}, {}),
    *((f"reloader.deployment.{probe}.{key}", 7, {}) for probe in ("livenessProbe", "readinessProbe")
      for key in ("timeoutSeconds", "failureThreshold", "periodSeconds", "successThreshold", "initialDelaySeconds")),
    ("reloader.deployment.resources", {"limits": {"cpu": "1"}}, {}),
    ("reloader.deployment.pod.annotations", {"a": "b"}, {}),
    ("reloader.deployment.priorityClassName", "critical", {}),
    ("reloader.deployment.imagePullSecrets", [{"name": "myregistrykey"}], {}),
    ("reloader.deployment.gomaxprocsOverride", "2", {}),
    ("reloader.deployment.gomemlimitOverride", "400MiB", {}),
    ("reloader.deployment.automountServiceAccountToken", False, {}),
    ("reloader.service.labels", {"a": "b"}, {"reloader": {"service": {"port": 9090}}}),
    ("reloader.service.annotations", {"a": "b"}, {"reloader": {"service": {"port": 9090}}}),
    ("reloader.service.port", 8080, {"reloader": {"service": {"labels": {}}}}),
    ("reloader.service.ipFamilyPolicy", "PreferDualStack", {"reloader": {"service": {"port": 9090}}}),
    ("reloader.service.ipFamilies", ["IPv4"], {"reloader": {"service": {"port": 9090}}}),
    ("reloader.rbac.enabled", False, {}),
    ("reloader.rbac.labels", {"a": "b"}, {}),
    ("reloader.serviceAccount.create", False, {}),
    ("reloader.serviceAccount.labels", {"a": "b"}, {}),
    ("reloader.serviceAccount.annotations", {"a": "b"}, {}),
    ("reloader.serviceAccount.name", "sa", {}),
    ("reloader.serviceAccount.automountServiceAccountToken", False, {}),
    *((f"reloader.custom_annotations.{key}", f"example.com/{key}", {}) for key in (
        "configmap", "secret", "auto", "secret_auto", "configmap_auto", "search", "match", "ignore",
        "pausePeriod", "pauseTime")),
    *((f"reloader.{monitor}.{key}", value, {"reloader": {monitor: {"enabled": True}}})
      for monitor, extra in (("serviceMonitor", (("bearerTokenFile", "/t"), ("targetLabels", ["team"]))),
                             ("podMonitor", (("bearerTokenSecret", {"name": "s", "key": "k"}),
                                             ("podTargetLabels", ["team"]))))
      for key, value in (("namespace", "monitoring"), ("interval", "10s"), ("scheme", "https"),
                         ("tlsConfig", {"insecureSkipVerify": True}), ("timeout", "5s"), ("labels", {"a": "b"}),
                         ("annotations", {"a": "b"}), ("honorLabels", False),
                         ("metricRelabelings", [{"action": "keep", "regex": "reloader_.*"}]),
                         ("relabelings", [{"action": "labeldrop", "regex": "pod"}]), *extra)),
    ("reloader.serviceMonitor.enabled", True, {}),
    ("reloader.podMonitor.enabled", True, {}),
    ("reloader.podDisruptionBudget.enabled", True, {}),
    ("reloader.podDisruptionBudget.minAvailable", 0, {"reloader": {"podDisruptionBudget": {"enabled": True}}}),
    ("reloader.podDisruptionBudget.maxUnavailable", 1, {"reloader": {"podDisruptionBudget": {"enabled": True}}}),
    ("reloader.netpol.enabled", True, {}),
    ("reloader.netpol.from", [{"podSelector": {}}], {"reloader": {"netpol": {"enabled": True}}}),
    ("reloader.netpol.to", [{"ipBlock": {"cidr": "10.0.0.1/32"}}], {"reloader": {"netpol": {"enabled": True}}}),
    ("reloader.verticalPodAutoscaler.enabled", True, {}),
    *((f"reloader.verticalPodAutoscaler.{key}", value, {"reloader": {"verticalPodAutoscaler": {"enabled": True}}})
      for key, value in (("recommenders", [{"name": "custom"}]), ("controlledResources", ["cpu"]),
                         ("controlledValues", "RequestsOnly"), ("maxAllowed", {"memory": "1Gi"}),
                         ("minAllowed", {"memory": "64Mi"}), ("updatePolicy", {"updateMode": "Off"}),
                         ("updatePolicy.minReplicas", 1))),
    ("reloader.webhookUrl", "https://hook.example/x", {}),
]  # fmt: skip
REFUSED = {
    "kubernetes.host",
    "reloader.legacy.rbac",
    "reloader.deployment.gomaxprocsOverride",
    "reloader.deployment.gomemlimitOverride",
}


@pytest.mark.parametrize(
    ("path", "value", "context"), STAKATER_KEYS, ids=[k[0] for k in STAKATER_KEYS]
)
def test_every_key_of_stakaters_chart_is_rendered_or_refused_naming_it(
    path: str, value: Any, context: dict[str, Any]
) -> None:
    before = helm_template(context, *APIS)
    assert before.returncode == 0, before.stderr
    after = helm_template(nested(path, value, context), *APIS)
    if path in REFUSED:
        assert after.returncode != 0
        assert path in after.stderr.strip().splitlines()[0]
    else:
        assert after.returncode == 0, after.stderr
        assert after.stdout != before.stdout, f"{path} changed nothing in the rendered chart"


def test_a_vertical_pod_autoscaler_is_rendered_as_stakaters_chart_does() -> None:
    vpa_values = {"enabled": True, "recommenders": [{"name": "custom"}], "controlledResources": ["cpu", "memory"],
                  "controlledValues": "RequestsOnly", "maxAllowed": {"memory": "1Gi"}, "minAllowed": {"cpu": "10m"},
                  "updatePolicy": {"updateMode": "Initial", "minReplicas": 1}}  # fmt: skip
    docs = render({"reloader": {"verticalPodAutoscaler": vpa_values}}, extra=APIS)
    vpa = next(d for d in docs if d["kind"] == "VerticalPodAutoscaler")
    assert vpa["apiVersion"] == "autoscaling.k8s.io/v1"
    assert (vpa["metadata"]["name"], vpa["metadata"]["namespace"]) == ("rel-reloader", "ns")
    assert vpa["spec"] == {
        "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "rel-reloader"},
        "recommenders": [{"name": "custom"}],
        "resourcePolicy": {"containerPolicies": [{
            "containerName": "rel-reloader", "controlledResources": ["cpu", "memory"],
            "controlledValues": "RequestsOnly", "maxAllowed": {"memory": "1Gi"}, "minAllowed": {"cpu": "10m"}}]},
        "updatePolicy": {"updateMode": "Initial", "minReplicas": 1},
    }  # fmt: skip
    container = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"][0]  # fmt: skip
    assert container["name"] == "rel-reloader"  # what containerName points at
    defaults = render({"reloader": {"verticalPodAutoscaler": {"enabled": True}}}, extra=APIS)
    vpa = next(d for d in defaults if d["kind"] == "VerticalPodAutoscaler")
    assert vpa["spec"]["resourcePolicy"] == {
        "containerPolicies": [{"containerName": "rel-reloader"}]
    }
    assert vpa["spec"]["updatePolicy"] == {"updateMode": "Auto"}


def test_without_the_autoscaling_api_the_vpa_is_skipped_as_in_stakaters_chart() -> None:
    docs = render({"reloader": {"verticalPodAutoscaler": {"enabled": True}}})
    assert not any(d["kind"] == "VerticalPodAutoscaler" for d in docs)
    assert not any(d["kind"] == "VerticalPodAutoscaler" for d in render({}, extra=APIS))


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_monitors_render_every_key_of_stakaters_chart(monitor: str) -> None:
    pod = monitor == "podMonitor"
    cfg = {"enabled": True, "interval": "10s", "timeout": "5s", "scheme": "https",
           "tlsConfig": {"insecureSkipVerify": True}, "labels": {"team": "{{ .Release.Name }}"},
           "annotations": {"owner": "{{ .Release.Name }}-ops"}, "honorLabels": False,
           "metricRelabelings": [{"action": "keep", "regex": "{{ .Release.Name }}_.*", "sourceLabels": ["__name__"]}],
           "relabelings": [{"action": "labeldrop", "regex": "pod"}]}  # fmt: skip
    if pod:
        cfg |= {
            "bearerTokenSecret": {"name": "scrape", "key": "token"},
            "podTargetLabels": ["team"],
        }
    else:
        cfg |= {"bearerTokenFile": "/var/run/token", "targetLabels": ["team"]}
    docs = render({"reloader": {monitor: cfg}}, extra=APIS)
    kind = "PodMonitor" if pod else "ServiceMonitor"
    mon = next(d for d in docs if d["kind"] == kind)
    assert mon["metadata"]["labels"]["team"] == "rel"
    assert mon["metadata"]["annotations"] == {"owner": "rel-ops"}
    assert mon["spec"]["jobLabel"] == "rel-reloader"
    assert mon["spec"]["podTargetLabels" if pod else "targetLabels"] == ["team"]
    assert ("targetLabels" if pod else "podTargetLabels") not in mon["spec"]
    assert mon["spec"]["selector"] == {"matchLabels": {"app": "rel-reloader", "release": "rel"}}
    assert mon["spec"]["namespaceSelector"] == {"matchNames": ["ns"]}
    endpoint = {"path": "/metrics", "interval": "10s", "scrapeTimeout": "5s", "scheme": "https",
                "tlsConfig": {"insecureSkipVerify": True}, "honorLabels": False,
                "metricRelabelings": [{"action": "keep", "regex": "rel_.*", "sourceLabels": ["__name__"]}],
                "relabelings": [{"action": "labeldrop", "regex": "pod"}]}  # fmt: skip
    if pod:
        endpoint |= {"port": "http", "bearerTokenSecret": {"name": "scrape", "key": "token"}}
    else:
        endpoint |= {"targetPort": "http", "bearerTokenFile": "/var/run/token"}
    assert mon["spec"]["podMetricsEndpoints" if pod else "endpoints"] == [endpoint]


@pytest.mark.parametrize("monitor", ["serviceMonitor", "podMonitor"])
def test_a_templated_monitor_namespace_goes_through_tpl(monitor: str) -> None:
    docs = render(
        {
            "reloader": {
                monitor: {"enabled": True, "namespace": "{{ .Release.Namespace }}-monitoring"}
            }
        },
        extra=APIS,
    )
    mon = next(d for d in docs if d["kind"] in ("ServiceMonitor", "PodMonitor"))
    assert mon["metadata"]["namespace"] == "ns-monitoring"
    assert mon["spec"]["namespaceSelector"] == {"matchNames": ["ns"]}  # where the pods are


def test_without_the_monitoring_api_the_pod_monitor_renders_and_the_service_monitor_not() -> None:
    docs = render(
        {"reloader": {"podMonitor": {"enabled": True}, "serviceMonitor": {"enabled": True}}}
    )
    kinds = [d["kind"] for d in docs]
    assert "PodMonitor" in kinds
    assert "ServiceMonitor" not in kinds
    with_api = render({"reloader": {"serviceMonitor": {"enabled": True}}}, extra=APIS)
    assert "ServiceMonitor" in [d["kind"] for d in with_api]


@pytest.mark.cluster
@pytest.mark.serial  # ClusterRoles and bindings, and what the cluster serves
async def install_dry_run(
    kubeconfig_path: Path, values: dict[str, Any]
) -> subprocess.CompletedProcess[str]:
    """`helm install --dry-run=server` of the chart with `values` (its notes included)."""
    return await asyncio.to_thread(
        subprocess.run,
        [str(helm()), "install", "rel", str(CHART), "--namespace", "ns", "--dry-run=server",
         "--kubeconfig", str(kubeconfig_path), "-f", str(IMAGE_VALUES), "-f", "-"],
        input=yaml.safe_dump(values), capture_output=True, text=True, check=False,
    )  # fmt: skip


async def test_the_install_notes_name_what_was_enabled_but_skipped_for_a_missing_api(
    kubeconfig_path: Path,
) -> None:
    values = {
        "reloader": {
            "serviceMonitor": {"enabled": True},
            "verticalPodAutoscaler": {"enabled": True},
        }
    }
    out = await install_dry_run(kubeconfig_path, values)
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    assert "reloader.serviceMonitor.enabled: no ServiceMonitor was created" in notes
    assert "reloader.verticalPodAutoscaler.enabled: no VerticalPodAutoscaler was created" in notes
    manifests = out.stdout.split("NOTES:", 1)[0]
    assert "kind: ServiceMonitor" not in manifests
    assert "kind: VerticalPodAutoscaler" not in manifests


@pytest.mark.parametrize(
    "key",
    [
        "configmap_exclude",
        "secret_exclude",
        "secretproviderclass",
        "secretproviderclass_auto",
        "secretproviderclass_exclude",
    ],
)
@pytest.mark.parametrize("compat", ["v1", "v2"])
def test_a_v2_only_custom_annotation_renders_its_flag_once_the_compat_is_chosen(
    key: str, compat: str
) -> None:
    values = {"reloader": {"compat": compat, "custom_annotations": {key: "example.com/x"}}}
    out = helm_template(values)
    assert out.returncode == 0, out.stderr
    assert "=example.com/x" in out.stdout
    unchosen = helm_template({"reloader": {"custom_annotations": {key: "example.com/x"}}})
    assert unchosen.returncode != 0
    assert (
        f"reloader.custom_annotations.{key} is read only by Stakater's v2 chart" in unchosen.stderr
    )


@pytest.mark.parametrize(("compat", "annotations", "rendered"), [
    ("v2", {}, False),
    ("v2", {"auto": "example.com/auto"}, True),
    ("v1", {}, True),
    ("", {}, True),
])  # fmt: skip
def test_with_compat_v2_the_webhook_url_is_rendered_only_beside_custom_annotations_as_v2s_chart(
    compat: str, annotations: dict[str, str], rendered: bool
) -> None:
    values = {"reloader": {"compat": compat, "webhookUrl": "https://hook.example/x",
                           "custom_annotations": annotations}}  # fmt: skip
    out = helm_template(values)
    assert out.returncode == 0, out.stderr
    assert ("--webhook-url=https://hook.example/x" in out.stdout) is rendered


async def test_the_install_notes_say_when_the_webhook_url_is_left_out_as_v2s_chart_leaves_it(
    kubeconfig_path: Path,
) -> None:
    values = {"reloader": {"compat": "v2", "webhookUrl": "https://hook.example/x"}}
    out = await install_dry_run(kubeconfig_path, values)
    assert out.returncode == 0, out.stderr
    notes = out.stdout.split("NOTES:", 1)[1]
    assert "reloader.webhookUrl: not passed to the controller" in notes
    assert "--webhook-url" not in out.stdout.split("NOTES:", 1)[0]


@pytest.mark.parametrize(
    "level", ["WARNING", "Warn", "warning", "TRACE", "Debug", "INFO", "error", "Fatal", "PANIC"]
)
def test_the_log_level_is_accepted_in_any_case_as_the_binary_reads_it(level: str) -> None:
    docs = render({"reloader": {"logLevel": level}})
    container = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"][0]  # fmt: skip
    assert f"--log-level={level.lower()}" in container["args"]
    settings = parse(container["args"], env={})
    assert settings.options is not None


def test_an_empty_log_level_renders_no_flag_and_the_binary_default_applies() -> None:
    docs = render({"reloader": {"logLevel": ""}})
    args = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"][0]["args"]  # fmt: skip
    assert not any(a.startswith("--log-level") for a in args)


@pytest.mark.parametrize(
    ("reloader", "container", "want"),
    [
        ({}, {}, True),
        ({"readOnlyRootFileSystem": False}, {}, False),
        ({"readOnlyRootFileSystem": True}, {}, True),
        ({}, {"readOnlyRootFilesystem": False}, False),
        ({"readOnlyRootFileSystem": False}, {"readOnlyRootFilesystem": True}, True),
        ({"readOnlyRootFileSystem": True}, {"readOnlyRootFilesystem": False}, True),
    ],
)
def test_read_only_root_filesystem_is_on_by_default_and_either_key_turns_it_off(
    reloader: dict[str, Any], container: dict[str, Any], want: bool
) -> None:
    values = {"reloader": reloader | {"deployment": {"containerSecurityContext": container}}}
    docs = render(values)
    c = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    assert c["securityContext"]["readOnlyRootFilesystem"] is want
    assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_the_default_version_label_is_this_charts_app_version() -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    deployment = next(d for d in render({}) if d["kind"] == "Deployment")
    assert deployment["metadata"]["labels"]["version"] == app_version
    assert deployment["spec"]["template"]["metadata"]["labels"]["version"] == app_version
    assert (
        deployment["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/version"]
        == app_version
    )


@pytest.mark.parametrize(
    "values",
    [
        {},
        {"reloader": {"watchGlobally": False, "enableHA": True, "hashAlgorithm": "hmac-sha256"}},
        {"reloader": {"watchGlobally": False, "namespaces": ["team-a"]}},
    ],
    ids=["cluster-wide", "namespaced, ha, hmac", "scoped"],
)
def test_rbac_labels_are_on_every_rbac_object(values: dict[str, Any]) -> None:
    docs = render(nested("reloader.rbac.labels", {"audit": "yes"}, values))
    rbac = [d for d in docs if d["apiVersion"].startswith("rbac.authorization.k8s.io/")]
    assert rbac
    for doc in rbac:
        assert doc["metadata"]["labels"].get("audit") == "yes", (
            doc["kind"],
            doc["metadata"]["name"],
        )


def test_pull_secrets_of_the_deployment_are_added_to_the_global_ones() -> None:
    docs = render({"global": {"imagePullSecrets": ["regcred"]},
                   "reloader": {"deployment": {"imagePullSecrets": [{"name": "myregistrykey"}]}}})  # fmt: skip
    spec = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "regcred"}, {"name": "myregistrykey"}]


def test_probe_keys_beyond_the_timings_are_rendered_as_given() -> None:
    docs = render({"reloader": {"deployment": {
        "livenessProbe": {"terminationGracePeriodSeconds": 3, "timeoutSeconds": 0},
        "readinessProbe": {"tcpSocket": {"port": "http"}}}}})  # fmt: skip
    c = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"
    ][0]
    live, ready = c["livenessProbe"], c["readinessProbe"]
    assert live["terminationGracePeriodSeconds"] == 3
    assert live["timeoutSeconds"] == 0
    assert live["httpGet"] == {"path": "/live", "port": "http"}
    assert ready["tcpSocket"] == {"port": "http"}
    assert "httpGet" not in ready
    assert (ready["periodSeconds"], ready["initialDelaySeconds"]) == (10, 5)


def test_an_open_env_var_with_an_empty_value_is_rendered() -> None:
    docs = render({"reloader": {"deployment": {"env": {"open": {"EMPTY": "", "SET": "1"}}}}})
    env = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"][
        "containers"][0]["env"]  # fmt: skip
    assert {"name": "EMPTY", "value": ""} in env
    assert {"name": "SET", "value": "1"} in env


# ------------------------------------------------------------------ Stakater's v2 chart (3.x)

V2_VALUES = ROOT / "tests" / "data" / "stakater-v2-chart-values.yaml"
V2_DIGEST = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
# What tests/data/stakater-v2-chart-values.yaml cannot say at once (it is written for global
# mode): each overlay goes on top of it, as a second values file would.
V2_OVERLAYS: dict[str, dict[str, Any]] = {
    "global mode": {},
    "scoped": {
        "global": {"imageRegistry": ""}, "fullnameOverride": "ops-reloader",
        "reloader": {"watchGlobally": False, "namespaces": ["team-b", "team-a"], "ignoreNamespaces": "",
                     "namespaceSelector": "", "ignoreSecrets": False, "ignoreConfigMaps": True,
                     "podDisruptionBudget": {"minAvailable": 1, "maxUnavailable": None}},
    },
    "no rbac": {"reloader": {"rbac": {"enabled": False}, "serviceAccount": {"create": False}}},
}  # fmt: skip
_BOOLS = ("autoReloadAll", "isArgoRollouts", "isOpenshift", "ignoreSecrets", "ignoreConfigMaps", "ignoreJobs",
          "ignoreCronJobs", "reloadOnCreate", "reloadOnDelete", "syncAfterRestart", "enableHA", "enablePProf",
          "enableCSIIntegration", "readOnlyRootFileSystem", "enableMetricsByNamespace")  # fmt: skip
_PROBE = (
    "timeoutSeconds",
    "failureThreshold",
    "periodSeconds",
    "successThreshold",
    "initialDelaySeconds",
)
_MONITOR: tuple[tuple[str, Any], ...] = (
    ("enabled", False), ("namespace", None), ("interval", None), ("scheme", None), ("tlsConfig", None),
    ("timeout", None), ("labels", {}), ("annotations", {}), ("honorLabels", True),
    ("metricRelabelings", []), ("relabelings", []))  # fmt: skip
# Every key Stakater's v2 chart reads, with its default there (None: not in its values.yaml,
# or commented out): chart 2.x's keys without service.ipFamilyPolicy/ipFamilies, plus
# global.consoleHost/gatewayHost/gatewayScheme, enterprise.* and five custom_annotations.
V2_CHART_KEYS: list[tuple[str, Any]] = [
    ("global.imageRegistry", ""), ("global.imagePullSecrets", []), ("global.consoleHost", ""),
    ("global.gatewayHost", ""), ("global.gatewayScheme", "https"),
    ("kubernetes.host", "https://kubernetes.default"), ("nameOverride", ""), ("fullnameOverride", ""),
    ("image.name", "stakater/reloader"), ("image.repository", "ghcr.io/stakater/reloader"),
    ("image.tag", "v2.0.0"), ("image.digest", None), ("image.pullPolicy", "IfNotPresent"),
    ("enterprise.enabled", False), ("enterprise.console.enabled", True), ("enterprise.gateway.enabled", True),
    ("enterprise.gateway.dragonfly.enabled", True),
    ("enterprise.dragonfly.fullnameOverride", "reloader-enterprise-dragonfly"),
    *((f"reloader.{key}", False) for key in _BOOLS),
    ("reloader.reloadStrategy", "default"), ("reloader.ignoreNamespaces", ""), ("reloader.namespaceSelector", ""),
    ("reloader.resourceLabelSelector", ""), ("reloader.logFormat", ""), ("reloader.logLevel", "info"),
    ("reloader.watchGlobally", True), ("reloader.namespaces", []), ("reloader.pprofAddr", ":6060"),
    ("reloader.legacy.rbac", False), ("reloader.matchLabels", {}), ("reloader.webhookUrl", ""),
    *((f"reloader.custom_annotations.{key}", None) for key in (
        "configmap", "secret", "auto", "secret_auto", "configmap_auto", "search", "match", "ignore", "pausePeriod",
        "pauseTime", "configmap_exclude", "secret_exclude", "secretproviderclass", "secretproviderclass_auto",
        "secretproviderclass_exclude")),
    ("reloader.deployment.dnsConfig", {}), ("reloader.deployment.replicas", 1),
    ("reloader.deployment.revisionHistoryLimit", 2), ("reloader.deployment.hostUsers", None),
    ("reloader.deployment.nodeSelector", None), ("reloader.deployment.affinity", {}),
    ("reloader.deployment.volumeMounts", []), ("reloader.deployment.volumes", []),
    ("reloader.deployment.securityContext",
     {"runAsNonRoot": True, "runAsUser": 65534, "seccompProfile": {"type": "RuntimeDefault"}}),
    ("reloader.deployment.containerSecurityContext", {}), ("reloader.deployment.tolerations", []),
    ("reloader.deployment.topologySpreadConstraints", []), ("reloader.deployment.annotations", {}),
    ("reloader.deployment.labels", {"provider": "stakater", "group": "com.stakater.platform", "version": "v1.4.19"}),
    *((f"reloader.deployment.env.{key}", None) for key in ("open", "secret", "field", "existing")),
    *((f"reloader.deployment.{probe}.{key}", None) for probe in ("livenessProbe", "readinessProbe") for key in _PROBE),
    ("reloader.deployment.resources", {}), ("reloader.deployment.pod.annotations", {}),
    ("reloader.deployment.priorityClassName", ""), ("reloader.deployment.imagePullSecrets", None),
    ("reloader.deployment.gomaxprocsOverride", ""), ("reloader.deployment.gomemlimitOverride", ""),
    ("reloader.deployment.automountServiceAccountToken", None),
    ("reloader.service.labels", None), ("reloader.service.annotations", None), ("reloader.service.port", None),
    ("reloader.rbac.enabled", True), ("reloader.rbac.labels", {}),
    ("reloader.serviceAccount.create", True), ("reloader.serviceAccount.labels", {}),
    ("reloader.serviceAccount.annotations", {}), ("reloader.serviceAccount.name", None),
    ("reloader.serviceAccount.automountServiceAccountToken", None),
    *((f"reloader.serviceMonitor.{key}", default) for key, default in
      (*_MONITOR, ("bearerTokenFile", None), ("targetLabels", []))),
    *((f"reloader.podMonitor.{key}", default) for key, default in
      (*_MONITOR, ("bearerTokenSecret", None), ("podTargetLabels", []))),
    ("reloader.podDisruptionBudget.enabled", False), ("reloader.podDisruptionBudget.minAvailable", None),
    ("reloader.podDisruptionBudget.maxUnavailable", None),
    ("reloader.netpol.enabled", False), ("reloader.netpol.from", []), ("reloader.netpol.to", []),
    ("reloader.verticalPodAutoscaler.enabled", False), ("reloader.verticalPodAutoscaler.recommenders", None),
    ("reloader.verticalPodAutoscaler.controlledResources", []),
    ("reloader.verticalPodAutoscaler.controlledValues", None), ("reloader.verticalPodAutoscaler.maxAllowed", {}),
    ("reloader.verticalPodAutoscaler.minAllowed", {}),
    ("reloader.verticalPodAutoscaler.updatePolicy.minReplicas", None),
    ("reloader.verticalPodAutoscaler.updatePolicy.updateMode", "Auto"),
]  # fmt: skip
# Keys kube-reloader takes only at their defaults (the data file gives them so), and a value
# that is refused; the commented-out enterprise keys of that chart's values.yaml included.
V2_REFUSED: list[tuple[str, Any]] = [
    ("enterprise.enabled", True), ("enterprise.console.enabled", False), ("enterprise.gateway.enabled", False),
    ("enterprise.gateway.dragonfly.enabled", False), ("enterprise.dragonfly.fullnameOverride", "dragonfly"),
    ("enterprise.console.deployment.image.tag", "v0.1.0"),
    ("enterprise.gateway.ingress.annotations", {"route.openshift.io/termination": "edge"}),
    ("global.consoleHost", "console.example"), ("global.gatewayHost", "gateway.example"),
    ("global.gatewayScheme", "http"), ("kubernetes.host", "https://api.example:6443"),
    ("reloader.legacy.rbac", True), ("reloader.deployment.gomaxprocsOverride", "2"),
    ("reloader.deployment.gomemlimitOverride", "400MiB"),
]  # fmt: skip
MISSING = object()


def dig(values: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(values, dict) or key not in values:
            return MISSING
        values = values[key]
    return values


def merged(base: dict[str, Any], overlay: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in overlay.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = merged(out[key], value) if both else value
    return out


def v2_values() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(V2_VALUES.read_text())
    return loaded


def render_v2(overlay: dict[str, Any], *extra: str) -> subprocess.CompletedProcess[str]:
    """helm template with the v2-chart values file, then `overlay` as a second values file."""
    return subprocess.run(
        [str(helm()), "template", "rel", str(CHART), "--namespace", "ns", "--kube-version", "1.36.3",
         "-f", str(IMAGE_VALUES), "-f", str(V2_VALUES), "-f", "-", *APIS, *extra],
        input=yaml.safe_dump(overlay), capture_output=True, text=True, check=False,
    )  # fmt: skip


def v2_docs(overlay: dict[str, Any]) -> list[dict[str, Any]]:
    out = render_v2(nested("reloader.compat", "v2", overlay))
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def container_of(docs: list[dict[str, Any]]) -> dict[str, Any]:
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    found: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return found


def parse_as_the_pod_would(container: dict[str, Any]) -> Any:
    """The binary's own parser on the rendered args and env (skipped while it has no --compat)."""
    env = {e["name"]: e.get("value", "x") for e in container.get("env", [])}
    env.update(POD_NAME="pod", POD_NAMESPACE="ns")
    env.pop("ALERT_WEBHOOK_URL", None)  # a secretKeyRef; "x" is no URL
    try:
        return parse(container["args"], env=env)
    except FlagError as exc:
        if "unrecognized arguments" in str(exc) and "--compat" in str(exc):
            pytest.skip("this build of the binary does not take --compat yet")
        raise


def test_the_v2_values_file_sets_every_key_of_stakaters_v2_chart_off_its_default() -> None:
    values = v2_values()
    refused = {path for path, _ in V2_REFUSED}
    for path, default in V2_CHART_KEYS:
        if path in refused:
            assert dig(values, path) == default, f"{path}: only its default is accepted"
            continue
        seen = [dig(merged(values, overlay), path) for overlay in V2_OVERLAYS.values()]
        assert any(v not in (MISSING, default) for v in seen), (
            f"{path} is left at its default {default!r} by {V2_VALUES.name} and every overlay"
        )
    assert "compat" not in values["reloader"]  # Stakater's keys only; the test adds ours


def test_every_key_in_the_values_of_stakaters_v2_chart_source_is_in_the_list() -> None:
    """Drift guard against the source tree of that chart, where this machine has it."""
    from kube_reloader.devcluster.peers import source_tree

    path = source_tree("reloader-v2") / "deployments/kubernetes/chart/reloader/values.yaml"
    if not path.is_file():
        pytest.skip(f"no source tree of Stakater's v2 chart at {path}")
    listed = {p for p, _ in V2_CHART_KEYS}

    def leaves(node: Any, prefix: str) -> list[str]:
        if isinstance(node, dict) and node:
            return [leaf for k, v in node.items() for leaf in leaves(v, f"{prefix}{k}.")]
        return [prefix[:-1]]

    for leaf in leaves(yaml.safe_load(path.read_text()), ""):
        # a listed key, inside one (a default map's content), or an empty map of listed keys
        covered = any(
            leaf == k or leaf.startswith(f"{k}.") or k.startswith(f"{leaf}.") for k in listed
        )
        assert covered, f"{leaf} (in Stakater's v2 chart) is not in V2_CHART_KEYS"


V2_GLOBAL_ARGS = [
    "--compat=v2", "--health-addr=:8080", "--log-level=debug", "--log-format=json",
    "--resources-to-ignore=secrets", "--ignored-workload-types=jobs,cronjobs",
    "--namespaces-to-ignore=kube-system,kube-public", "--namespace-selector=team in (a,b)",
    "--resource-label-selector=reload=yes", "--enable-pprof", "--pprof-addr=:7070", "--enable-csi-integration=true",
    "--auto-annotation=example.com/auto", "--configmap-annotation=example.com/configmap",
    "--configmap-auto-annotation=example.com/configmap-auto",
    "--configmap-exclude-annotation=example.com/configmap-exclude", "--ignore-annotation=example.com/ignore",
    "--search-match-annotation=example.com/match", "--pause-deployment-annotation=example.com/pause-period",
    "--pause-deployment-time-annotation=example.com/paused-at", "--auto-search-annotation=example.com/search",
    "--secret-annotation=example.com/secret", "--secret-auto-annotation=example.com/secret-auto",
    "--secret-exclude-annotation=example.com/secret-exclude",
    "--secretproviderclass-annotation=example.com/secretproviderclass",
    "--secretproviderclass-auto-annotation=example.com/secretproviderclass-auto",
    "--secretproviderclass-exclude-annotation=example.com/secretproviderclass-exclude",
    "--webhook-url=https://hooks.example/reloader", "--is-Argo-Rollouts=true",
    "--reload-on-create=true", "--reload-on-delete=true", "--sync-after-restart=true",
    "--reload-strategy=annotations", "--enable-ha=true", "--leader-election-lease-duration=15s",
    "--leader-election-renew-deadline=10s", "--leader-election-retry-period=2s", "--auto-reload-all=true",
    "--workers=4",
]  # fmt: skip


def test_values_for_stakaters_v2_chart_render_its_flags_and_objects_with_compat_v2() -> None:
    docs = v2_docs({})
    names = {(d["kind"], d["metadata"]["name"], d["metadata"].get("namespace")) for d in docs}
    assert names == {
        ("ServiceAccount", "reloader-sa", "ns"), ("Secret", "rel-reloader-v2", "ns"),
        ("ClusterRole", "rel-reloader-v2-role", None), ("ClusterRoleBinding", "rel-reloader-v2-role-binding", None),
        ("Role", "rel-reloader-v2-leader-election", "ns"), ("RoleBinding", "rel-reloader-v2-leader-election", "ns"),
        ("Service", "rel-reloader-v2", "ns"), ("Deployment", "rel-reloader-v2", "ns"),
        ("NetworkPolicy", "rel-reloader-v2", "ns"), ("PodDisruptionBudget", "rel-reloader-v2", "ns"),
        ("ServiceMonitor", "rel-reloader-v2", "monitoring"), ("PodMonitor", "rel-reloader-v2", "monitoring"),
        ("VerticalPodAutoscaler", "rel-reloader-v2", "ns"),
    }  # fmt: skip
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    # nameOverride: reloader-v2 gives the objects and selector Stakater's v2 chart gives
    assert deployment["spec"]["selector"]["matchLabels"] == {
        "app": "rel-reloader-v2", "release": "rel", "tier": "ops"}  # fmt: skip
    assert deployment["spec"]["replicas"] == 2
    c = container_of(docs)
    assert c["args"] == V2_GLOBAL_ARGS
    assert c["image"] == f"mirror.example/team/reloader:9.9.9@{V2_DIGEST}"
    assert c["imagePullPolicy"] == "Always"
    assert c["ports"] == [{"name": "http", "containerPort": 9090, "protocol": "TCP"},
                          {"name": "health", "containerPort": 8080, "protocol": "TCP"}]  # fmt: skip
    assert c["livenessProbe"] == {"httpGet": {"path": "/healthz", "port": "health"}, "timeoutSeconds": 3,
                                  "failureThreshold": 4, "periodSeconds": 20, "successThreshold": 1,
                                  "initialDelaySeconds": 15}  # fmt: skip
    assert c["readinessProbe"] == {"httpGet": {"path": "/readyz", "port": "health"}, "timeoutSeconds": 15,
                                   "failureThreshold": 3, "periodSeconds": 5, "successThreshold": 2,
                                   "initialDelaySeconds": 1}  # fmt: skip
    env = {e["name"]: e for e in c["env"]}
    assert env["ALERT_WEBHOOK_PROXY"]["valueFrom"]["secretKeyRef"] == {
        "name": "alert-settings",
        "key": "proxy",
    }
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["METRICS_COUNT_BY_NAMESPACE"]["value"] == "enabled"
    assert "KUBERNETES_NAMESPACE" not in env
    secret = next(d for d in docs if d["kind"] == "Secret")
    assert set(secret["data"]) == {
        "ALERT_ON_RELOAD",
        "ALERT_SINK",
        "ALERT_WEBHOOK_URL",
        "ALERT_ADDITIONAL_INFO",
    }
    role = next(d for d in docs if d["kind"] == "ClusterRole")
    assert role["metadata"]["labels"]["audit"] == "yes"
    resources = {res for r in role["rules"] for res in r["resources"]}
    assert {"configmaps", "rollouts", "secretproviderclasses", "namespaces", "pods"} <= resources
    # isOpenshift, but apps.openshift.io is not served: none, as Stakater's v2 chart
    assert not {"secrets", "jobs", "cronjobs", "pods/eviction", "deploymentconfigs"} & resources
    lease = next(d for d in docs if d["kind"] == "Role")
    assert lease["rules"][1]["resourceNames"] == ["reloader-leader-election"]
    netpol = next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]
    assert netpol["ingress"] == [
        {"ports": [{"port": "http", "protocol": "TCP"}],
         "from": [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}}]},
        {"ports": [{"port": "health", "protocol": "TCP"}]}]  # fmt: skip
    assert netpol["egress"][0]["to"] == [{"ipBlock": {"cidr": "10.0.0.1/32"}}]
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")["spec"]
    assert (pdb.get("maxUnavailable"), "minAvailable" in pdb) == (1, False)
    service = next(d for d in docs if d["kind"] == "Service")
    assert service["spec"]["ports"][0]["port"] == 9091
    settings = parse_as_the_pod_would(c)
    assert (str(settings.compat), settings.health_addr) == ("v2", ":8080")
    keys = settings.options.plan.match.keys
    assert (keys.configmap_exclude, keys.secret_exclude) == (
        "example.com/configmap-exclude", "example.com/secret-exclude")  # fmt: skip
    assert (keys.spc_reload, keys.spc_auto, keys.spc_exclude) == (
        "example.com/secretproviderclass", "example.com/secretproviderclass-auto",
        "example.com/secretproviderclass-exclude")  # fmt: skip


def test_the_v2_values_file_in_scoped_mode_watches_exactly_its_namespaces() -> None:
    docs = v2_docs(V2_OVERLAYS["scoped"])
    c = container_of(docs)
    assert [a for a in c["args"] if "namespace" in a or "resources-to-ignore" in a] == [
        "--resources-to-ignore=configmaps", "--namespaces=team-a,team-b"]  # fmt: skip
    assert c["image"] == f"registry.example/team/reloader:9.9.9@{V2_DIGEST}"
    roles = {(d["kind"], d["metadata"]["name"], d["metadata"]["namespace"])
             for d in docs if d["kind"] in ("Role", "RoleBinding")}  # fmt: skip
    assert roles == {
        ("Role", "ops-reloader-role", "team-a"), ("RoleBinding", "ops-reloader-role-binding", "team-a"),
        ("Role", "ops-reloader-role", "team-b"), ("RoleBinding", "ops-reloader-role-binding", "team-b"),
        ("Role", "ops-reloader-leader-election", "ns"), ("RoleBinding", "ops-reloader-leader-election", "ns"),
    }  # fmt: skip
    assert not any(d["kind"].startswith("Cluster") for d in docs)
    pdb = next(d for d in docs if d["kind"] == "PodDisruptionBudget")["spec"]
    assert (pdb.get("minAvailable"), "maxUnavailable" in pdb) == (1, False)
    settings = parse_as_the_pod_would(c)
    assert settings.options.namespaces == ("team-a", "team-b")


def test_the_v2_values_file_without_rbac_renders_no_rbac_and_uses_the_named_account() -> None:
    docs = v2_docs(V2_OVERLAYS["no rbac"])
    assert not any(d["apiVersion"].startswith("rbac.authorization.k8s.io/") for d in docs)
    assert not any(d["kind"] == "ServiceAccount" for d in docs)
    spec = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["spec"]
    assert spec["serviceAccountName"] == "reloader-sa"


def test_the_v2_values_file_asks_for_a_compat_and_renders_in_v1_mode_with_v1_probes() -> None:
    unchosen = render_v2({})  # it sets custom annotations only Stakater's v2 chart reads
    assert unchosen.returncode != 0
    assert "is read only by Stakater's v2 chart: set reloader.compat: v2" in unchosen.stderr
    out = render_v2({"reloader": {"compat": "v1"}})
    assert out.returncode == 0, out.stderr
    c = container_of([d for d in yaml.safe_load_all(out.stdout) if d])
    v1_args = [a for a in V2_GLOBAL_ARGS if a not in ("--compat=v2", "--health-addr=:8080")]
    at = v1_args.index("--reload-on-create=true")  # v1 mode passes --is-openshift as before
    assert c["args"] == [*v1_args[:at], "--is-openshift=true", *v1_args[at:]]
    assert [p["name"] for p in c["ports"]] == ["http"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/live", "port": "http"}


@pytest.mark.parametrize(("path", "value"), V2_REFUSED, ids=[p for p, _ in V2_REFUSED])
def test_a_key_of_stakaters_v2_chart_that_kube_reloader_lacks_fails_in_one_line_naming_it(
    path: str, value: Any
) -> None:
    out = render_v2(nested(path, value, {"reloader": {"compat": "v2"}}))
    assert out.returncode != 0
    lines = out.stderr.strip().splitlines()
    assert path in lines[0], lines[0]
    assert len(lines) <= 3  # the message, then helm's --debug hint


@pytest.mark.parametrize(
    "values",
    [
        {"enterprise": {"enabled": False, "console": {"enabled": True, "deployment": {"image": {"tag": ""}}},
                        "gateway": {"ingress": {"annotations": {}}}},
         "global": {"consoleHost": "", "gatewayHost": "", "gatewayScheme": "https"}},
        {"enterprise": None},
    ],
    ids=["at the defaults", "removed"],
)  # fmt: skip
def test_the_enterprise_keys_at_their_defaults_render_nothing(values: dict[str, Any]) -> None:
    assert render(values) == render({})


@pytest.mark.parametrize("compat", ["v1", "v2"])
@pytest.mark.parametrize(
    ("key", "flag"),
    [("configmap_exclude", "--configmap-exclude-annotation"),
     ("secret_exclude", "--secret-exclude-annotation"),
     ("secretproviderclass", "--secretproviderclass-annotation"),
     ("secretproviderclass_auto", "--secretproviderclass-auto-annotation"),
     ("secretproviderclass_exclude", "--secretproviderclass-exclude-annotation")],
)  # fmt: skip
def test_each_custom_annotation_key_of_the_v2_chart_renders_its_flag(
    key: str, flag: str, compat: str
) -> None:
    values = {"reloader": {"compat": compat, "custom_annotations": {key: "example.com/x"}}}
    c = container_of(render(values))
    assert [a for a in c["args"] if "-annotation" in a] == [f"{flag}=example.com/x"]
    empty = container_of(render(nested(f"reloader.custom_annotations.{key}", "", values)))
    assert not any(a.startswith(flag) for a in empty["args"])


# ------------------------------------------------------------------ reloader.compat


def test_compat_v2_renders_the_flag_the_health_port_and_the_v2_probes() -> None:
    c = container_of(render({"reloader": {"compat": "v2"}}))
    assert c["args"][:2] == ["--compat=v2", "--health-addr=:8080"]
    assert {"name": "health", "containerPort": 8080, "protocol": "TCP"} in c["ports"]
    assert {"name": "http", "containerPort": 9090, "protocol": "TCP"} in c["ports"]  # metrics stay
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    settings = parse_as_the_pod_would(c)
    assert (str(settings.compat), settings.health_addr) == ("v2", ":8080")


@pytest.mark.parametrize("compat", [None, "v1"])
def test_compat_v1_the_default_keeps_the_v1_flags_port_and_probes(compat: str | None) -> None:
    c = container_of(render({"reloader": {"compat": compat}} if compat else {}))
    assert not any(a.startswith(("--compat", "--health-addr")) for a in c["args"])
    assert [p["name"] for p in c["ports"]] == ["http"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/live", "port": "http"}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}


def test_a_probe_handler_given_in_the_values_wins_in_v2_mode_too() -> None:
    c = container_of(render({"reloader": {"compat": "v2", "deployment": {
        "readinessProbe": {"tcpSocket": {"port": "health"}}}}}))  # fmt: skip
    assert c["readinessProbe"]["tcpSocket"] == {"port": "health"}
    assert "httpGet" not in c["readinessProbe"]


@pytest.mark.parametrize(
    ("compat", "lease"), [("v1", "stakater-reloader-lock"), ("v2", "reloader-leader-election")]
)
def test_the_lease_role_names_the_lease_of_the_compat_mode(compat: str, lease: str) -> None:
    docs = render({"reloader": {"compat": compat, "enableHA": True}})
    role = next(
        d
        for d in docs
        if d["kind"] == "Role" and d["metadata"]["name"] == "rel-reloader-leader-election"
    )
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": [lease],
         "verbs": ["get", "update"]},
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("compat", "health"), [("v1", False), ("v2", True)], ids=["v1: metrics only", "v2: and health"]
)
def test_the_network_policy_admits_scrapes_and_in_v2_the_probes_on_the_health_port(
    compat: str, health: bool
) -> None:
    scraper = [{"namespaceSelector": {"matchLabels": {"name": "monitoring"}}}]
    docs = render({"reloader": {"compat": compat, "netpol": {"enabled": True, "from": scraper}}})
    ingress = next(d for d in docs if d["kind"] == "NetworkPolicy")["spec"]["ingress"]
    assert ingress[0] == {"ports": [{"port": "http", "protocol": "TCP"}], "from": scraper}
    # probes come from the node's kubelet, which no `from` selector of pods names
    assert (ingress[1:] == [{"ports": [{"port": "health", "protocol": "TCP"}]}]) is health
    assert len(ingress) == 1 + health


@pytest.mark.parametrize("compat", ["v1", "v2"])
def test_watch_globally_false_watches_the_release_namespace_in_both_modes(compat: str) -> None:
    docs = render({"reloader": {"compat": compat, "watchGlobally": False}})
    c = container_of(docs)
    env = {e["name"] for e in c["env"]}
    if compat == "v2":  # as Stakater's v2 chart: the flag, no KUBERNETES_NAMESPACE
        assert "--namespaces=ns" in c["args"]
        assert "KUBERNETES_NAMESPACE" not in env
    else:
        assert not any(a.startswith("--namespaces=") for a in c["args"])
        assert "KUBERNETES_NAMESPACE" in env
    assert {(d["kind"], d["metadata"]["namespace"]) for d in docs if d["kind"] in ("Role", "RoleBinding")} == {
        ("Role", "ns"), ("RoleBinding", "ns")}  # fmt: skip
    assert not any(d["kind"].startswith("Cluster") for d in docs)
    if compat == "v2":
        settings = parse_as_the_pod_would(c)
        assert settings.options.namespaces == ("ns",)


@pytest.mark.parametrize(
    ("compat", "watched"), [("v1", ["ns", "team-a", "team-b"]), ("v2", ["team-a", "team-b"])]
)
def test_scoped_namespaces_add_the_release_namespace_in_v1_only(
    compat: str, watched: list[str]
) -> None:
    docs = render(
        {"reloader": {"compat": compat, "watchGlobally": False, "namespaces": "team-b, team-a"}}
    )
    assert f"--namespaces={','.join(watched)}" in container_of(docs)["args"]
    assert sorted(d["metadata"]["namespace"] for d in docs if d["kind"] == "Role") == watched


@pytest.mark.cluster
@pytest.mark.serial  # ClusterRoles and bindings, and what the cluster serves
@pytest.mark.parametrize("overlay", list(V2_OVERLAYS))
async def test_the_v2_values_file_renders_objects_the_api_server_accepts(
    client: Client, overlay: str
) -> None:
    ns = f"chart-v2-{secrets.token_hex(3)}"
    values = nested("reloader.compat", "v2", V2_OVERLAYS[overlay])
    if dig(values, "reloader.namespaces") is not MISSING:  # namespaces of this test's own
        values = nested("reloader.namespaces", [f"{ns}-a", f"{ns}-b"], values)
    out = await asyncio.to_thread(
        subprocess.run,
        [str(helm()), "template", "rel", str(CHART), "--namespace", ns, "--kube-version", "1.36.3",
         "-f", str(IMAGE_VALUES), "-f", str(V2_VALUES), "-f", "-"],
        input=yaml.safe_dump(values), capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    checked = [d for d in docs if d["kind"] in KINDS]  # the monitors and VPA: no CRDs here
    namespaces = {ns} | {
        d["metadata"]["namespace"] for d in checked if d["metadata"].get("namespace")
    }
    for n in sorted(namespaces):
        await client.create(
            resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}}
        )
    try:
        assert {d["kind"] for d in checked} >= {
            "Deployment",
            "NetworkPolicy",
            "PodDisruptionBudget",
        }
        for doc in checked:
            await client.patch(
                KINDS[doc["kind"]], doc["metadata"]["name"], doc, namespace=doc["metadata"].get("namespace"),
                patch_type=PatchType.APPLY, field_manager="kube-reloader-chart-test", force=True, dry_run=True,
            )  # fmt: skip
    finally:
        for n in namespaces:
            await client.delete(resources.NAMESPACES, n)


def test_key_level_and_tls_values_render_their_flags_and_are_off_by_default() -> None:
    def args(values: dict[str, Any]) -> list[str]:
        docs = render(values)
        deployment = next(d for d in docs if d["kind"] == "Deployment")
        return list(deployment["spec"]["template"]["spec"]["containers"][0]["args"])

    on = args({"reloader": {"reloadScope": "keys", "reloadTlsSecrets": True}})
    assert "--reload-scope=keys" in on
    assert "--reload-tls-secrets=true" in on
    off = args({})
    assert not [a for a in off if a.startswith(("--reload-scope", "--reload-tls-secrets"))]
