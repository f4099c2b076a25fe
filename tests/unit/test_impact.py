"""`kube-reloader impact`: what one content change would do to every workload of its namespace,
as `core.impacting.preview` decides it and as the command line prints it from files."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from kube_reloader import cli
from kube_reloader.cli import impact as command
from kube_reloader.core import evicting, hashing, impacting, planning
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change

DATA = Path(__file__).parent.parent / "data" / "impact" / "prod.yaml"
#: Tuesday 2026-12-01 10:00 UTC
NOW = dt.datetime(2026, 12, 1, 10, 0, tzinfo=dt.UTC).timestamp()
CHANGE = Change(ResourceType.CONFIGMAP, "ns", "cfg", hashing.configmap_hash({"k": "v2"}))
AUTO = {"reloader.stakater.com/auto": "true"}
OPEN, CLOSED = "0 9 * * * 2h", "0 3 * * * 1h"  # 09:00-11:00 and 03:00-04:00 UTC
RUNNING = planning.rollouts.Status(generation=2, observed_generation=2, replicas=1)


def wl(kind: str, name: str, *, refs: bool = True, active: int = 0,
       status: planning.rollouts.Status | None = None, **annotations: str) -> planning.Workload:  # fmt: skip
    template = {"spec": {"containers": [
        {"name": "app", "envFrom": [{"configMapRef": {"name": "cfg" if refs else "other"}}]}]}}  # fmt: skip
    spec = {"jobTemplate": {"spec": {"template": template}}} if kind == "CronJob" else {
        "template": template}  # fmt: skip
    meta = {"name": name, "namespace": "ns", "annotations": {**AUTO, **annotations}}
    w = planning.workload_from_manifest({"kind": kind, "metadata": meta, "spec": spec})
    return dataclasses.replace(w, active=active, status=status)


def after(*names: str) -> dict[str, str]:
    return {"kube-reloader.io/reload-after": ",".join(names)}


def window(value: str) -> dict[str, str]:
    return {"kube-reloader.io/reload-window": value}


D, J, S = "Deployment", "Job", "StatefulSet"
ELSEWHERE = ObjectKey(D, "other", "busy")
#: (workloads, preview keywords, what each workload is told: now, a hold, "slot N", or "no")
CASES: dict[str, tuple[list[planning.Workload], dict[str, Any], dict[str, str]]] = {
    "the slots fill in key order, the rest wait in line": (
        [wl(D, n) for n in "abcd"], {"state": impacting.State(cap=3)},
        {"a": "now", "b": "now", "c": "slot 1", "d": "slot 2"}),
    "one namespace never takes the last slot": (
        [wl(D, n) for n in "abc"], {"state": impacting.State(cap=2)},
        {"a": "now", "b": "slot 1", "c": "slot 2"}),
    "rollouts in flight elsewhere count against the cap": (
        [wl(D, "a"), wl(D, "b")], {"state": impacting.State(cap=2, in_flight=frozenset({ELSEWHERE}))},
        {"a": "now", "b": "slot 1"}),
    "a workload in flight itself does not wait for its own slot": (
        [wl(D, "a")], {"state": impacting.State(cap=1, in_flight=frozenset({ObjectKey(D, "ns", "a")}))},
        {"a": "now"}),
    "jobs need a free slot but keep none": (
        [wl(J, "j"), wl(S, "s")], {"state": impacting.State(cap=1)}, {"j": "now", "s": "now"}),
    "a job waits for a slot a deployment took": (
        [wl(D, "a"), wl(J, "j")], {"state": impacting.State(cap=1)}, {"a": "now", "j": "slot 1"}),
    "evict takes a slot like a template write": (
        [wl(D, "a", **{"kube-reloader.io/strategy": "evict"}), wl(D, "b")],
        {"state": impacting.State(cap=1)}, {"a": "now", "b": "slot 1"}),
    "no cap: everything is written": (
        [wl(D, n) for n in "abcdef"], {}, dict.fromkeys("abcdef", "now")),
    "a closed window holds, an open one lets through": (
        [wl(D, "a", **window(CLOSED)), wl(D, "b", **window(OPEN))], {},
        {"a": "window", "b": "now"}),
    "the namespace's window applies to workloads without one": (
        [wl(D, "a"), wl(D, "b", **window(OPEN))],
        {"namespace_annotations": window(CLOSED)}, {"a": "window", "b": "now"}),
    "an urgent change bypasses the window": (
        [wl(D, "a", **window(CLOSED))], {"urgent": True}, {"a": "now"}),
    "an urgent change does not bypass a freeze": (
        [wl(D, "a")], {"urgent": True, "state": impacting.State(freeze=True)}, {"a": "frozen"}),
    "--freeze holds everything": (
        [wl(D, "a"), wl(J, "j")], {"state": impacting.State(freeze=True)},
        {"a": "frozen", "j": "frozen"}),
    "a frozen namespace holds everything": (
        [wl(D, "a")], {"namespace_annotations": {"kube-reloader.io/freeze": "true"}},
        {"a": "frozen"}),
    "the breaker holds the content it halted": (
        [wl(D, "a")], {"state": impacting.State(halted={(CHANGE.rtype, "ns", "cfg"): CHANGE.hash})},
        {"a": "halted"}),
    "a halt of older content is lifted by this one": (
        [wl(D, "a")], {"state": impacting.State(halted={(CHANGE.rtype, "ns", "cfg"): "old"})},
        {"a": "now"}),
    "a running job waits with after-completion, is recreated without": (
        [wl(J, "a", active=1, **{"kube-reloader.io/job-policy": "after-completion"}),
         wl(J, "b", active=1), wl(J, "c", **{"kube-reloader.io/job-policy": "after-completion"})],
        {}, {"a": "job-running", "b": "now", "c": "now"}),
    "a job with job-policy never is not reloaded": (
        [wl(J, "a", **{"kube-reloader.io/job-policy": "never"})], {}, {"a": "no"}),
    "a follower waits for a workload that reloads too": (
        [wl(D, "a", **after("deployment/b")), wl(D, "b")], {}, {"a": "order", "b": "now"}),
    "a follower waits for a rollout still progressing": (
        [wl(D, "a", **after("statefulset/s")), wl(S, "s", refs=False, status=RUNNING)], {},
        {"a": "order", "s": "no"}),
    "a follower of a workload at rest, or missing, goes now": (
        [wl(D, "a", **after("statefulset/s", "deployment/gone")), wl(S, "s", refs=False)], {},
        {"a": "now", "s": "no"}),
    "a follower of a job is written once the job is": (
        [wl(D, "a", **after("job/j")), wl(J, "j")], {}, {"a": "now", "j": "now"}),
    "a follower of a job waits with the job": (
        [wl(D, "a", **after("job/j")), wl(J, "j", **window(CLOSED))], {},
        {"a": "order", "j": "window"}),
    "a follower of a job goes to the end of the line": (
        [wl(D, "a", **after("job/j")), wl(D, "b"), wl(J, "j"), wl(S, "s")],
        {"state": impacting.State(cap=3)}, {"a": "slot 1", "b": "now", "j": "now", "s": "now"}),
    "workloads that follow each other ignore that order": (
        [wl(D, "a", **after("deployment/b")), wl(D, "b", **after("deployment/c")),
         wl(D, "c", **after("deployment/a"))], {}, {"a": "now", "b": "now", "c": "now"}),
    "the rules apply in order: a freeze before a window before an order": (
        [wl(D, "a", **window(CLOSED), **after("deployment/b")), wl(D, "b")],
        {"state": impacting.State(freeze=True)}, {"a": "frozen", "b": "frozen"}),
    "a workload that does not use the resource is not reloaded": (
        [wl(D, "a", refs=False), wl(D, "b")], {}, {"a": "no", "b": "now"}),
    "an unreadable strategy is not reloaded": (
        [wl(D, "a", **{"kube-reloader.io/strategy": "Evict"}), wl(J, "j", **{"kube-reloader.io/strategy": "evict"})],
        {}, {"a": "no", "j": "no"}),
    "other namespaces are not previewed": (
        [wl(D, "a"), dataclasses.replace(wl(D, "b"), namespace="other")], {}, {"a": "now"}),
}  # fmt: skip


def told(row: impacting.Row) -> str:
    v = row.verdict
    if v is None:
        return "no"
    if v.write:
        return "now"
    return f"slot {v.position}" if v.hold is impacting.Hold.SLOTS else str(v.hold)


@pytest.mark.parametrize("case", list(CASES))
def test_the_preview_says_what_each_workload_would_do(case: str) -> None:
    workloads, kw, expected = CASES[case]
    kw = dict(kw)
    change = dataclasses.replace(CHANGE, annotations={"kube-reloader.io/reload-urgent": "true"}
                                 if kw.pop("urgent", False) else {})  # fmt: skip
    rows = impacting.preview(change, workloads, config=planning.Config(), now=NOW, **kw)
    assert {r.workload.name: told(r) for r in rows} == expected
    assert [r.workload for r in rows] == sorted(r.workload for r in rows)


def test_a_closed_window_says_when_it_opens() -> None:
    (row,) = impacting.preview(CHANGE, [wl(D, "a", **window(CLOSED))], config=planning.Config(),
                            now=NOW)  # fmt: skip
    assert row.verdict is not None
    assert row.verdict.until == dt.datetime(2026, 12, 2, 3, 0, tzinfo=dt.UTC).timestamp()
    assert row.window == f"{CLOSED} (workload)"


def test_a_cycle_is_said_in_a_warning() -> None:
    rows = impacting.preview(CHANGE, [wl(D, "a", **after("deployment/b")),
                                   wl(D, "b", **after("deployment/a"))],
                          config=planning.Config(), now=NOW)  # fmt: skip
    assert all("a cycle" in r.warnings[0] for r in rows)
    assert [r.after for r in rows] == [("Deployment/b",), ("Deployment/a",)]


@pytest.mark.parametrize(("default", "kind", "strategy"), [
    (evicting.PodStrategy.PATCH, D, "env-vars"),
    (evicting.PodStrategy.EVICT, D, "evict"),
    (evicting.PodStrategy.EVICT, J, "env-vars"),  # a Job's pods cannot be replaced
    (evicting.PodStrategy.EVICT, "Rollout", "env-vars"),  # nor an Argo Rollout's
])  # fmt: skip
def test_the_strategy_follows_the_default_where_pods_can_be_evicted(
    default: evicting.PodStrategy, kind: str, strategy: str
) -> None:
    config = planning.Config(default_strategy=default)
    (row,) = impacting.preview(CHANGE, [wl(kind, "a")], config=config, now=NOW)
    assert row.strategy == strategy


def test_evict_is_not_previewed_for_a_csi_rotation() -> None:
    w = wl(D, "a", **{"kube-reloader.io/strategy": "evict"})
    tmpl = planning.pod_template_from_manifest({"spec": {
        "containers": [{"name": "app", "volumeMounts": [{"name": "v"}]}],
        "volumes": [{"name": "v", "csi": {"volumeAttributes": {"secretProviderClass": "vault"}}}]}})  # fmt: skip
    change = Change(ResourceType.SECRETPROVIDERCLASS, "ns", "vault", "h")
    (row,) = impacting.preview(change, [dataclasses.replace(w, template=tmpl)],
                            config=planning.Config(), now=NOW)  # fmt: skip
    assert (row.outcome, row.verdict) == ("reload", None)
    assert "does not follow Secrets Store CSI rotations" in row.warnings[0]


# -- the command line, from files ----------------------------------------------------------


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(["impact", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_text_output_has_one_line_per_workload_and_a_summary(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "configmap/app-config", "-n", "prod", "-f", str(DATA))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("ConfigMap prod/app-config: one content change (hash ")
    assert [line.split()[0] for line in lines[1:-1]] == [
        "CronJob/report", "DaemonSet/agent", "Deployment/api", "Deployment/web", "Job/migrate",
        "StatefulSet/worker",
    ]  # fmt: skip
    assert (
        "Deployment/api      reload  env-vars  held: window (opens never; '0 0 31 2 * 1m' of the workload)"
        in lines
    )
    assert "Deployment/web      reload  env-vars  now" in lines
    assert "StatefulSet/worker  reload  env-vars  waits: order (after Deployment/web)" in lines
    assert (
        "CronJob/report      no: reloader.stakater.com/auto='true' on the workload metadata, but the CronJob is suspended"
        in lines
    )
    assert lines[-1] == "summary: 2 reload now, 2 held (order 1, window 1), 2 not reloaded"


def test_json_output_has_the_rows_with_their_verdicts(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "cm/prod/app-config", "-f", str(DATA), "--format", "json",
                       "--max-concurrent-rollouts", "1", "--reload-strategy", "annotations")  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["resource"] == {"kind": "ConfigMap", "namespace": "prod", "name": "app-config"}
    current = command.content_hash({"kind": "ConfigMap", "data": {"a": "1"}})
    assert doc["hash"] == command.sentinel(current) != current
    rows = {f"{r['workload']['kind']}/{r['workload']['name']}": r for r in doc["rows"]}
    assert "Deployment/elsewhere" not in rows
    web, job = rows["Deployment/web"], rows["Job/migrate"]
    assert (web["strategy"], web["verdict"]["write"], web["window"]) == (
        "annotations",
        True,
        "* * * * * 1h (namespace)",
    )
    assert (job["verdict"]["hold"], job["verdict"]["position"]) == ("slots", 1)
    assert rows["Deployment/api"]["verdict"]["until"] is None
    assert rows["StatefulSet/worker"]["after"] == ["Deployment/web"]
    assert rows["CronJob/report"]["verdict"] is None
    assert doc["summary"] == {"now": 1, "held": {"order": 1, "slots": 1, "window": 1},
                              "not_reloaded": 2}  # fmt: skip


@pytest.mark.parametrize(("argv", "needle"), [
    (["--freeze"], "Deployment/web      reload  env-vars  held: frozen"),
    (["--default-strategy", "evict"], "Deployment/web      reload  evict  now"),
    (["--auto-reload-all"], "Deployment/web      reload  env-vars  now"),
])  # fmt: skip
def test_the_controllers_flags_change_the_preview(
    argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "configmap/app-config", "-f", str(DATA), *argv)
    assert code == 0
    assert needle in out


def test_a_secret_provider_class_is_previewed_as_one_change_of_the_class(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "secretproviderclass/vault", "-n", "prod", "-f", str(DATA))
    assert code == 0
    assert "note: Secrets Store CSI rotations are per pod" in out
    assert "StatefulSet/worker  reload  env-vars  now" in out


def test_a_file_without_namespaces_is_read_in_the_one_asked_for(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "app.yaml"
    f.write_text(
        "kind: List\nitems:\n- {kind: Secret, metadata: {name: s, creationTimestamp: 2026-01-01T00:00:00Z}}\n"
        "- kind: Deployment\n  metadata: {name: w, annotations: {reloader.stakater.com/auto: 'true'}}\n"
        "  spec: {template: {spec: {containers: [{name: c, envFrom: [{secretRef: {name: s}}]}]}}}\n"
    )
    code, out, _ = run(capsys, "secret/s", "-n", "team", "-f", str(f))
    assert code == 0
    assert out.splitlines()[0].startswith("Secret team/s: ")
    assert "Deployment/w  reload  env-vars  now" in out


@pytest.mark.parametrize(("flags", "verdict"), [((), "no"), (("--reload-tls-secrets",), "reload")])
def test_a_tls_secrets_annotation_less_readers_are_previewed_under_the_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], verdict: str
) -> None:
    f = tmp_path / "tls.yaml"
    f.write_text(
        "kind: List\nitems:\n- {kind: Secret, type: kubernetes.io/tls, metadata: {name: cert}}\n"
        "- kind: Deployment\n  metadata: {name: nats}\n"
        "  spec: {template: {spec: {containers: [{name: c, volumeMounts: [{name: v, mountPath: /t}]}],\n"
        "    volumes: [{name: v, secret: {secretName: cert}}]}}}\n"
    )
    code, out, _ = run(capsys, "secret/cert", "-n", "team", "-f", str(f), *flags)
    assert code == 0
    assert f"Deployment/nats  {verdict}" in out, out


@pytest.mark.parametrize(("argv", "message"), [
    (["pod/x", "-f", str(DATA)], "expected KIND/NAME or KIND/NAMESPACE/NAME"),
    (["configmap/", "-f", str(DATA)], "expected KIND/NAME"),
    (["configmap/a/b/c", "-f", str(DATA)], "expected KIND/NAME"),
    (["cm/nope", "-f", str(DATA)], "no ConfigMap named 'nope'"),
    (["cm/prod/app-config", "-n", "dev", "-f", str(DATA)], "names namespace 'prod', -n says 'dev'"),
    (["cm/app-config", "-n", "dev", "-f", str(DATA)], "no ConfigMap named 'app-config' in namespace 'dev'"),
    (["cm/x", "-f", "/nonexistent/impact.yaml"], "No such file"),
])  # fmt: skip
def test_bad_input_is_one_line_and_exit_1(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    assert err.startswith("error: ")
    assert message in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("content", [
    "kind: ConfigMap\nmetadata: {name: c}\n---\n: : [\n",
    "kind: ConfigMap\nmetadata: {name: c}\n---\nkind: Deployment\nmetadata: {name: w}\nspec: [1, 2]\n",
    "kind: ConfigMap\nmetadata: {name: c}\ndata: [1]\n",
    "kind: ConfigMap\nmetadata: {name: c}\n---\nkind: Deployment\nmetadata: {name: w, annotations: [1]}\n",
])  # fmt: skip
def test_an_unreadable_file_is_one_line_never_a_traceback(
    content: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    code, out, err = run(capsys, "cm/c", "-f", str(f))
    assert (code, out) == (1, "")
    assert err.startswith("error: ")
    assert err.count("\n") == 1


def test_the_sentinel_hash_is_new_content_every_workload_reloads_for() -> None:
    current = hashing.configmap_hash({"a": "1"})
    assert command.sentinel(current) == command.sentinel(current)
    assert command.sentinel(current) != current
    assert len(command.sentinel(current)) == len(current)


ROLLING = """
kind: ConfigMap
metadata: {name: c}
---
kind: Deployment
metadata: {name: {NAME}, generation: 3, annotations: {reloader.stakater.com/auto: 'true'}}
spec:
  replicas: 2
  template: {spec: {containers: [{name: app, envFrom: [{configMapRef: {name: c}}], env: ENV}]}}
status: {observedGeneration: OBSERVED, replicas: 2, updatedReplicas: 1, availableReplicas: 2}
"""


@pytest.mark.parametrize(("env", "observed", "cap", "in_flight"), [
    ("[{name: STAKATER_C_CONFIGMAP, value: old}]", 3, 1, ["Deployment team/busy"]),
    ("[{name: STAKATER_C_CONFIGMAP, value: old}]", 2, 1, ["Deployment team/busy"]),
    ("[{name: STAKATER_C_CONFIGMAP, value: old}]", 3, 0, []),  # no cap: no slots to hold
    ("[]", 3, 1, []),  # rolling out, but not a reload
])  # fmt: skip
def test_rollouts_in_flight_are_the_progressing_ones_that_carry_a_reload(
    env: str, observed: int, cap: int, in_flight: list[str], tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    f = tmp_path / "rolling.yaml"
    f.write_text(ROLLING.replace("{NAME}", "busy").replace("ENV", env)
                 .replace("OBSERVED", str(observed)))  # fmt: skip
    code, out, _ = run(capsys, "cm/c", "-n", "team", "-f", str(f), "--format", "json",
                       "--max-concurrent-rollouts", str(cap))  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    assert doc["in_flight"] == in_flight
    assert doc["rows"][0]["verdict"]["write"] is True, "its own slot does not hold it back"


def test_without_namespace_policies_the_namespaces_freeze_is_not_applied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "frozen.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: ns, annotations: "
        "{kube-reloader.io/freeze: 'true'}}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg, namespace: ns}\ndata: {a: '1'}\n"
        "---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: ns, "
        "annotations: {reloader.stakater.com/auto: 'true'}}\nspec: {template: {spec: "
        "{containers: [{name: app, envFrom: [{configMapRef: {name: cfg}}]}]}}}\n"
    )
    assert cli.main(["impact", "cm/ns/cfg", "-f", str(path)]) == 0
    assert "Deployment/web  reload  env-vars  held: frozen" in capsys.readouterr().out
    assert cli.main(["impact", "cm/ns/cfg", "-f", str(path), "--namespace-policies=false"]) == 0
    assert "Deployment/web  reload  env-vars  now" in capsys.readouterr().out
