"""The controller's resolved options: what to watch, how to decide, how to write.

Built once by the command line from Reloader's flags and environment, validated there, and
passed explicitly to everything that needs it (no globals).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kube_reloader.core import planning
from kube_reloader.core.objects import ResourceType, WorkloadKind


@dataclass(frozen=True, slots=True)
class Options:
    plan: planning.Config = field(default_factory=planning.Config)
    #: None = all namespaces; otherwise the namespaces to watch (scoped mode)
    namespaces: tuple[str, ...] | None = None
    namespaces_to_ignore: frozenset[str] = frozenset()
    namespace_selector: str = ""
    resource_label_selector: str = ""
    resources: tuple[ResourceType, ...] = (ResourceType.CONFIGMAP, ResourceType.SECRET)
    workload_kinds: tuple[WorkloadKind, ...] = (
        WorkloadKind.DEPLOYMENT,
        WorkloadKind.DAEMONSET,
        WorkloadKind.STATEFULSET,
    )
    reload_on_create: bool = False
    reload_on_delete: bool = False
    sync_after_restart: bool = False
    workers: int = 4
    field_manager: str = "Reloader"
    user_agent: str = ""
