"""The catch-up's rule at start (`core.catchup.due_at_start`): one table for the workloads
that record their reloads in the template and for those reloaded at the pod level (whose
rotation compares their pods with the change)."""

from __future__ import annotations

from typing import Any

import pytest

from kube_reloader.core import catchup, hashing
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.planning import Change, Config, Event, plan, workload_from_manifest

CONTENT = hashing.configmap_hash({"v": "1"})
OLDER = "0" * 40
TEMPLATE_AT = 100.0


def deployment(*, evict: bool, carried: str | None) -> dict[str, Any]:
    annotations = {"reloader.stakater.com/auto": "true"}
    if evict:
        annotations["kube-reloader.io/strategy"] = "evict"
    container: dict[str, Any] = {"name": "app", "envFrom": [{"configMapRef": {"name": "cfg"}}]}
    if carried is not None:
        container["env"] = [{"name": "STAKATER_CFG_CONFIGMAP", "value": carried}]
    return {
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "annotations": annotations},
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def due(
    *, evict: bool = False, carried: str | None = None, changed_at: float | None = 200.0
) -> tuple[bool, str]:
    w = workload_from_manifest(deployment(evict=evict, carried=carried))
    change = Change(ResourceType.CONFIGMAP, "ns", "cfg", CONTENT, Event.UPDATED)
    p = plan(change=change, workload=w, config=Config(), now=1_000)
    return catchup.due_at_start(
        plan=p,
        carried_hash=catchup.carried(p, w, Config().strategy),
        config_changed_at=changed_at,
        template_changed_at=TEMPLATE_AT,
    )


CASES = [
    # (case, arguments, due, words in the reason)
    ("template: written after it", {}, True, "after the pod template"),
    ("template: written before it", {"changed_at": 50.0}, False, "older than the pod template"),
    ("template: written in its second", {"changed_at": TEMPLATE_AT}, False, "older than"),
    ("template: no write time", {"changed_at": None}, False, "no timestamps"),
    ("template: an older hash carried", {"carried": OLDER}, True, "not watching"),
    ("template: the current hash carried", {"carried": CONTENT}, False, "already has"),
    ("evict: written after it", {"evict": True}, True, "pods older"),
    ("evict: written before it (its pods decide)", {"evict": True, "changed_at": 50.0}, True,
     "pods older"),
    ("evict: no write time", {"evict": True, "changed_at": None}, False, "no timestamps"),
]  # fmt: skip # one case per line


@pytest.mark.parametrize(("case", "args", "want", "words"), CASES, ids=[c[0] for c in CASES])
def test_the_catch_up_decides_for_template_and_pod_level_reloads_alike(
    case: str, args: dict[str, Any], want: bool, words: str
) -> None:
    got, why = due(**args)
    assert got is want, why
    assert words in why
