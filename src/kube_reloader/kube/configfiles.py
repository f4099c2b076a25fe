"""The files a ConfigMap volume holds, read for an in-place `signal` reload's digest.

One LIST by name (`fieldSelector=metadata.name=`; the chart grants list and watch on
ConfigMaps, not get), decoded with the hashing projection; the caller hashes the bytes and
drops them. Secrets are never read here: a signal request names a Secret volume without a
digest of its content.
"""

from __future__ import annotations

import msgspec

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.contents import ConfigMapContent


async def config_files(client: Client, namespace: str, name: str) -> dict[str, bytes]:
    """Each key's bytes of ConfigMap `namespace/name` as the kubelet writes the file (`data`
    as UTF-8, and `binaryData`). NotFound when it does not exist."""
    cms = await client.list(
        resources.CONFIGMAPS,
        namespace=namespace,
        field_selector=f"metadata.name={name}",
        type=ConfigMapContent,
    )
    if not cms.items:
        raise errors.NotFound(404, f"ConfigMap {namespace}/{name} not found")
    cm = cms.items[0]
    try:
        out = {k: v.encode() for k, v in (cm.strings() or {}).items()}
        out.update(cm.binary() or {})
    except msgspec.ValidationError as exc:
        raise errors.KubeError(
            f"ConfigMap {namespace}/{name}: cannot read its data: {exc}"
        ) from exc
    return out
