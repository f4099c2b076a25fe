"""`--hash-algorithm=hmac-sha256`: the key Secret is created once and shared, and reloads write
keyed hashes that cannot be matched without it."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import errors, hashkey, resources
from kube_reloader.kube.client import Client
from tests.harness import auto_deployment_on_configmap, env_of, running, update_cm
from tests.waiting import eventually

pytestmark = pytest.mark.cluster


async def test_the_key_secret_is_created_on_first_start_and_read_afterwards(
    client: Client, namespace: str
) -> None:
    first = await hashkey.ensure(client, namespace, "hash-key", size=hashing.KEY_BYTES)
    again = await hashkey.ensure(client, namespace, "hash-key", size=hashing.KEY_BYTES)
    assert len(first) == hashing.KEY_BYTES
    assert again == first
    stored = await client.get(resources.SECRETS, "hash-key", namespace=namespace)
    assert base64.b64decode(stored["data"]["key"]) == first


async def test_replicas_starting_together_end_up_with_one_key(
    client: Client, namespace: str
) -> None:
    keys = await asyncio.gather(
        *(hashkey.ensure(client, namespace, "k", size=hashing.KEY_BYTES) for _ in range(5))
    )
    assert len(set(keys)) == 1


async def test_a_key_secret_with_a_short_key_stops_the_start_with_a_clear_error(
    client: Client, namespace: str
) -> None:
    await client.create(
        resources.SECRETS,
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "short", "namespace": namespace},
         "data": {"key": base64.b64encode(b"abc").decode()}},
    )  # fmt: skip
    with pytest.raises(errors.ConfigError, match="holds 3 bytes"):
        await hashkey.ensure(client, namespace, "short", size=hashing.KEY_BYTES)


async def test_a_reload_with_hmac_writes_the_keyed_hash_not_reloaders_sha1(
    client: Client, namespace: str
) -> None:
    key = secrets.token_bytes(hashing.KEY_BYTES)
    await auto_deployment_on_configmap(client, namespace)
    async with running(client, namespace, hash_key=key):
        await update_cm(client, namespace, "c", {"a": "2"})

        async def written() -> dict[str, str] | None:
            env = await env_of(client, "Deployment", namespace, "w")
            return env if "STAKATER_C_CONFIGMAP" in env else None

        env = await eventually(written, what="the reload")
    expected = hmac.new(key, b"a=2", hashlib.sha256).hexdigest()
    assert env["STAKATER_C_CONFIGMAP"] == expected
    assert env["STAKATER_C_CONFIGMAP"] != hashing.configmap_hash({"a": "2"})
