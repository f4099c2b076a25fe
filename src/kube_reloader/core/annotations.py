"""Every annotation key Reloader reads or writes, and the tolerant parsers for their values.

Keys default to Reloader v1's and can be renamed by the same flags (`--auto-annotation` ...);
`Keys` is the one place they live. Value parsing reproduces v1 exactly: `auto` uses Go's
`strconv.ParseBool`, while `ignore`, `search` and `match` need the exact string `true`.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from kube_reloader.core.objects import ResourceType

DOMAIN = "reloader.stakater.com"
LAST_RELOADED_FROM = "reloader.stakater.com/last-reloaded-from"
ROLLOUT_STRATEGY = "reloader.stakater.com/rollout-strategy"
CRONJOB_INSTANTIATE = "cronjob.kubernetes.io/instantiate"
#: ours (annotations strategy): every config's hash the pod template was last reloaded for,
#: written with v1's last-reloaded-from, which only remembers the last one
RELOADED_HASHES = "kube-reloader.io/reloaded-hashes"
#: ours: pod-level reloads (core/evicting.py)
POD_STRATEGY = "kube-reloader.io/strategy"
MAX_UNAVAILABLE = "kube-reloader.io/max-unavailable"
POD_SELECTOR = "kube-reloader.io/pod-selector"
#: ours: the signal of the in-place `signal` strategy (core/inplace.py)
SIGNAL = "kube-reloader.io/signal"
#: ours: fleet-safe rotations (core/scheduling.py)
RELOAD_WINDOW = "kube-reloader.io/reload-window"
RELOAD_AFTER = "kube-reloader.io/reload-after"
RELOAD_URGENT = "kube-reloader.io/reload-urgent"
FREEZE = "kube-reloader.io/freeze"
JOB_POLICY = "kube-reloader.io/job-policy"
#: ours: key-level reloads (core/scoping.py) and the --reload-tls-secrets opt-out
RELOAD_SCOPE = "kube-reloader.io/reload-scope"
IGNORE_TLS = "kube-reloader.io/ignore-tls"

# Go's strconv.ParseBool
_TRUE = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_FALSE = frozenset({"0", "f", "F", "FALSE", "false", "False"})


@dataclass(frozen=True)
class Keys:
    """Annotation keys in effect (v1 defaults; each overridable by its v1 flag)."""

    auto: str = "reloader.stakater.com/auto"
    configmap_auto: str = "configmap.reloader.stakater.com/auto"
    secret_auto: str = "secret.reloader.stakater.com/auto"
    spc_auto: str = "secretproviderclass.reloader.stakater.com/auto"
    configmap_reload: str = "configmap.reloader.stakater.com/reload"
    secret_reload: str = "secret.reloader.stakater.com/reload"
    spc_reload: str = "secretproviderclass.reloader.stakater.com/reload"
    configmap_exclude: str = "configmaps.exclude.reloader.stakater.com/reload"
    secret_exclude: str = "secrets.exclude.reloader.stakater.com/reload"
    spc_exclude: str = "secretproviderclasses.exclude.reloader.stakater.com/reload"
    search: str = "reloader.stakater.com/search"
    match: str = "reloader.stakater.com/match"
    ignore: str = "reloader.stakater.com/ignore"
    pause_period: str = "deployment.reloader.stakater.com/pause-period"
    paused_at: str = "deployment.reloader.stakater.com/paused-at"

    # What the keys give (per-type keys, the sets projections keep) is read on every watch
    # event and every decision: computed on first use and kept on the instance, outside the
    # dataclass fields (equality, hashing, `replace` and reflection see the keys only).
    @functools.cached_property
    def _derived(self) -> _Derived:
        typed = {
            ResourceType.CONFIGMAP: (
                self.configmap_auto,
                self.configmap_reload,
                self.configmap_exclude,
            ),
            ResourceType.SECRET: (self.secret_auto, self.secret_reload, self.secret_exclude),
            ResourceType.SECRETPROVIDERCLASS: (self.spc_auto, self.spc_reload, self.spc_exclude),
        }
        workload = {self.auto, self.search, self.pause_period, self.paused_at}
        workload.update(k for t in typed.values() for k in t)
        workload.update(_OURS_ON_WORKLOADS)
        return _Derived(
            typed=types.MappingProxyType(typed),
            triggers=types.MappingProxyType(
                {r: (t[1], self.search, self.auto, t[0]) for r, t in typed.items()}
            ),
            workload_keys=frozenset(workload),
            resource_keys=frozenset({self.ignore, self.match, RELOAD_URGENT}),
        )

    def typed_auto(self, rtype: ResourceType) -> str:
        return self._derived.typed[rtype][0]

    def named(self, rtype: ResourceType) -> str:
        return self._derived.typed[rtype][1]

    def exclude(self, rtype: ResourceType) -> str:
        return self._derived.typed[rtype][2]

    def trigger_keys(self, rtype: ResourceType) -> tuple[str, str, str, str]:
        """The keys whose presence on the workload pins the decision to its own metadata."""
        return self._derived.triggers[rtype]

    def workload_keys(self) -> frozenset[str]:
        """Every key that matters on a workload or its pod template (for projections)."""
        return self._derived.workload_keys

    def resource_keys(self) -> frozenset[str]:
        """Keys that matter on a ConfigMap/Secret/SecretProviderClass."""
        return self._derived.resource_keys


class _Derived(NamedTuple):
    """What `Keys` derives from its keys (read-only)."""

    #: per type: (typed auto, named reload list, exclude list)
    typed: Mapping[ResourceType, tuple[str, str, str]]
    #: per type: the keys whose presence on the workload pins the decision there
    triggers: Mapping[ResourceType, tuple[str, str, str, str]]
    workload_keys: frozenset[str]
    resource_keys: frozenset[str]


#: our own workload annotations, and the v1 keys no flag renames, that projections keep
_OURS_ON_WORKLOADS = (
    ROLLOUT_STRATEGY,
    LAST_RELOADED_FROM,
    RELOADED_HASHES,
    POD_STRATEGY,
    MAX_UNAVAILABLE,
    POD_SELECTOR,
    SIGNAL,
    RELOAD_WINDOW,
    RELOAD_AFTER,
    JOB_POLICY,
    RELOAD_SCOPE,
    IGNORE_TLS,
)


def parse_bool(value: str) -> bool | None:
    """Go's `strconv.ParseBool`: True/False for its accepted spellings, None otherwise."""
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    return None


def go_trim_space(value: str) -> str:
    """Go's `strings.TrimSpace` (ASCII and Unicode white space)."""
    return value.strip()


def split_list(value: str) -> list[str]:
    """A comma-separated annotation list, each entry trimmed (empty entries kept, as in v1)."""
    return [go_trim_space(part) for part in value.split(",")]


@functools.lru_cache(maxsize=256)
def list_members(value: str) -> frozenset[str]:
    """The entries of a list as a set, computed once per distinct value: a 30,000-entry
    exclude list then costs a set lookup per decision, not a split."""
    return frozenset(split_list(value))


def shadowed_template_keys(
    workload_annotations: Mapping[str, str], template_annotations: Mapping[str, str], keys: Keys
) -> dict[str, str]:
    """Pod-template trigger annotations that can never be read: for their resource type, the
    workload's own metadata already carries a trigger key, which pins the decision there."""
    out: dict[str, str] = {}
    if not template_annotations:  # the common case: nothing on the template to shadow
        return out
    for rtype in (ResourceType.CONFIGMAP, ResourceType.SECRET, ResourceType.SECRETPROVIDERCLASS):
        triggers = keys.trigger_keys(rtype)
        if any(k in workload_annotations for k in triggers):
            out.update({k: template_annotations[k] for k in triggers if k in template_annotations})
    return out
