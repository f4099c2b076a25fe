"""Case 8: a Secret's content cannot be read back from the controller's logs.

Before, the unsalted SHA-1 of each changed Secret was logged at info on every change: a
6-digit PIN was recovered from one log line in 1.7 s. Now Secret hashes (and the reasons
that name them) are logged at debug only."""

from __future__ import annotations

from pathlib import Path

import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import resources
from kube_reloader.kube.client import Client
from tests import builders
from tests.adversarial.tenant import ControllerProcess, controller
from tests.waiting import eventually

# serial: adversarial: bounds on the event loop's lag and on other namespaces' reloads
pytestmark = [pytest.mark.cluster, pytest.mark.serial]


async def reload_on_pin_change(client: Client, ns: str) -> None:
    await client.create(resources.SECRETS, builders.secret("pin", ns, {"pin": "123456"}))
    await client.create(
        resources.DEPLOYMENTS, builders.auto_deployment("bank", ns, secrets=("pin",))
    )


async def wait_for_env(client: Client, ns: str, value: str) -> None:
    from tests.harness import env_of
    from tests.waiting import eventually

    async def carried() -> bool:
        return (await env_of(client, "Deployment", ns, "bank")).get("STAKATER_PIN_SECRET") == value

    await eventually(carried, what="the reload of the Secret change")


async def logged(proc: ControllerProcess, line: str) -> str | None:
    """The controller's whole log once it holds `line`."""
    log = proc.log()
    return log if line in log else None


@pytest.mark.parametrize(("level", "shown"), [("info", False), ("debug", True)])
async def test_a_secret_hash_reaches_the_log_only_at_debug(
    client: Client, kubeconfig_path: Path, tenant: str, level: str, shown: bool
) -> None:
    await reload_on_pin_change(client, tenant)
    new = hashing.secret_hash({"pin": b"654321"})
    async with controller(kubeconfig_path, [tenant], f"--log-level={level}") as proc:
        await client.patch(
            resources.SECRETS, "pin", {"stringData": {"pin": "654321"}}, namespace=tenant
        )
        await wait_for_env(client, tenant, new)
        # The controller logs the reload once its PATCH has returned: the pod template can
        # carry the new value a moment before that line is written.
        log = await eventually(
            lambda: logged(proc, "reloaded workload"), what="the reload's log line"
        )
    assert (new in log) is shown
