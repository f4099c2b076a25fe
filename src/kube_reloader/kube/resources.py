"""Where each kind lives in the REST API: group, version, plural, scope.

Built-in resources used by the project are constants here; any custom resource is one
`Resource(...)` away, so the client needs no discovery to address a CRD path.
"""

from __future__ import annotations

from urllib.parse import quote

import msgspec


class Resource(msgspec.Struct, frozen=True):
    """One REST resource type, e.g. `apps/v1 deployments`."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self,
        namespace: str | None = None,
        name: str | None = None,
        subresource: str | None = None,
    ) -> str:
        """The URL path of the collection, or of one object (and its subresource)."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        elif self.namespaced and name is not None:
            raise ValueError(f"{self.kind} {name!r} is namespaced: a namespace is required")
        base += f"/{self.plural}"
        if name is not None:
            if not name:
                raise ValueError(f"{self.kind}: an empty name cannot be addressed")
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base

    def __str__(self) -> str:
        return f"{self.plural}.{self.group}" if self.group else self.plural


NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
CONFIGMAPS = Resource("", "v1", "configmaps", "ConfigMap")
SECRETS = Resource("", "v1", "secrets", "Secret")
PODS = Resource("", "v1", "pods", "Pod")
SERVICEACCOUNTS = Resource("", "v1", "serviceaccounts", "ServiceAccount")
EVENTS = Resource("", "v1", "events", "Event")
#: Reloader v2's Events (client-go's `events` recorder)
EVENTS_V1 = Resource("events.k8s.io", "v1", "events", "Event")
DEPLOYMENTS = Resource("apps", "v1", "deployments", "Deployment")
STATEFULSETS = Resource("apps", "v1", "statefulsets", "StatefulSet")
DAEMONSETS = Resource("apps", "v1", "daemonsets", "DaemonSet")
REPLICASETS = Resource("apps", "v1", "replicasets", "ReplicaSet")
JOBS = Resource("batch", "v1", "jobs", "Job")
CRONJOBS = Resource("batch", "v1", "cronjobs", "CronJob")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
CUSTOMRESOURCEDEFINITIONS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)
ROLLOUTS = Resource("argoproj.io", "v1alpha1", "rollouts", "Rollout")
DEPLOYMENTCONFIGS = Resource("apps.openshift.io", "v1", "deploymentconfigs", "DeploymentConfig")
SECRETPROVIDERCLASSES = Resource(
    "secrets-store.csi.x-k8s.io", "v1", "secretproviderclasses", "SecretProviderClass"
)
SECRETPROVIDERCLASSPODSTATUSES = Resource(
    "secrets-store.csi.x-k8s.io",
    "v1",
    "secretproviderclasspodstatuses",
    "SecretProviderClassPodStatus",
)

#: The one map from a built-in workload kind (a `WorkloadKind` value) to its REST resource.
WORKLOAD_RESOURCES: dict[str, Resource] = {
    r.kind: r
    for r in (DEPLOYMENTS, DAEMONSETS, STATEFULSETS, CRONJOBS, JOBS, ROLLOUTS, DEPLOYMENTCONFIGS)
}
#: kubectl's short names for the built-in workload resources that have one
WORKLOAD_SHORT_NAMES: dict[str, Resource] = {
    "deploy": DEPLOYMENTS,
    "sts": STATEFULSETS,
    "ds": DAEMONSETS,
    "cj": CRONJOBS,
    "dc": DEPLOYMENTCONFIGS,
}


def workload_resource(name: str) -> Resource | None:
    """A built-in workload resource named as kubectl accepts it: by kind, plural or short name,
    in any case (`Deployment`, `deployments`, `deploy`); None for any other name."""
    wanted = name.lower()
    for r in WORKLOAD_RESOURCES.values():
        if wanted in (r.kind.lower(), r.plural):
            return r
    return WORKLOAD_SHORT_NAMES.get(wanted)
