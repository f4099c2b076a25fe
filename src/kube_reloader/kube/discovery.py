"""API discovery: is a resource served by this API server right now?

Optional kinds (Argo Rollouts, OpenShift DeploymentConfigs, the CSI driver's pod statuses)
come and go with their CRDs or platforms, so the runtime asks before watching them, and asks
again later when the answer was no.
"""

from __future__ import annotations

import msgspec

from kube_reloader.kube import errors
from kube_reloader.kube.client import Client
from kube_reloader.kube.resources import Resource


class _APIResource(msgspec.Struct):
    name: str = ""
    kind: str = ""


class _APIResourceList(msgspec.Struct):
    resources: list[_APIResource] | None = None


_decoder = msgspec.json.Decoder(_APIResourceList)


def group_version_path(resource: Resource) -> str:
    """The discovery document of the resource's group version: `/api/v1` for the core
    group (group ""), `/apis/{group}/{version}` for every other."""
    if resource.group:
        return f"/apis/{resource.group}/{resource.version}"
    return f"/api/{resource.version}"


async def _listed(client: Client, path: str) -> list[_APIResource] | None:
    """The resources a group version lists; None when it is not served (404)."""
    try:
        data = await client.request("GET", path)
    except errors.NotFound:
        return None
    try:
        doc = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise errors.KubeError(f"GET {path}: not an APIResourceList: {exc}") from exc
    return doc.resources or []


async def kind_of(client: Client, group: str, version: str, plural: str) -> str | None:
    """The kind served as `plural` in `group/version`; None when it is not served."""
    listed = await _listed(client, f"/apis/{group}/{version}")
    return next((r.kind for r in listed or () if r.name == plural and r.kind), None)


async def served(client: Client, resource: Resource) -> bool:
    """True when the resource's group version lists its plural; False when the group version
    is not served (404). Any other failure raises its `kube.errors` class (an answer that is
    not a discovery document raises `KubeError`)."""
    listed = await _listed(client, group_version_path(resource))
    return any(r.name == resource.plural for r in listed or ())
