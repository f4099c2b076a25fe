"""The controller's resolved options: what to watch, how to decide, how to write.

Built once by the command line from Reloader's flags and environment, validated there, and
passed explicitly to everything that needs it (no globals).
"""

from __future__ import annotations

import dataclasses
from dataclasses import field

import msgspec

from kube_reloader.core import evicting, planning
from kube_reloader.core.customkinds import CustomKind
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.records import record
from kube_reloader.core.strategies import Compat
from kube_reloader.ctrlmetrics import VersionTwo
from kube_reloader.runtime.kinds import BUILTIN, Kinds


class AlertSettings(msgspec.Struct, frozen=True):
    url: str
    sink: str = ""
    additional_info: str = ""
    proxy: str = ""
    #: `--alert-structured`: the raw sink sends Reloader v2's JSON instead of text
    structured: bool = False


@record
class Options:
    plan: planning.Config = field(default_factory=planning.Config)
    #: None = all namespaces; otherwise the namespaces to watch (scoped mode)
    namespaces: tuple[str, ...] | None = None
    namespaces_to_ignore: frozenset[str] = frozenset()
    namespace_selector: str = ""
    resource_label_selector: str = ""
    resources: tuple[ResourceType, ...] = (ResourceType.CONFIGMAP, ResourceType.SECRET)
    #: the registry of workload kinds (a test may register one of its own)
    kinds: Kinds = field(default=BUILTIN, repr=False, compare=False)
    #: the kinds watched from the start (names in `kinds`; discovered kinds are switched on
    #: by `argo_rollouts` / `deployment_configs`)
    workload_kinds: tuple[str, ...] = (
        WorkloadKind.DEPLOYMENT,
        WorkloadKind.CRONJOB,
        WorkloadKind.JOB,
        WorkloadKind.DAEMONSET,
        WorkloadKind.STATEFULSET,
    )
    #: `--is-Argo-Rollouts=true`: watch argoproj.io/v1alpha1 Rollouts when served
    argo_rollouts: bool = False
    #: watch apps.openshift.io/v1 DeploymentConfigs when API discovery finds them
    deployment_configs: bool = True
    #: `--enable-csi-integration`: watch SecretProviderClassPodStatuses when served
    csi: bool = False
    #: `--webhook-url`: notify instead of reloading
    webhook_url: str = ""
    alerts: AlertSettings | None = None
    #: how often to look again for an optional API (Rollouts, DeploymentConfigs, CSI)
    discovery_interval: float = 30.0
    #: relist period for resources RBAC lets us list but not watch (e.g. Stakater's chart)
    poll_interval: float = 10.0
    #: changes to one workload within this window become one reload (0 disables)
    coalesce_window: float = 0.3
    #: with the admission webhook on (`--admission-grace`): a ConfigMap change's reload of a
    #: kind the webhook mutates waits this long instead of `coalesce_window`, so that an
    #: apply's own write of the workload (carrying the hash the webhook gave it) lands first
    admission_grace: float = 0.0
    #: the webhook writes key-level hashes too (`--admission-client-ca`: its caller proven)
    admission_keys: bool = False
    #: minimum seconds between two reloads of the same workload (0 disables)
    min_interval: float = 5.0
    #: cluster-wide reloads per second and burst (rate 0 disables)
    #: on startup and on becoming leader, apply changes made while nobody was watching
    reconcile_on_start: bool = True
    reload_rate: float = 50.0
    reload_burst: float = 200.0
    reload_on_create: bool = False
    reload_on_delete: bool = False
    sync_after_restart: bool = False
    workers: int = 4
    #: `--workload-kind`: custom resources with a pod template, registered at start (their
    #: kind names come from API discovery)
    custom_kinds: tuple[CustomKind, ...] = ()
    #: `--default-strategy`: how a workload without `kube-reloader.io/strategy` is reloaded
    default_strategy: evicting.PodStrategy = evicting.PodStrategy.PATCH
    #: `--max-concurrent-rollouts`: rollouts in flight cluster-wide (0: no cap)
    max_concurrent_rollouts: int = 0
    #: `--halt-after-failures`: failed rollouts with one content that halt it (0: off)
    halt_after_failures: int = 0
    #: `--freeze`: every reload waits until the flag is removed
    freeze: bool = False
    #: `--namespace-policies`: read freeze and reload-window annotations on namespaces (a
    #: cluster-wide watch of namespaces; not in --namespaces mode)
    namespace_policies: bool = True
    field_manager: str = "Reloader"
    #: `--hash-algorithm=hmac-sha256`: the key content hashes are keyed with (None: SHA-1,
    #: Reloader's values)
    hash_key: bytes | None = field(default=None, repr=False)
    user_agent: str = ""
    #: `--audit-interval`: seconds between two staleness audits by the leader (0: off)
    audit_interval: float = 0.0

    def __post_init__(self) -> None:
        """`plan` decides with `default_strategy` and with the evictable kinds of `kinds`
        (a registered `--workload-kind` too): each has one source, these options."""
        evictable = frozenset(spec.kind for spec in self.kinds if spec.evictable)
        plan = dataclasses.replace(
            self.plan, default_strategy=self.default_strategy, evictable=evictable
        )
        object.__setattr__(self, "plan", plan)  # frozen: set once, while it is being built

    def version_two(self, lease: str | None) -> VersionTwo | None:
        """Under `--compat=v2`: the controllers Reloader v2 would run for these options, and
        its Lease (`lease`, with HA), for its metric families; None otherwise."""
        if self.plan.compat is not Compat.V2:
            return None
        resources = [r.value for r in self.resources]
        return VersionTwo.of(
            resources, csi=self.csi, selector=bool(self.namespace_selector), lease=lease
        )
