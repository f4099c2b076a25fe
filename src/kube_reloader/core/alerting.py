"""Alert and webhook payloads, byte for byte as Reloader v1 sends them (compat-spec §6.4, §7.1),
and Reloader v2's structured raw alert (`--alert-structured`, v2-spec §11.2).

Formatting only: the HTTP sending lives in `kube_reloader.edges.alerts`.
"""

from __future__ import annotations

import datetime as dt

from kube_reloader.core import gojson
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.pausing import format_zoned_time
from kube_reloader.core.records import record

WEBHOOK_BODY = b'{"webhook":"update successful"}'


def webhook_body_v2(
    *,
    rtype: str,
    namespace: str,
    name: str,
    hash: str,
    timestamp: str,
    workloads: list[tuple[str, str, str]],
) -> bytes:
    """Reloader v2's webhook-mode body (its field names and order): the resource, its hash
    and the (kind, name, namespace) of each workload it would reload. `rtype` is v1's type
    token (`CONFIGMAP`); v2 writes it lower-case, in both `kind` and `resourceType`."""
    kind = rtype.lower()
    doc = {
        "kind": kind,
        "namespace": namespace,
        "resourceName": name,
        "resourceType": kind,
        "hash": hash,
        "timestamp": timestamp,
        "workloads": [{"kind": k, "name": n, "namespace": ns} for k, n, ns in workloads],
    }
    return gojson.marshal(doc).encode()


@record
class Payload:
    body: bytes
    content_type: str
    #: the lowest status code counted as a failure (teams/gchat: anything but 200)
    ok_only_200: bool = False


def message(
    *,
    resource: str,
    rtype: str,
    namespace: str,
    workload: str,
    kind: str,
    additional_info: str = "",
) -> str:
    text = (
        f"Reloader detected changes in *{resource}* of type *{rtype}* in namespace *{namespace}*. "
        f"Hence reloaded *{workload}* of type *{kind}* in namespace *{namespace}*"
    )
    info = additional_info.strip()
    return f"{info} : {text}" if info else text


def _json(obj: object) -> bytes:
    # gorequest re-marshals through a map: keys come out sorted, compact separators
    return gojson.marshal(obj, sort_keys=True).encode()


def structured(
    *,
    workload_kind: str,
    workload: str,
    workload_namespace: str,
    resource_kind: str,
    resource: str,
    resource_namespace: str,
    when: dt.datetime,
    additional_info: str = "",
) -> Payload:
    """Reloader v2's raw sink with `--alert-structured`: one JSON object per reloaded workload
    (`resource_kind` as `ConfigMap`, `Secret`, `SecretProviderClass`; `when` in the local time
    zone, RFC 3339 to the second; `additional` left out when empty)."""
    body: dict[str, str] = {
        "event": "reload",
        "workloadKind": workload_kind,
        "workloadName": workload,
        "workloadNamespace": workload_namespace,
        "resourceKind": resource_kind,
        "resourceName": resource,
        "resourceNamespace": resource_namespace,
        "timestamp": format_zoned_time(when),
    }
    if additional_info:
        body["additional"] = additional_info
    return Payload(gojson.marshal(body).encode(), "application/json")


def structured_notice(text: str, *, when: dt.datetime, additional_info: str = "") -> Payload:
    """Ours, for the structured raw sink: a free-form notice (a failed rollout) as
    `{"event":"notice","message":...}`, so that every body on that sink is JSON."""
    body = {"event": "notice", "message": text, "timestamp": format_zoned_time(when)}
    if additional_info:
        body["additional"] = additional_info
    return Payload(gojson.marshal(body).encode(), "application/json")


def resource_kind(rtype: str) -> str:
    """`CONFIGMAP` -> `ConfigMap` (v2's ResourceKind); an unknown type stays as it is."""
    try:
        return ResourceType(rtype.upper()).kind
    except ValueError:
        return rtype


def is_raw(sink: str) -> bool:
    """Every `ALERT_SINK` / `--alert-sink` but slack, teams and gchat is the raw sink."""
    return sink.strip().lower() not in ("slack", "teams", "gchat")


def payload(sink: str, text: str) -> Payload:
    """The body for `ALERT_SINK` (trimmed, lower-cased): slack, teams, gchat, else raw text."""
    sink = sink.strip().lower()
    if sink == "slack":
        return Payload(
            _json({"attachments": [{"author_name": "Reloader", "color": "good", "text": text}]}),
            "application/json",
        )
    if sink in ("teams", "gchat"):
        return Payload(_json({"text": text}), "application/json", ok_only_200=True)
    return Payload(text.replace("*", "").encode(), "text/plain")
