"""runtime.servingcerts and the webhook's edge: admission never stops the controller (a
failing start is retried, nothing serves meanwhile, no supervised task crashes), the CA bundle
is checked against the live webhook configuration every time, and a body announced over the
cap is refused before it is read (the edge's stages and their waiting: tests/unit/test_serving.py)."""

from __future__ import annotations

import asyncio
import base64
import copy
import json
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from kube_reloader.edges import admitserving
from kube_reloader.kube import admissioncerts as pki
from kube_reloader.kube import errors
from kube_reloader.runtime import servingcerts
from kube_reloader.runtime.admitsettings import AdmissionSettings
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.supervisor import Supervisor
from tests.unit.runtime.fakes import FakeClock

HOOK = "kube-reloader"


class FakeClient:
    """The CA Secret and the MutatingWebhookConfiguration, in memory; `fail` is raised by
    every call while it is set."""

    def __init__(self, secret: dict[str, Any] | None = None) -> None:
        self.secret = secret
        self.hook: dict[str, Any] = {"webhooks": [{"name": "w", "clientConfig": {}}]}
        self.fail: Exception | None = None
        self.patches = 0

    def _check(self) -> None:
        if self.fail is not None:
            raise self.fail

    async def get(self, resource: Any, name: str, **_: Any) -> dict[str, Any]:
        self._check()
        if resource is pki.MUTATING_WEBHOOKS:
            return copy.deepcopy(self.hook)
        if self.secret is None:
            raise errors.NotFound(404, "no secret")
        return copy.deepcopy(self.secret)

    async def create(self, resource: Any, body: dict[str, Any]) -> dict[str, Any]:
        self._check()
        self.secret = copy.deepcopy(body)
        return body

    async def patch(self, resource: Any, name: str, ops: list[Any], **_: Any) -> None:
        self._check()
        self.patches += 1
        for op in ops:
            if op["op"] == "add":
                index = int(op["path"].split("/")[2])
                self.hook["webhooks"][index]["clientConfig"]["caBundle"] = op["value"]


def settings() -> AdmissionSettings:
    return AdmissionSettings(addr="127.0.0.1:0", namespace="ctl")


def bad_secret(**data: bytes) -> dict[str, Any]:
    return {"metadata": {"name": "ca"},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}  # fmt: skip


def good_cert() -> bytes:
    return pki.new_ca(FakeClock().wall(), 365 * 24 * 3600.0).cert_pem


def encrypted_key() -> bytes:
    """A key that needs a password (load_pem_private_key raises TypeError without one)."""
    return ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"pw"),
    )  # fmt: skip


BROKEN = [
    ("the API server forbids the CA Secret", FakeClient(), errors.Forbidden(403, "no")),
    ("the API server fails", FakeClient(), errors.ServerError(500, "down")),
    ("the CA Secret is not base64", FakeClient({"data": {"ca.crt": "!!"}}), None),
    ("the CA key is not a key", FakeClient(bad_secret(**{"ca.crt": good_cert(),
                                                         "ca.key": b"junk"})), None),
    ("the CA key is encrypted", FakeClient(bad_secret(**{"ca.crt": good_cert(),
                                                        "ca.key": encrypted_key()})), None),
]  # fmt: skip


async def spin(condition: Any, rounds: int = 200) -> None:
    for _ in range(rounds):
        if condition():
            return
        await asyncio.sleep(0.01)


def serving(running: servingcerts.Running) -> bool:
    return running.serving


@pytest.mark.parametrize(("what", "client", "fail"), BROKEN, ids=[b[0] for b in BROKEN])
async def test_a_failing_admission_start_is_retried_without_stopping_or_souring_the_process(
    what: str, client: FakeClient, fail: Exception | None
) -> None:
    clock, sup = FakeClock(), Supervisor(unhealthy_after=1)
    client.fail = fail
    running = servingcerts.start(client, Options(), settings(), clock, sup)  # type: ignore[arg-type]
    for attempt in range(1, 4):
        await spin(lambda a=attempt: running.failures >= a)
        assert running.failures == attempt, what
        clock.advance(120)
    assert not serving(running)
    assert sup.unhealthy() == [], what
    client.fail, client.secret = None, None  # fixed: the CA is made afresh
    clock.advance(120)
    await spin(lambda: running.serving)
    try:
        assert serving(running), what
        assert running.server.port != 0
    finally:
        await running.server.stop()
        await sup.close()


async def test_a_caBundle_emptied_by_a_replace_is_patched_again_at_the_next_check() -> None:
    client = FakeClient()
    keeper = servingcerts.CertKeeper(client, settings(), FakeClock())  # type: ignore[arg-type]
    await keeper.refresh()
    bundle = client.hook["webhooks"][0]["clientConfig"]["caBundle"]
    assert bundle
    client.hook = {"webhooks": [{"name": "w", "clientConfig": {}}]}  # kubectl replace
    await keeper.refresh()
    assert client.hook["webhooks"][0]["clientConfig"].get("caBundle") == bundle
    assert client.patches == 2


BUSY = b'{"response":{"uid":"","allowed":true}}'


class Recorder:
    def __init__(self) -> None:
        self.parsed: list[int] = []
        self.gate: asyncio.Event | None = None

    def parse(self, body: bytes) -> int:
        self.parsed.append(len(body))
        return len(body)

    async def respond(self, n: int) -> bytes:
        if self.gate is not None:
            await self.gate.wait()
        return json.dumps({"response": {"uid": "u", "allowed": True, "n": n}}).encode()


async def test_a_review_announced_over_the_cap_is_admitted_unchanged_and_never_parsed() -> None:
    rec = Recorder()
    app = admitserving.build_admission_app(rec.parse, rec.respond, 1024, BUSY)
    async with TestClient(TestServer(app, host="127.0.0.1")) as http:
        resp = await http.post(admitserving.PATH, data=b"x" * 4096)
        assert resp.status == 200
        assert await resp.read() == BUSY
        ok = await http.post(admitserving.PATH, data=b"x" * 10)
        assert json.loads(await ok.read())["response"]["n"] == 10
    assert rec.parsed == [10]
