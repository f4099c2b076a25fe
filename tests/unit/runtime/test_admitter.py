"""runtime.admitter: the Admitter looks up what a workload references and answers with the
controller's hashes, or admits unchanged with a reason; it never raises and never leaks a
Secret's hash unless hashes are keyed. Unauthenticated (no `--admission-client-ca`), it
answers only for a namespace that exists and is watched, never with key-level hashes, and
computes digests only for ConfigMaps the object references by name. And the flags of it."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import msgspec
import pytest

from kube_reloader.cli.flags import FlagError, parse
from kube_reloader.core import admitting, hashing, scoping, strategies
from kube_reloader.core.planning import Config
from kube_reloader.kube import admissioncerts as pki
from kube_reloader.kube import errors
from kube_reloader.kube.paging import ObjectList
from kube_reloader.kube.projections import Object, ObjectMeta
from kube_reloader.runtime import admitter as room
from kube_reloader.runtime.admitter import Admitter
from kube_reloader.runtime.options import Options
from tests import builders
from tests.unit.runtime.fakes import FakeClock

KEY = b"k" * 32


class FakeClient:
    """LIST by name of the objects given, after `delay` seconds, or raising `fail`; the
    namespaces in `namespaces` exist (LISTed at once, never failing)."""

    def __init__(
        self, objects: list[dict[str, Any]], delay: float = 0.0, fail: Exception | None = None,
        namespaces: tuple[str, ...] = ("ns",),
    ) -> None:  # fmt: skip
        self.objects = {(o["kind"], o["metadata"]["name"]): o for o in objects}
        self.delay, self.fail, self.namespaces = delay, fail, namespaces
        self.calls: list[tuple[str, str, str]] = []
        self.running = self.most = 0  # ConfigMap LISTs at once

    async def list(self, resource: Any, **kw: Any) -> ObjectList[Any]:
        name = kw["field_selector"].removeprefix("metadata.name=")
        self.calls.append((resource.kind, kw.get("namespace") or "", name))
        if resource.kind == "Namespace":
            found = name in self.namespaces
            return ObjectList([Object(ObjectMeta(name=name))] if found else [], "1")
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(self.delay)
        finally:
            self.running -= 1
        if self.fail is not None:
            raise self.fail
        obj = self.objects.get((resource.kind, name))
        items = [] if obj is None else [msgspec.json.decode(json.dumps(obj), type=kw["type"])]
        return ObjectList(items, "1")

    def looked_up(self, kind: str = "ConfigMap") -> tuple[str, ...]:
        return tuple(name for k, _, name in self.calls if k == kind)


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


async def test_a_flood_of_reviews_looks_up_at_most_the_cap_at_once_and_the_rest_wait_their_turn(
) -> None:  # fmt: skip
    client = FakeClient([cm({"v": "1"})], delay=0.2)
    admitter = Admitter(client, Options(namespaces=("ns",)), FakeClock(), deadline=2)  # type: ignore[arg-type]
    n = room.MAX_IN_FLIGHT + 3
    answers = await asyncio.gather(*(admitter.answer(review(workload())) for _ in range(n)))
    patched = sum("patch" in json.loads(a)["response"] for a in answers)
    assert patched == n, "before: the 3 beyond the cap were admitted unchanged at once"
    assert client.most == room.MAX_IN_FLIGHT


async def test_a_review_waits_for_a_lookup_turn_no_longer_than_its_budget(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient([cm({"v": "1"})], delay=0.5)
    admitter = Admitter(client, Options(namespaces=("ns",)), FakeClock(), deadline=0.2)  # type: ignore[arg-type]
    caplog.set_level(logging.INFO)
    n = room.MAX_IN_FLIGHT + 1
    answers = await asyncio.gather(*(admitter.answer(review(workload())) for _ in range(n)))
    assert not any("patch" in json.loads(a)["response"] for a in answers)
    assert any(
        "did not finish within 0.2s" in str(getattr(r, "reason", "")) for r in caplog.records
    )
    assert admitter.in_flight == 0


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
    assert room.decode_review(body) == admitting.parse_review(body)
    assert room.decode_review(body).review is not None


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
    parsed = room.decode_review(body)
    assert parsed.review is None, what
    assert parsed.error
    assert "\n" not in parsed.error


# ------------------------------------------- what an unauthenticated caller is answered


def keyed_workload(key: str = "password") -> dict[str, Any]:
    """A Deployment in `reload-scope: keys` consuming one key of ConfigMap cfg."""
    obj = builders.auto_deployment("w", "ns")
    obj["metadata"]["annotations"]["kube-reloader.io/reload-scope"] = "keys"
    ref = {"configMapKeyRef": {"name": "cfg", "key": key}}
    obj["spec"]["template"]["spec"]["containers"][0]["env"] = [{"name": "P", "valueFrom": ref}]
    return obj


async def reason_of(admitter: Admitter, body: bytes, caplog: pytest.LogCaptureFixture) -> str:
    caplog.clear()
    caplog.set_level(logging.INFO)
    doc = json.loads(await admitter.answer(body))["response"]
    assert "patch" not in doc
    return str(caplog.records[-1].reason)  # type: ignore[attr-defined]


async def test_unauthenticated_a_key_level_workload_is_admitted_unchanged_and_nothing_looked_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient([cm({"password": "hunter2", "other": "x"})])
    admitter = Admitter(client, Options(namespaces=("ns",)), FakeClock(), 0.5)  # type: ignore[arg-type]
    assert await reason_of(admitter, review(keyed_workload()), caplog) == room.NO_KEYS
    assert room.NO_KEYS == ("key-level hashes are written only for an authenticated API "
                                 "server (--admission-client-ca)")  # fmt: skip
    assert client.calls == []


async def test_under_reload_scope_keys_by_default_too_no_key_level_hash_is_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = FakeClient([cm({"password": "hunter2"})])
    obj = keyed_workload()
    del obj["metadata"]["annotations"]["kube-reloader.io/reload-scope"]
    opts = Options(namespaces=("ns",), plan=Config(scope=scoping.Scope.KEYS))
    admitter = Admitter(client, opts, FakeClock(), 0.5)  # type: ignore[arg-type]
    assert await reason_of(admitter, review(obj), caplog) == room.NO_KEYS


async def written_env(client: FakeClient, obj: dict[str, Any]) -> str | None:
    admitter = Admitter(client, Options(), FakeClock(), 0.5, authenticated=True)  # type: ignore[arg-type]
    doc = json.loads(await admitter.answer(review(obj)))["response"]
    ops = json.loads(base64.b64decode(doc["patch"]))
    values = [
        v for op in ops for v in (op["value"] if isinstance(op["value"], list) else [op["value"]])
    ]
    return next((v["value"] for v in values if v.get("name") == "STAKATER_CFG_CONFIGMAP"), None)


async def test_authenticated_a_key_level_workload_gets_the_hash_of_the_keys_it_consumes() -> None:
    client = FakeClient([cm({"password": "hunter2", "other": "x"})])
    written = await written_env(client, keyed_workload())
    assert written is not None
    assert written != hashing.configmap_hash({"password": "hunter2", "other": "x"})
    other = FakeClient([cm({"password": "hunter2", "other": "changed"})])
    assert await written_env(other, keyed_workload()) == written, "only the consumed key counts"
    assert client.looked_up("Namespace") == (), "the API server only sends real namespaces"


@pytest.mark.parametrize("options", [Options(), Options(namespace_selector="team=a")])
async def test_unauthenticated_a_namespace_that_does_not_exist_is_never_looked_into(
    options: Options, caplog: pytest.LogCaptureFixture
) -> None:
    client = FakeClient([cm({"v": "1"})], namespaces=())
    clock = FakeClock()
    admitter = Admitter(client, options, clock, 0.5, lambda ns: True)  # type: ignore[arg-type]
    assert await reason_of(admitter, review(workload()), caplog) == "namespace ns does not exist"
    assert await reason_of(admitter, review(workload()), caplog) == "namespace ns does not exist"
    assert client.calls == [("Namespace", "", "ns")], "one LIST, remembered"
    client.namespaces = ("ns",)
    clock.advance(room.KnownNamespaces.MISS_TTL)
    assert "patch" in json.loads(await admitter.answer(review(workload())))["response"]
    assert client.looked_up() == ("cfg",)


async def test_unauthenticated_a_namespace_that_exists_is_looked_up_once_a_minute() -> None:
    client = FakeClient([cm({"v": "1"})])
    clock = FakeClock()
    admitter = Admitter(client, Options(), clock, 0.5)  # type: ignore[arg-type]
    for _ in range(3):
        assert "patch" in json.loads(await admitter.answer(review(workload())))["response"]
    assert client.looked_up("Namespace") == ("ns",)
    clock.advance(room.KnownNamespaces.TTL)
    await admitter.answer(review(workload()))
    assert client.looked_up("Namespace") == ("ns", "ns")


async def test_digests_are_computed_only_for_configmaps_the_object_names_and_only_when_keyed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[tuple[str, bool]] = []
    real = room.configmap_entry

    def recording(obj: Any, *args: Any, per_key: bool = False) -> Any:
        seen.append((obj.metadata.name, per_key))
        return real(obj, *args, per_key=per_key)

    monkeypatch.setattr(room, "configmap_entry", recording)
    other = builders.configmap("other", "ns", {"password": "hunter2"})
    client = FakeClient([cm({"v": "1"}), other])
    admitter = Admitter(client, Options(namespaces=("ns",)), FakeClock(), 0.5)  # type: ignore[arg-type]
    await admitter.answer(review(workload()))
    assert client.looked_up() == ("cfg",)
    assert seen == [("cfg", False)], "object scope: no per-key digest at all"
    admitter.authenticated = True
    await admitter.answer(review(keyed_workload()))
    assert seen[1:] == [("cfg", True)]


async def test_a_reference_that_is_not_a_valid_name_is_never_put_into_a_field_selector() -> None:
    obj = builders.auto_deployment("w", "ns", configmaps=("cfg,metadata.name!=x", "Bad_Name"))
    client = FakeClient([cm({"v": "1"})])
    assert await answer(client, review(obj)) == {}
    assert client.calls == []


def test_a_request_naming_no_valid_namespace_is_not_a_review() -> None:
    body = review(workload()).replace(b'"namespace": "ns"', b'"namespace": "ns,x"', 1)
    parsed = room.decode_review(body)
    assert parsed.review is None
    assert parsed.error == "the request's namespace is not a namespace name"


# ----------------------------------------------------------------------------- the flags


def test_a_client_ca_makes_the_webhook_authenticate_its_callers(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.crt"
    bundle.write_bytes(pki.new_ca(1_700_000_000, 3600).cert_pem)
    settings = parse(
        ["--admission-addr=:9443", f"--admission-client-ca={bundle}",
         "--admission-client-names=kube-apiserver, apiserver-2"],
        env={"POD_NAMESPACE": "kube-system"},
    ).admission  # fmt: skip
    assert settings is not None
    assert settings.authenticated
    assert settings.client_names == ("kube-apiserver", "apiserver-2")
    plain = parse(["--admission-addr=:9443"], env={"POD_NAMESPACE": "x"}).admission
    assert plain is not None
    assert not plain.authenticated


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (["--admission-client-names=kube-apiserver"], "needs --admission-client-ca"),
        (["--admission-client-ca=/nonexistent/ca.crt"], "not a readable CA bundle"),
        (["--admission-client-ca=EMPTY"], "not a readable CA bundle"),
    ],
)
def test_client_authentication_flags_that_cannot_work_stop_the_start(
    tmp_path: Path, args: list[str], problem: str
) -> None:
    empty = tmp_path / "empty.crt"
    empty.write_text("no certificate here\n")
    argv = ["--admission-addr=:9443", *(a.replace("EMPTY", str(empty)) for a in args)]
    with pytest.raises(FlagError, match=problem):
        parse(argv, env={"POD_NAMESPACE": "kube-system"})
