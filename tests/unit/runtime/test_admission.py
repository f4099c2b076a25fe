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

from kube_reloader.core import admitting, hashing, strategies
from kube_reloader.core.planning import Config
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


async def test_even_with_keyed_hashes_a_secret_is_never_looked_up() -> None:
    client = FakeClient([cm({"v": "1"}), secret({"p": "1234"})])
    env = await answer(client, review(workload()), hash_key=KEY)
    assert env == {"STAKATER_CFG_CONFIGMAP": hashing.configmap_hash({"v": "1"}, key=KEY)}
    assert [c[0] for c in client.calls] == ["ConfigMap"]


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


def forged(request_ns: str, object_ns: str | None) -> bytes:
    obj = builders.auto_deployment("w", "ns", configmaps=("cfg",))
    if object_ns is None:
        del obj["metadata"]["namespace"]
    else:
        obj["metadata"]["namespace"] = object_ns
    doc = json.loads(review(obj))
    doc["request"]["namespace"] = request_ns
    return json.dumps(doc).encode()


async def test_a_review_whose_object_names_another_namespace_costs_no_lookup() -> None:
    client = FakeClient([cm({"v": "1"})])
    assert await answer(client, forged("ns", "victim")) == {}
    assert client.calls == []
    assert await answer(client, forged("ns", None)) != {}  # no namespace of its own: the request's


async def test_a_namespace_the_controller_does_not_select_costs_no_lookup() -> None:
    client = FakeClient([cm({"v": "1"})])
    admitter = Admitter(client, Options(), FakeClock(), 0.5, lambda ns: ns == "selected")  # type: ignore[arg-type]
    doc = json.loads(await admitter.answer(review(workload())))["response"]
    assert "patch" not in doc
    assert client.calls == []


TIMED = [
    ("the annotations strategy", Config(strategy=strategies.Strategy.ANNOTATIONS)),
    ("--compat=v2", Config(compat=strategies.Compat.V2)),
]


@pytest.mark.parametrize(("what", "plan"), TIMED, ids=[t[0] for t in TIMED])
async def test_a_value_carrying_the_reloads_time_is_left_to_the_controller_under(
    what: str, plan: Config
) -> None:
    client = FakeClient([cm({"v": "1"})])
    assert await answer(client, review(workload()), plan=plan) == {}, what
    assert client.calls == []


async def test_an_object_whose_metadata_is_a_list_is_admitted_unchanged() -> None:
    obj = workload()
    obj["metadata"] = ["name", "w"]
    assert await answer(FakeClient([cm({"v": "1"})]), review(obj)) == {}


def test_msgspec_decoding_reads_a_review_as_the_json_parser_does() -> None:
    old = workload()
    obj = workload()
    obj["spec"]["template"]["metadata"] = {"labels": {"rev": "2"}}
    doc = json.loads(review(obj, "UPDATE", old))
    doc["request"]["userInfo"] = {"username": "x", "groups": ["a"] * 1000}  # skipped
    body = json.dumps(doc).encode()
    assert admission.decode_review(body) == admitting.parse_review(body)
    assert admission.decode_review(body).review is not None


HOSTILE = [
    ("not JSON", b"{nope"),
    ("a list", b"[1,2]"),
    ("a string request", b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview",'
                         b'"request":"x"}'),
    ("nested past the interpreter's limit", b'{"request":{"object":' + b"[" * 5000 + b"]" * 5000
     + b"}}"),
    ("over the cap", b" " * (admitting.MAX_REVIEW_BYTES + 1)),
]  # fmt: skip


@pytest.mark.parametrize(("what", "body"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_msgspec_decoding_of_a_hostile_body_gives_a_one_line_reason(what: str, body: bytes) -> None:
    parsed = admission.decode_review(body)
    assert parsed.review is None, what
    assert parsed.error
    assert "\n" not in parsed.error
