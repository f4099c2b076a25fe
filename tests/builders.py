"""Factories for the Kubernetes objects tests create; each returns a plain manifest dict."""

from __future__ import annotations

from typing import Any

Manifest = dict[str, Any]
#: the workload annotation that reloads on every ConfigMap and Secret the pods reference
AUTO = {"reloader.stakater.com/auto": "true"}


def _meta(name: str, namespace: str | None, **extra: Any) -> Manifest:
    meta: Manifest = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    for key in ("labels", "annotations"):
        if extra.get(key):
            meta[key] = dict(extra[key])
    return meta


def configmap(
    name: str,
    namespace: str | None = None,
    data: dict[str, str] | None = None,
    binary_data: dict[str, str] | None = None,
    **meta: Any,
) -> Manifest:
    obj: Manifest = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(name, namespace, **meta),
        "data": dict(data or {}),
    }
    if binary_data:
        obj["binaryData"] = dict(binary_data)
    return obj


def secret(
    name: str,
    namespace: str | None = None,
    string_data: dict[str, str] | None = None,
    type: str = "Opaque",
    **meta: Any,
) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": type,
        "metadata": _meta(name, namespace, **meta),
        "stringData": dict(string_data or {}),
    }


def container(
    name: str = "app",
    *,
    env_from_configmaps: tuple[str, ...] = (),
    env_from_secrets: tuple[str, ...] = (),
    volume_mounts: tuple[str, ...] = (),
) -> Manifest:
    c: Manifest = {"name": name, "image": "registry.local/app:1"}
    env_from = [{"configMapRef": {"name": n}} for n in env_from_configmaps]
    env_from += [{"secretRef": {"name": n}} for n in env_from_secrets]
    if env_from:
        c["envFrom"] = env_from
    if volume_mounts:
        c["volumeMounts"] = [{"name": v, "mountPath": f"/etc/{v}"} for v in volume_mounts]
    return c


def pod_template(
    labels: dict[str, str],
    *,
    containers: list[Manifest] | None = None,
    volumes: list[Manifest] | None = None,
    annotations: dict[str, str] | None = None,
    restart_policy: str | None = None,
) -> Manifest:
    meta: Manifest = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    spec: Manifest = {"containers": containers or [container()]}
    if volumes:
        spec["volumes"] = volumes
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    return {"metadata": meta, "spec": spec}


def deployment(
    name: str, namespace: str | None = None, *, replicas: int = 1, template: Manifest | None = None,
    **meta: Any,
) -> Manifest:  # fmt: skip
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, namespace, **meta),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": template or pod_template(labels),
        },
    }


def auto_deployment(
    name: str, namespace: str | None = None, *, configmaps: tuple[str, ...] = (),
    secrets: tuple[str, ...] = (), replicas: int = 1, **meta: Any,
) -> Manifest:  # fmt: skip
    """Deployment `name` (pods labelled `app: name`) whose one container `app` reads
    `configmaps` and `secrets` through envFrom; annotated with AUTO unless `annotations` is
    given."""
    template = pod_template(
        {"app": name},
        containers=[container("app", env_from_configmaps=configmaps, env_from_secrets=secrets)],
    )
    meta.setdefault("annotations", AUTO)
    return deployment(name, namespace, replicas=replicas, template=template, **meta)


def statefulset(
    name: str, namespace: str | None = None, *, replicas: int = 1, template: Manifest | None = None,
    **meta: Any,
) -> Manifest:  # fmt: skip
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": _meta(name, namespace, **meta),
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": labels},
            "template": template or pod_template(labels),
        },
    }


def daemonset(
    name: str, namespace: str | None = None, *, template: Manifest | None = None, **meta: Any
) -> Manifest:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": _meta(name, namespace, **meta),
        "spec": {"selector": {"matchLabels": labels}, "template": template or pod_template(labels)},
    }


def job(
    name: str, namespace: str | None = None, *, template: Manifest | None = None, **meta: Any
) -> Manifest:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, namespace, **meta),
        "spec": {
            "backoffLimit": 0,
            "template": template or pod_template({"job": name}, restart_policy="Never"),
        },
    }


def cronjob(
    name: str, namespace: str | None = None, *, schedule: str = "0 0 1 1 *",
    template: Manifest | None = None, **meta: Any,
) -> Manifest:  # fmt: skip
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(name, namespace, **meta),
        "spec": {
            "schedule": schedule,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 0,
                    "template": template or pod_template({"cronjob": name}, restart_policy="Never"),
                }
            },
        },
    }


def never_ready_if_env(workload: Manifest, value: str) -> Manifest:
    """Annotate `workload`'s pod template (or `workload` itself when it is a pod template) so
    the dev cluster never makes its pods Ready while one of their containers has an env
    entry whose value is `value` (the gate is kwok's `pod-ready` stage, devcluster/stages.py).
    Changes `workload` in place and returns it."""
    template = workload["spec"]["template"] if "template" in workload.get("spec", {}) else workload
    meta = template.setdefault("metadata", {})
    meta.setdefault("annotations", {})["test.kube-reloader.io/never-ready-if-env"] = value
    return workload
