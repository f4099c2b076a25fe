"""Staleness: which (workload, resource) pairs run old content that no rule will reload, and
why. The rules are the controller's (planning.plan); each row is one case from the field."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from kube_reloader.core import matching, planning, rollouts, staleness
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.staleness import Consumed, Reason, Unwatched
from kube_reloader.core.x509 import Validity
from tests import builders as b

CM, SECRET = ResourceType.CONFIGMAP, ResourceType.SECRET
CHANGED = 1_000.0
BEFORE, AFTER = (900.0, 950.0), (1_001.0, 1_100.0)


def workload(annotations: dict[str, str] | None = None, template_annotations: dict[str, str] | None = None,
             kind: str = "deployment") -> planning.Workload:  # fmt: skip
    tmpl = b.pod_template(
        {"app": "w"},
        containers=[b.container("app", env_from_configmaps=("cfg",), volume_mounts=("tls",))],
        volumes=[{"name": "tls", "secret": {"secretName": "nats-tls"}}],
        annotations=template_annotations,
    )
    build = {"deployment": b.deployment, "statefulset": b.statefulset}[kind]
    manifest: dict[str, Any] = build("w", "tenant", template=tmpl, annotations=annotations or {})
    return planning.workload_from_manifest(manifest)


def unmounted(annotations: dict[str, str] | None = None) -> planning.Workload:
    """A workload whose pod template has a volume of Secret nats-tls that no container mounts."""
    tmpl = b.pod_template(
        {"app": "w"}, containers=[b.container("app", env_from_configmaps=("cfg",))],
        volumes=[{"name": "tls", "secret": {"secretName": "nats-tls"}}],
    )  # fmt: skip
    return planning.workload_from_manifest(
        b.deployment("w", "tenant", template=tmpl, annotations=annotations or {})
    )


CFG = Consumed(CM, "cfg", CHANGED)
TLS_ON = planning.Config(match=matching.MatchConfig(reload_tls_secrets=True))
TLS = Consumed(SECRET, "nats-tls", CHANGED, tls=True, validity=Validity(990.0, 5_000.0))


@dataclass
class Row:
    case: str
    workload: planning.Workload
    consumed: list[Consumed]
    pods: tuple[float, ...]
    want: dict[str, Reason]  # resource name -> reason
    config: planning.Config = field(default_factory=planning.Config)


ROWS = [
    Row("NATS: a TLS Secret mounted, no annotation", workload(), [TLS], BEFORE,
        {"nats-tls": Reason.NO_ANNOTATION}),
    Row("no annotation: every consumed resource that changed", workload(), [CFG, TLS], BEFORE,
        {"cfg": Reason.NO_ANNOTATION, "nats-tls": Reason.NO_ANNOTATION}),
    Row("qdrant: auto under the pod template, shadowed by search on the workload",
        workload({"reloader.stakater.com/search": "true"}, {"reloader.stakater.com/auto": "true"}),
        [CFG], BEFORE, {"cfg": Reason.POD_TEMPLATE_ANNOTATION}),
    Row("the pod template's auto is read when the workload carries no trigger: not stale",
        workload(template_annotations={"reloader.stakater.com/auto": "true"}), [CFG], BEFORE, {}),
    Row("auto on the workload: the rules reload it, not stale",
        workload({"reloader.stakater.com/auto": "true"}), [CFG, TLS], BEFORE, {}),
    Row("a named list that names the resource: not stale",
        workload({"configmap.reloader.stakater.com/reload": "cfg"}), [CFG], BEFORE, {}),
    Row("a named list for ConfigMaps only: the Secret is stale",
        workload({"configmap.reloader.stakater.com/reload": "cfg"}), [CFG, TLS], BEFORE,
        {"nats-tls": Reason.NO_ANNOTATION}),
    Row("the resource carries ignore", workload({"reloader.stakater.com/auto": "true"}),
        [replace(CFG, annotations={"reloader.stakater.com/ignore": "true"})], BEFORE,
        {"cfg": Reason.IGNORED}),
    Row("kube-ovn: excluded on the workload",
        workload({"reloader.stakater.com/auto": "true",
                  "secrets.exclude.reloader.stakater.com/reload": "nats-tls"}),
        [CFG, TLS], BEFORE, {"nats-tls": Reason.EXCLUDED}),
    Row("the controller's scope leaves it out (label selector)", workload({"reloader.stakater.com/auto": "true"}),
        [replace(CFG, unwatched=Unwatched(Reason.EXCLUDED, "outside --resource-label-selector"))],
        BEFORE, {"cfg": Reason.EXCLUDED}),
    Row("pods started after the change: not stale", workload(), [CFG, TLS], AFTER, {}),
    Row("one pod older than the change is enough", workload(), [CFG], (900.0, 1_200.0),
        {"cfg": Reason.NO_ANNOTATION}),
    Row("a pod started in the second of the change is not stale", workload(), [CFG], (CHANGED,), {}),
    Row("a pod started within the clock margin before the change is current", workload(), [CFG],
        (CHANGED - staleness.MARGIN + 0.5, CHANGED - 1.0), {}),
    Row("a pod started more than the clock margin before the change is stale", workload(), [CFG],
        (CHANGED - staleness.MARGIN - 1.0, CHANGED - 1.0), {"cfg": Reason.NO_ANNOTATION}),
    Row("no live pod: nothing runs old content", workload(), [CFG, TLS], (), {}),
    Row("no known change time: not stale", workload(), [replace(CFG, changed_at=None)], BEFORE, {}),
    Row("--auto-reload-all reloads it: not stale", workload(), [CFG, TLS], BEFORE, {},
        planning.Config(match=matching.MatchConfig(auto_reload_all=True))),
    Row("--reload-tls-secrets reloads the TLS Secret: only the ConfigMap is stale", workload(),
        [CFG, TLS], BEFORE, {"cfg": Reason.NO_ANNOTATION}, TLS_ON),
    Row("--reload-tls-secrets, but the workload opts out: ignored",
        workload({"kube-reloader.io/ignore-tls": "true"}), [TLS], BEFORE,
        {"nats-tls": Reason.IGNORED}, TLS_ON),
    Row("--reload-tls-secrets does not cover an Opaque Secret", workload(),
        [replace(TLS, tls=False)], BEFORE, {"nats-tls": Reason.NO_ANNOTATION}, TLS_ON),
    Row("a Secret volume no container mounts, no annotation: nothing reads it, not stale",
        unmounted(), [CFG, TLS], BEFORE, {"cfg": Reason.NO_ANNOTATION}),
    Row("a Secret volume no container mounts, excluded: not stale either",
        unmounted({"secrets.exclude.reloader.stakater.com/reload": "nats-tls"}), [TLS], BEFORE, {}),
    Row("Helm's checksum: the template was written with the config, its rollout replaces them",
        replace(workload(), template_changed_at=CHANGED), [CFG, TLS], BEFORE, {}),
    Row("a template written after the change: its rollout replaces the old pods",
        replace(workload(), template_changed_at=CHANGED + 30), [CFG], BEFORE, {}),
    Row("a template written before the change: stale",
        replace(workload(), template_changed_at=CHANGED - 30), [CFG], BEFORE,
        {"cfg": Reason.NO_ANNOTATION}),
    Row("a rollout in progress: its spec not yet observed",
        replace(workload(), status=rollouts.Status(generation=3, observed_generation=2,
                                                   replicas=2, updated=2)), [CFG], BEFORE, {}),
    Row("a rollout in progress: fewer pods updated than wanted",
        replace(workload(), status=rollouts.Status(generation=3, observed_generation=3,
                                                   replicas=3, updated=1, outdated=2)),
        [CFG], BEFORE, {}),
    Row("a rollout complete: stale",
        replace(workload(), status=rollouts.Status(generation=3, observed_generation=3,
                                                   replicas=2, updated=2, available=2)),
        [CFG], BEFORE, {"cfg": Reason.NO_ANNOTATION}),
    Row("renamed annotation keys are the controller's", workload({"reloader.stakater.com/auto": "true"}),
        [CFG], BEFORE, {"cfg": Reason.NO_ANNOTATION},
        planning.Config(match=matching.MatchConfig(keys=Keys(auto="example.com/auto")))),
]  # fmt: skip


@pytest.mark.parametrize("row", ROWS, ids=[r.case for r in ROWS])
def test_the_audit_finds_exactly_the_stale_pairs_with_their_reason(row: Row) -> None:
    found = staleness.stale(
        workload=row.workload, consumed=row.consumed, pod_starts=row.pods, config=row.config,
        now=2_000,
    )  # fmt: skip
    assert {f.name: f.reason for f in found} == row.want
    for f in found:
        assert f.oldest_pod == min(row.pods)
        assert f.pods == len(row.pods)
        assert 1 <= f.pods_before <= f.pods
        assert f.message
        assert "\n" not in f.message


def test_a_finding_names_the_workload_resource_and_certificate() -> None:
    [found] = staleness.stale(workload=workload(), consumed=[TLS], pod_starts=BEFORE,
                              config=planning.Config(), now=2_000)  # fmt: skip
    assert found.to_dict() == {
        "namespace": "tenant", "kind": "Deployment", "name": "w", "resource": "Secret/nats-tls",
        "reason": "no_annotation",
        "message": "no reload annotation for Secrets on the workload or its pod template",
        "changedAt": "1970-01-01T00:16:40Z", "oldestPodStartedAt": "1970-01-01T00:15:00Z",
        "podsBeforeChange": 2, "pods": 2, "tls": True,
        "certificate": {"notBefore": "1970-01-01T00:16:30Z", "notAfter": "1970-01-01T01:23:20Z"},
    }  # fmt: skip


SCOPES = [
    ("watched", {}, None),
    ("ignored namespace", {"namespaces_to_ignore": ["tenant"]}, Reason.IGNORED),
    ("outside --namespaces", {"namespaces": ("other",)}, Reason.IGNORED),
    ("inside --namespaces", {"namespaces": ("tenant",)}, None),
    ("ignored resource type", {"resources": (SECRET,)}, Reason.IGNORED),
    ("outside a label selector", {"outside_selector": "--resource-label-selector"}, Reason.EXCLUDED),
]  # fmt: skip


@pytest.mark.parametrize(("case", "kwargs", "want"), SCOPES, ids=[s[0] for s in SCOPES])
def test_the_controllers_scope_says_ignored_or_excluded(
    case: str, kwargs: dict[str, Any], want: Reason | None
) -> None:
    args: dict[str, Any] = {
        "namespaces": None,
        "namespaces_to_ignore": (),
        "resources": (CM, SECRET),
    }
    got = staleness.unwatched(namespace="tenant", rtype=CM, **{**args, **kwargs})
    assert (got.reason if got is not None else None) == want


@pytest.mark.parametrize(
    ("secret_type", "annotations", "want"),
    [("kubernetes.io/tls", {}, True), ("Opaque", {"cert-manager.io/certificate-name": "c"}, True),
     ("Opaque", {}, False)],
)  # fmt: skip
def test_a_tls_secret_is_told_by_its_type_or_cert_managers_annotation(
    secret_type: str, annotations: dict[str, str], want: bool
) -> None:
    assert staleness.is_tls(secret_type, annotations) is want


def test_consumed_names_are_the_templates_configmaps_and_secrets() -> None:
    assert staleness.consumed_names(workload()) == [(CM, "cfg"), (SECRET, "nats-tls")]
