"""The closed sets the rules talk about: resource types, workload kinds, object keys."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ResourceType(StrEnum):
    """What changed. Values are Reloader v1's type tokens (used in env-var names and JSON)."""

    CONFIGMAP = "CONFIGMAP"
    SECRET = "SECRET"
    SECRETPROVIDERCLASS = "SECRETPROVIDERCLASS"

    @property
    def kind(self) -> str:
        return {
            ResourceType.CONFIGMAP: "ConfigMap",
            ResourceType.SECRET: "Secret",
            ResourceType.SECRETPROVIDERCLASS: "SecretProviderClass",
        }[self]

    @property
    def plural(self) -> str:
        """Lower-case plural, as in `--resources-to-ignore` and Event source components."""
        return {
            ResourceType.CONFIGMAP: "configmaps",
            ResourceType.SECRET: "secrets",
            ResourceType.SECRETPROVIDERCLASS: "secretproviderclasspodstatuses",
        }[self]


class WorkloadKind(StrEnum):
    DEPLOYMENT = "Deployment"
    DAEMONSET = "DaemonSet"
    STATEFULSET = "StatefulSet"
    CRONJOB = "CronJob"
    JOB = "Job"
    ROLLOUT = "Rollout"
    DEPLOYMENTCONFIG = "DeploymentConfig"


@dataclass(frozen=True, slots=True, order=True)
class ObjectKey:
    """A namespaced object: `kind namespace/name`."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
