"""`explain`'s `due`: the controller's own rule at start (`catchup.due_at_start`), fed
with what it would be fed (the write times when known; nothing for a missing resource)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kube_reloader import cli
from kube_reloader.core import explaining, hashing, planning, scoping
from kube_reloader.core.objects import ResourceType

CM = (ResourceType.CONFIGMAP, "app-config")
ENV = "STAKATER_APP_CONFIG_CONFIGMAP"
ITEMS = hashing.configmap_items({"a": "1", "b": "2"}, {})
OBJECT_HASH = hashing.items_hash(ITEMS)
OLDER = "0" * 40


def workload(carried: str | None, *, one_key: bool = False) -> dict[str, Any]:
    """A Deployment with `reloader.stakater.com/auto`, reading app-config whole (envFrom) or
    its key `a` only, and carrying `carried` for it (None: no hash yet)."""
    if one_key:
        ref = {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "app-config", "key": "a"}}}
        container: dict[str, Any] = {"name": "app", "env": [ref]}
    else:
        container = {"name": "app", "envFrom": [{"configMapRef": {"name": "app-config"}}]}
    if carried is not None:
        container.setdefault("env", []).append({"name": ENV, "value": carried})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "web",
            "namespace": "prod",
            "annotations": {"reloader.stakater.com/auto": "true"},
        },
        "spec": {"template": {"spec": {"containers": [container]}}},
    }


def verdict(
    manifest: dict[str, Any],
    found: explaining.Found | None,
    *,
    scope: scoping.Scope = scoping.Scope.OBJECT,
    template_changed_at: float | None = None,
    reconcile_on_start: bool = True,
) -> explaining.ResourceVerdict:
    e = explaining.explain(
        workload=manifest,
        resources={CM: found},
        config=planning.Config(scope=scope),
        now=1_000.0,
        only=CM,
        template_changed_at=template_changed_at,
        reconcile_on_start=reconcile_on_start,
    )
    (v,) = e.verdicts
    return v


def current(changed_at: float | None = None, *, digests: bool = True) -> explaining.Found:
    packed = scoping.digests(ITEMS) if digests else None
    return explaining.Found(OBJECT_HASH, {}, packed, False, changed_at)


def test_a_template_carrying_the_current_hash_is_up_to_date() -> None:
    v = verdict(workload(OBJECT_HASH), current())
    assert (v.outcome, v.due) == ("up_to_date", False)


def test_a_template_carrying_an_older_hash_is_due() -> None:
    v = verdict(workload(OLDER), current())
    assert (v.outcome, v.due) == ("reload", True)
    assert "changed while kube-reloader was not watching" in v.at_start


def test_a_template_carrying_no_hash_waits_for_the_next_change_when_no_times_are_known() -> None:
    v = verdict(workload(None), current())
    assert (v.outcome, v.due) == ("reload", False)
    assert v.at_start.startswith(
        "at controller start it reloads now only if ConfigMap prod/app-config was written "
        "after the pod template"
    )


def test_keys_scope_with_the_current_object_hash_carried_is_not_due() -> None:
    # written in object scope for this very content: the controller's catch-up writes nothing
    v = verdict(workload(OBJECT_HASH, one_key=True), current(), scope=scoping.Scope.KEYS)
    assert v.outcome == "reload"
    assert v.due is False
    assert "already carries this content" in v.at_start


def test_a_missing_resource_is_never_due() -> None:
    v = verdict(workload(OLDER), None)
    assert v.due is False
    assert v.current_hash is None
    assert "does not exist" in v.at_start


def test_keys_scope_without_per_key_digests_is_left_alone_as_the_controller_does() -> None:
    found = current(digests=False)
    v = verdict(workload(OLDER, one_key=True), found, scope=scoping.Scope.KEYS)
    assert v.outcome == "reload"
    assert v.due is False
    assert "left alone" in v.at_start


def test_no_hash_and_content_written_after_the_template_is_due_at_start() -> None:
    v = verdict(workload(None), current(changed_at=200.0), template_changed_at=100.0)
    assert v.due is True
    assert "written after the pod template" in v.at_start


def test_no_hash_and_content_older_than_the_template_is_not_due() -> None:
    v = verdict(workload(None), current(changed_at=50.0), template_changed_at=100.0)
    assert v.due is False
    assert "older than the pod template" in v.at_start


def test_reconcile_on_start_false_makes_nothing_due() -> None:
    v = verdict(workload(OLDER), current(), reconcile_on_start=False)
    assert (v.stale, v.due) == (True, False)
    assert "--reconcile-on-start=false" in v.at_start


MANAGED = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  managedFields:
    - manager: kubectl
      operation: Update
      time: "2026-01-02T00:00:00Z"
      fieldsV1: {"f:data": {"f:a": {}}}
data: {a: "1"}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations: {reloader.stakater.com/auto: "true"}
  managedFields:
    - manager: helm
      operation: Update
      time: "2026-01-01T00:00:00Z"
      fieldsV1: {"f:spec": {"f:template": {}}}
spec:
  template:
    spec:
      containers:
        - name: app
          envFrom: [{configMapRef: {name: app-config}}]
"""


def test_explain_reads_the_write_times_the_controller_reads_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "live.yaml"
    path.write_text(MANAGED)
    assert cli.main(["explain", "deploy/web", "-f", str(path), "--format", "json"]) == 0
    (v,) = json.loads(capsys.readouterr().out)["verdicts"]
    assert (v["due"], v["carried_hash"]) == (True, None)
    assert cli.main(["explain", "deploy/web", "-f", str(path), "--reconcile-on-start=false"]) == 0
    out = capsys.readouterr().out
    assert "CONFIGMAP app-config: reloads on the next change; not due at controller start" in out


def test_explain_refuses_keyed_hashes_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).parent.parent / "data" / "explain-statefulset.yaml"
    code = cli.main(["explain", "sts/db", "-f", str(path), "--hash-algorithm=hmac-sha256"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1
    assert "explain cannot compute keyed hashes (--hash-algorithm=hmac-sha256)" in err


def test_an_evicting_workload_is_due_as_the_controller_decides_by_its_pods() -> None:
    manifest = workload(None)
    manifest["metadata"]["annotations"]["kube-reloader.io/strategy"] = "evict"
    # written before the template: its pods, not the template's time, decide (the
    # controller's rotation replaces those older than the write, if any)
    v = verdict(manifest, current(changed_at=50.0), template_changed_at=100.0)
    assert (v.outcome, v.due) == ("reload", True)
    assert "pods older than its last write are replaced" in v.at_start
    # the same workload reloaded by a template write: by the times, as before
    v = verdict(workload(None), current(changed_at=50.0), template_changed_at=100.0)
    assert v.due is False
