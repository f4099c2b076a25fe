"""The files a ConfigMap or Secret volume holds, read for an in-place `signal` reload's digest.

One LIST by name (`fieldSelector=metadata.name=`; the chart grants list and watch on these,
not get), decoded with the hashing projections; the caller hashes the bytes and drops them.
"""

from __future__ import annotations

import msgspec

from kube_reloader.core.objects import ResourceType
from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.projections import ConfigMapContent, SecretContent


async def config_files(
    client: Client, rtype: ResourceType, namespace: str, name: str
) -> dict[str, bytes]:
    """Each key's bytes as the kubelet would write the file (a ConfigMap's `data` as UTF-8
    and its `binaryData`; a Secret's `data` decoded). NotFound when it does not exist."""
    by_name = f"metadata.name={name}"
    if rtype is ResourceType.CONFIGMAP:
        cms = await client.list(
            resources.CONFIGMAPS, namespace=namespace, field_selector=by_name,
            type=ConfigMapContent,
        )  # fmt: skip
        if not cms.items:
            raise errors.NotFound(404, f"ConfigMap {namespace}/{name} not found")
        cm = cms.items[0]
        out = {k: v.encode() for k, v in (cm.data or {}).items()}
        out.update(cm.binaryData or {})
        return out
    if rtype is ResourceType.SECRET:
        secrets = await client.list(
            resources.SECRETS, namespace=namespace, field_selector=by_name, type=SecretContent
        )
        if not secrets.items:
            raise errors.NotFound(404, f"Secret {namespace}/{name} not found")
        try:
            return dict(secrets.items[0].values())
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise errors.KubeError(f"Secret {namespace}/{name}: unreadable data") from exc
    raise ValueError(f"{rtype.value} is not mounted as files")
