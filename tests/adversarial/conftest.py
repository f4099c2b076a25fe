"""Fixtures of the adversarial suite: a hostile tenant's namespace and a canary's."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from kube_reloader.kube.client import Client
from tests.adversarial.tenant import Canary, drop_namespace, new_namespace


@pytest.fixture
async def tenant(client: Client) -> AsyncIterator[str]:
    ns = await new_namespace(client, "hostile")
    yield ns
    await drop_namespace(client, ns)


@pytest.fixture
async def canary(client: Client) -> AsyncIterator[Canary]:
    ns = await new_namespace(client, "canary")
    bird = Canary(client, ns)
    await bird.create()
    yield bird
    await drop_namespace(client, ns)
