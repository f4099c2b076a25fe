"""Alert and webhook payloads, byte for byte as Reloader v1 sends them (compat-spec §6.4, §7.1).

Formatting only: the HTTP sending lives in `kube_reloader.alerts`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

WEBHOOK_BODY = b'{"webhook":"update successful"}'


@dataclass(frozen=True, slots=True)
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
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # Go's encoder escapes these for HTML safety
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026").encode()


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
