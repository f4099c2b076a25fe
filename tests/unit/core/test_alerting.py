"""Alert and webhook payloads, byte for byte as Reloader v1 (compat-spec §6.4, §7.1)."""

from __future__ import annotations

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
