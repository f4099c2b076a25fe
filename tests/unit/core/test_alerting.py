"""Alert and webhook payloads, byte for byte as Reloader v1 (compat-spec §6.4, §7.1), and
Reloader v2's structured raw alert (v2-spec §11.2)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kube_reloader.core import alerting

MSG = "Reloader detected changes in *cm* of type *CONFIGMAP* in namespace *ns*. Hence reloaded *web* of type *Deployment* in namespace *ns*"


def test_message_text_and_additional_info_prefix() -> None:
    kw = {
        "resource": "cm",
        "rtype": "CONFIGMAP",
        "namespace": "ns",
        "workload": "web",
        "kind": "Deployment",
    }
    assert alerting.message(**kw) == MSG
    assert alerting.message(**kw, additional_info="  cluster-a ") == f"cluster-a : {MSG}"


@pytest.mark.parametrize(
    ("sink", "body", "ctype", "strict"),
    [
        ("slack", '{"attachments":[{"author_name":"Reloader","color":"good","text":"' + MSG + '"}]}', "application/json", False),
        (" Slack ", '{"attachments":[{"author_name":"Reloader","color":"good","text":"' + MSG + '"}]}', "application/json", False),
        ("teams", '{"text":"' + MSG + '"}', "application/json", True),
        ("gchat", '{"text":"' + MSG + '"}', "application/json", True),
        ("webhook", MSG.replace("*", ""), "text/plain", False),
        ("", MSG.replace("*", ""), "text/plain", False),
    ],
)  # fmt: skip
def test_sink_payloads(sink: str, body: str, ctype: str, strict: bool) -> None:
    p = alerting.payload(sink, MSG)
    assert (p.body.decode(), p.content_type, p.ok_only_200) == (body, ctype, strict)


def test_json_escapes_html_characters_like_go() -> None:
    assert alerting.payload("teams", "a<b>&c").body == b'{"text":"a\\u003cb\\u003e\\u0026c"}'


def test_webhook_body() -> None:
    assert alerting.WEBHOOK_BODY == b'{"webhook":"update successful"}'


# ---------------------------------------------------------------------- v2 --alert-structured

AT = dt.datetime(2026, 1, 2, 3, 4, 5, 999, tzinfo=dt.UTC)
RAW_V2 = {
    "workload_kind": "Deployment", "workload": "web", "workload_namespace": "shop",
    "resource_kind": "ConfigMap", "resource": "app-config", "resource_namespace": "shop",
}  # fmt: skip


@pytest.mark.parametrize(("extra", "body"), [
    ({"when": AT},
     b'{"event":"reload","workloadKind":"Deployment","workloadName":"web",'
     b'"workloadNamespace":"shop","resourceKind":"ConfigMap","resourceName":"app-config",'
     b'"resourceNamespace":"shop","timestamp":"2026-01-02T03:04:05Z"}'),
    ({"when": AT.astimezone(dt.timezone(dt.timedelta(hours=1))), "additional_info": "prod <eu>"},
     b'{"event":"reload","workloadKind":"Deployment","workloadName":"web",'
     b'"workloadNamespace":"shop","resourceKind":"ConfigMap","resourceName":"app-config",'
     b'"resourceNamespace":"shop","timestamp":"2026-01-02T04:04:05+01:00",'
     b'"additional":"prod \\u003ceu\\u003e"}'),
])  # fmt: skip
def test_the_structured_raw_alert_is_reloader_v2s_json_byte_for_byte(
    extra: dict[str, Any], body: bytes
) -> None:
    p = alerting.structured(**RAW_V2, **extra)
    assert (p.body, p.content_type) == (body, "application/json")


@pytest.mark.parametrize(("rtype", "kind"), [
    ("CONFIGMAP", "ConfigMap"), ("SECRET", "Secret"),
    ("SECRETPROVIDERCLASS", "SecretProviderClass"), ("configmap", "ConfigMap"), ("Pod", "Pod"),
])  # fmt: skip
def test_the_resource_kind_is_v2s_kind_name(rtype: str, kind: str) -> None:
    assert alerting.resource_kind(rtype) == kind


@pytest.mark.parametrize(("sink", "raw"), [
    ("", True), ("raw", True), ("webhook", True), ("slack", False), (" Teams ", False),
    ("gchat", False),
])  # fmt: skip
def test_every_sink_but_slack_teams_and_gchat_is_raw(sink: str, raw: bool) -> None:
    assert alerting.is_raw(sink) is raw


def test_a_structured_notice_is_json_too() -> None:
    p = alerting.structured_notice("rollout failed", when=AT, additional_info="prod")
    assert p.body == (b'{"event":"notice","message":"rollout failed",'
                      b'"timestamp":"2026-01-02T03:04:05Z","additional":"prod"}')  # fmt: skip


def test_reloader_v2s_webhook_body_is_reproduced_byte_for_byte() -> None:
    body = alerting.webhook_body_v2(
        rtype="SECRET", namespace="shop", name="db<1>", hash="abc",
        timestamp="2026-12-01T20:25:44Z", workloads=[("Deployment", "web", "shop")],
    )  # fmt: skip
    assert body == (
        b'{"kind":"secret","namespace":"shop","resourceName":"db\\u003c1\\u003e",'
        b'"resourceType":"secret","hash":"abc","timestamp":"2026-12-01T20:25:44Z",'
        b'"workloads":[{"kind":"Deployment","name":"web","namespace":"shop"}]}'
    )
