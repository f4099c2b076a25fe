"""The sets the rules talk about: resource types (closed), workload kinds (the built-in ones are
named; any other kind name is a workload with its pod template at `spec.template`), object keys.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import NamedTuple

from kube_reloader.core.records import record


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
    """The built-in workload kinds. The rules carry a kind as `str`: these members are
    strings (`WorkloadKind.JOB == "Job"`), and any other kind name is accepted as it is."""

    DEPLOYMENT = "Deployment"
    DAEMONSET = "DaemonSet"
    STATEFULSET = "StatefulSet"
    CRONJOB = "CronJob"
    JOB = "Job"
    ROLLOUT = "Rollout"
    DEPLOYMENTCONFIG = "DeploymentConfig"


#: what the API server accepts as a kind (a CRD's `names.kind` lower-cased is a DNS-1035 label)
_KIND_NAME = re.compile(r"[A-Za-z](?:[-A-Za-z0-9]{0,61}[A-Za-z0-9])?")


@record
class ParsedKind:
    """A workload kind name, or (when `error` is set) why there is none."""

    kind: str = ""
    error: str | None = None


def parse_workload_kind(value: object) -> ParsedKind:
    """The kind an object's `kind` field names, whatever the field holds: a built-in name gives
    its `WorkloadKind` member, any other kind name itself (a custom workload kind); anything
    else (missing, not a string, not a kind name) a one-line error."""
    if value is None or value == "":
        return ParsedKind(error="the object has no kind")
    if not isinstance(value, str):
        return ParsedKind(error=f"kind is a {type(value).__name__}, not a name")
    if not _KIND_NAME.fullmatch(value):
        return ParsedKind(error=f"kind {value[:64]!r} is not a kind name")
    return ParsedKind(WorkloadKind(value) if value in _BUILTIN else value)


_BUILTIN = frozenset(k.value for k in WorkloadKind)


class ObjectKey(NamedTuple):
    """A namespaced object: `kind namespace/name`.

    A named tuple, not a dataclass: every index and queue of the controller is keyed by it,
    and a tuple's hash and equality are the interpreter's own (a dataclass's are Python
    functions, ~0.3 µs a lookup, about 90 lookups per reload). Its `str` is the only form
    logs and messages use."""

    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
