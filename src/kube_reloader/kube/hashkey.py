"""The key of `--hash-algorithm=hmac-sha256`: one Secret in the controller's namespace.

Read at start; created with 32 random bytes when absent (two replicas starting together both
end up with the first one created). The key is never logged and never leaves this process
except in the Secret itself. Deleting the Secret makes the next start create a new key,
which changes every hash once: each workload then rolls at most once.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from typing import Any

from kube_reloader.kube import errors, resources
from kube_reloader.kube.client import Client

DATA_KEY = "key"


def _decode(obj: dict[str, Any], where: str, size: int) -> bytes:
    encoded = (obj.get("data") or {}).get(DATA_KEY)
    try:
        key = base64.b64decode(encoded or "", validate=True)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise errors.ConfigError(f"{where}: data.{DATA_KEY} is not base64") from exc
    if len(key) < size:
        raise errors.ConfigError(
            f"{where}: data.{DATA_KEY} holds {len(key)} bytes; at least {size} are required"
        )
    return key


async def ensure(client: Client, namespace: str, name: str, *, size: int) -> bytes:
    """The hash key from Secret `namespace/name` (at least `size` bytes), created first with
    `size` random bytes if it does not exist."""
    where = f"Secret {namespace}/{name}"
    try:
        return _decode(await client.get(resources.SECRETS, name, namespace=namespace), where, size)
    except errors.NotFound:
        pass
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "kube-reloader"},
        },
        "data": {DATA_KEY: base64.b64encode(secrets.token_bytes(size)).decode()},
    }
    try:
        return _decode(await client.create(resources.SECRETS, body), where, size)
    except errors.AlreadyExists:  # another replica created it first: use theirs
        return _decode(await client.get(resources.SECRETS, name, namespace=namespace), where, size)
