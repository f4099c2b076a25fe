"""The TLS scenarios' objects (test_tls_cases.py): the servers' workloads, the webhook's
registration, a namespace the webhook guards, and a reverting operator."""

from __future__ import annotations

import base64
import contextlib
import secrets
from collections.abc import AsyncIterator
from typing import Any

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from tests.node.nodeharness import PODINFO_VOLUME, on_real_node
from tests.node.tlsharness import NATS_IMAGE, WEBHOOK_IMAGE
from tests.waiting import eventually, exists

WEBHOOKS = resources.Resource(
    "admissionregistration.k8s.io", "v1", "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration", namespaced=False,
)  # fmt: skip
KIND_RESOURCE = {"Deployment": resources.DEPLOYMENTS, "StatefulSet": resources.STATEFULSETS,
                 "DaemonSet": resources.DAEMONSETS}  # fmt: skip
NATS_CONF = """port: 4222
http_port: 8222
tls {
  cert_file: "/tls/tls.crt"
  key_file: "/tls/tls.key"
  timeout: 5
}
"""
NOBODY = {"runAsUser": 65534, "runAsGroup": 65534}


def workload(kind: str, name: str, spec: dict[str, Any], *, replicas: int = 1,
             annotations: dict[str, str] | None = None,
             template_annotations: dict[str, str] | None = None) -> dict[str, Any]:  # fmt: skip
    """A Deployment, StatefulSet or DaemonSet of pods labelled app=`name` on the real node."""
    body: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}, "annotations": template_annotations or {}},
            "spec": on_real_node({"terminationGracePeriodSeconds": 30,
                                  "automountServiceAccountToken": False, **spec}),
        },
    }  # fmt: skip
    if kind != "DaemonSet":
        body["replicas"] = replicas
    if kind == "StatefulSet":
        body |= {"serviceName": name, "podManagementPolicy": "Parallel"}
    return {"apiVersion": "apps/v1", "kind": kind,
            "metadata": {"name": name, "annotations": annotations or {}}, "spec": body}  # fmt: skip


def _with_agent(spec: dict[str, Any], agent: dict[str, Any] | None) -> dict[str, Any]:
    if agent is None:
        return spec
    return {**spec, "initContainers": [agent], "volumes": [*spec["volumes"], PODINFO_VOLUME]}


def tls_server(secret: str, *, agent: dict[str, Any] | None = None) -> dict[str, Any]:
    """A pod of the webhook server that reads Secret `secret`'s certificate once, at start."""
    # out of the ready set within about 2 s of SIGTERM, well inside its 6 s drain
    probe = {"httpGet": {"path": "/healthz", "port": 8443, "scheme": "HTTPS"},
             "periodSeconds": 1, "timeoutSeconds": 2, "failureThreshold": 2}  # fmt: skip
    container = {
        "name": "server", "image": WEBHOOK_IMAGE, "imagePullPolicy": "Never",
        "env": [{"name": "LISTEN", "value": "0.0.0.0:8443"}, {"name": "DRAIN", "value": "6"}],
        "readinessProbe": probe, "securityContext": NOBODY,
        "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
    }  # fmt: skip
    spec = {
        "containers": [container],
        "volumes": [{"name": "tls", "secret": {"secretName": secret}}],
    }
    return _with_agent(spec, agent)


def nats_statefulset(name: str, *, agent: dict[str, Any] | None = None,
                     annotations: dict[str, str] | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """NATS with a TLS listener from Secret `<name>-tls` and its configuration file from
    ConfigMap `<name>-config`: the ConfigMap and the one-replica StatefulSet. With `agent`,
    the PID namespace is shared so the agent can signal it."""
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"{name}-config"},
              "data": {"nats.conf": NATS_CONF}}  # fmt: skip
    container = {
        "name": "nats", "image": NATS_IMAGE, "imagePullPolicy": "Never",
        "args": ["-c", "/etc/nats/nats.conf"], "securityContext": NOBODY,
        "readinessProbe": {"httpGet": {"path": "/healthz", "port": 8222}, "periodSeconds": 1},
        "volumeMounts": [{"name": "config", "mountPath": "/etc/nats", "readOnly": True},
                         {"name": "tls", "mountPath": "/tls", "readOnly": True}],
    }  # fmt: skip
    spec: dict[str, Any] = {
        "containers": [container],
        "volumes": [{"name": "config", "configMap": {"name": f"{name}-config"}},
                    {"name": "tls", "secret": {"secretName": f"{name}-tls"}}],
    }  # fmt: skip
    if agent is not None:
        spec = _with_agent({**spec, "shareProcessNamespace": True}, agent)
    return [config, workload("StatefulSet", name, spec, annotations=annotations)]


def webhook_configuration(namespace: str, port: int, ca: bytes, guarded: str) -> dict[str, Any]:
    """The webhook registered for pod creation in namespace `guarded`, `failurePolicy: Fail`,
    reached at the relay's port with the CA injected as cert-manager's cainjector would."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": f"tls-once-{namespace}"},
        "webhooks": [{
            "name": "tls-once.kube-reloader.local",
            "clientConfig": {"url": f"https://127.0.0.1:{port}/validate",
                             "caBundle": base64.b64encode(ca).decode()},
            "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"],
                       "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": guarded}},
            "failurePolicy": "Fail", "sideEffects": "None",
            "admissionReviewVersions": ["v1"], "timeoutSeconds": 5,
        }],
    }  # fmt: skip


async def create_all(client: Client, namespace: str, *objects: dict[str, Any]) -> None:
    for obj in objects:
        resource = (
            KIND_RESOURCE.get(obj["kind"])
            or {"ConfigMap": resources.CONFIGMAPS, "Secret": resources.SECRETS}[obj["kind"]]
        )
        await client.create(resource, obj, namespace=namespace)


@contextlib.asynccontextmanager
async def registered(client: Client, configuration: dict[str, Any]) -> AsyncIterator[None]:
    await client.create(WEBHOOKS, configuration)
    try:
        yield
    finally:
        with contextlib.suppress(errors.NotFound):
            await client.delete(WEBHOOKS, configuration["metadata"]["name"])


@contextlib.asynccontextmanager
async def guarded_namespace(client: Client) -> AsyncIterator[str]:
    """A namespace of its own, where the probe creates pods (with dryRun)."""
    name = f"t-{secrets.token_hex(4)}"
    await client.create(resources.NAMESPACES, {"apiVersion": "v1", "kind": "Namespace",
                                               "metadata": {"name": name}})  # fmt: skip

    async def default_account() -> bool:  # pods are admitted only once it exists
        return await exists(client, resources.SERVICEACCOUNTS, "default", name)

    try:
        await eventually(default_account, timeout=60, what=f"{name}'s default ServiceAccount")
        yield name
    finally:
        with contextlib.suppress(errors.NotFound):
            await client.delete(resources.NAMESPACES, name)


async def events(client: Client, namespace: str, name: str, reason: str) -> list[dict[str, Any]]:
    listed = await client.list(resources.EVENTS, namespace=namespace)
    return [e for e in listed.items
            if e.get("reason") == reason and e["involvedObject"]["name"] == name]  # fmt: skip
