"""runtime.admission: the Admitter looks up what a workload references and answers with the
controller's hashes, or admits unchanged with a reason; it never raises and never leaks a
Secret's hash unless hashes are keyed."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import msgspec
import pytest

from kube_reloader.core import hashing
from kube_reloader.kube import errors
from kube_reloader.kube.paging import ObjectList
from kube_reloader.runtime import admission
from kube_reloader.runtime.admission import Admitter
from kube_reloader.runtime.options import Options
from tests import builders
from tests.unit.runtime.fakes import FakeClock

KEY = b"k" * 32


class FakeClient:
    """LIST by name of the objects given, after `delay` seconds, or raising `fail`."""

    def __init__(
        self, objects: list[dict[str, Any]], delay: float = 0.0, fail: Exception | None = None
    ) -> None:
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.delay, self.fail = delay, fail
        self.calls: list[tuple[str, str, str]] = []

    async def list(self, resource: Any, **kw: Any) -> ObjectList[Any]:
        name = kw["field_selector"].removeprefix("metadata.name=")
        self.calls.append((resource.kind, kw["namespace"], name))
        await asyncio.sleep(self.delay)
        if self.fail is not None:
            raise self.fail
        obj = self.objects.get((resource.kind, name))
        items = [] if obj is None else [msgspec.json.decode(json.dumps(obj), type=kw["type"])]
        return ObjectList(items, "1")


def cm(data: dict[str, str]) -> dict[str, Any]:
    return builders.configmap("cfg", "ns", data)


def secret(data: dict[str, str]) -> dict[str, Any]:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "sec", "namespace": "ns"},
            "data": encoded}  # fmt: skip


def review(obj: dict[str, Any], operation: str = "CREATE", old: Any = None) -> bytes:
    request = {"uid": "u", "operation": operation, "namespace": "ns", "object": obj,
               "oldObject": old}  # fmt: skip
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def workload() -> dict[str, Any]:
    return builders.auto_deployment("w", "ns", configmaps=("cfg",), secrets=("sec",))


async def answer(client: FakeClient, body: bytes, **options: Any) -> dict[str, str]:
    """The env the answer sets on the first container (name -> value)."""
    opts = Options(namespaces=("ns",), **options)
    admitter = Admitter(client, opts, FakeClock(), deadline=0.5)  # type: ignore[arg-type]
    doc = json.loads(await admitter.answer(body))["response"]
    assert doc["allowed"] is True
    if "patch" not in doc:
        return {}
    ops = json.loads(base64.b64decode(doc["patch"]))
    env = next(op["value"] for op in ops if op["path"].endswith("/env"))
    return {e["name"]: e["value"] for e in env}


async def test_a_new_workload_gets_its_configmaps_hash_and_not_its_secrets_without_a_key() -> None:
    client = FakeClient([cm({"v": "1"}), secret({"p": "1234"})])
    env = await answer(client, review(workload()))
    assert env == {"STAKATER_CFG_CONFIGMAP": hashing.configmap_hash({"v": "1"})}
    assert ("Secret", "ns", "sec") not in client.calls


async def test_with_keyed_hashes_the_secret_is_looked_up_and_its_hmac_written() -> None:
    client = FakeClient([cm({"v": "1"}), secret({"p": "1234"})])
    env = await answer(client, review(workload()), hash_key=KEY)
    assert env == {
        "STAKATER_CFG_CONFIGMAP": hashing.configmap_hash({"v": "1"}, key=KEY),
        "STAKATER_SEC_SECRET": hashing.secret_hash({"p": b"1234"}, key=KEY),
    }


UNCHANGED = [
    ("an update that leaves the template alone", FakeClient([cm({"v": "1"})]), "UPDATE", False),
    ("a lookup slower than the deadline", FakeClient([cm({"v": "1"})], delay=5), "CREATE", True),
    ("a failed lookup", FakeClient([], fail=errors.KubeError("boom")), "CREATE", True),
    ("a reference that does not exist", FakeClient([]), "CREATE", True),
]


@pytest.mark.parametrize(
    ("what", "client", "op", "looked"), UNCHANGED, ids=[u[0] for u in UNCHANGED]
)
async def test_it_is_admitted_unchanged_after(
    what: str, client: FakeClient, op: str, looked: bool
) -> None:
    old = workload() if op == "UPDATE" else None
    assert await answer(client, review(workload(), op, old)) == {}, what
    assert bool(client.calls) is looked


async def test_a_namespace_not_watched_costs_no_lookup() -> None:
    client = FakeClient([cm({"v": "1"})])
    obj = builders.auto_deployment("w", "other", configmaps=("cfg",))
    body = review(obj).replace(b'"namespace": "ns"', b'"namespace": "other"')
    assert await answer(client, body) == {}
    assert client.calls == []


async def test_garbage_is_allowed_without_a_patch() -> None:
    assert await answer(FakeClient([]), b"\x00garbage") == {}


async def test_a_flood_of_reviews_looks_up_at_most_the_cap_at_once() -> None:
    client = FakeClient([cm({"v": "1"})], delay=0.2)
    admitter = Admitter(client, Options(namespaces=("ns",)), FakeClock(), deadline=2)  # type: ignore[arg-type]
    n = admission.MAX_IN_FLIGHT + 3
    answers = await asyncio.gather(*(admitter.answer(review(workload())) for _ in range(n)))
    patched = sum("patch" in json.loads(a)["response"] for a in answers)
    assert patched == admission.MAX_IN_FLIGHT
    assert len(client.calls) == admission.MAX_IN_FLIGHT
