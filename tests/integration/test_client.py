"""The async client against the real kube-apiserver: every verb, every patch type, errors."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import pytest
import yaml

from kube_reloader.kube import config, errors, resources
from kube_reloader.kube.client import Client, PatchType
from kube_reloader.kube.projections import Object
from tests import builders
from tests.harness import bearer_connection, service_account_token
from tests.waiting import eventually, exists

# serial: creates and deletes CustomResourceDefinitions
pytestmark = [pytest.mark.cluster, pytest.mark.serial]


async def create_configmaps(client: Client, namespace: str, name: str, n: int) -> None:
    """Create `n` small ConfigMaps named `name.format(i)`, 32 at a time."""
    sem = asyncio.Semaphore(32)

    async def make(i: int) -> None:
        async with sem:
            await client.create(resources.CONFIGMAPS, builders.configmap(name.format(i), namespace))

    await asyncio.gather(*(make(i) for i in range(n)))


async def page_sizes(
    client: Client, resource: resources.Resource, namespace: str, **paging: int
) -> list[int]:
    """How many items each page of a LIST (`limit`, `page_bytes`) brought."""
    return [
        len(page.items or ())
        async for page in client.list_pages(resource, namespace=namespace, type=Object, **paging)
    ]


async def test_create_get_and_delete_round_trip_a_configmap(client: Client, namespace: str) -> None:
    created = await client.create(
        resources.CONFIGMAPS, builders.configmap("cm", namespace, {"a": "1"})
    )
    assert created["metadata"]["uid"]
    got = await client.get(resources.CONFIGMAPS, "cm", namespace=namespace)
    assert got["data"] == {"a": "1"}
    await client.delete(resources.CONFIGMAPS, "cm", namespace=namespace)
    with pytest.raises(errors.NotFound, match='configmaps "cm" not found'):
        await client.get(resources.CONFIGMAPS, "cm", namespace=namespace)


async def test_get_decodes_straight_into_a_typed_projection(client: Client, namespace: str) -> None:
    await client.create(
        resources.CONFIGMAPS,
        builders.configmap("typed", namespace, {"big": "x" * 1000}, labels={"l": "v"}),
    )
    obj = await client.get(resources.CONFIGMAPS, "typed", namespace=namespace, type=Object)
    assert isinstance(obj, Object)
    assert (obj.metadata.name, obj.metadata.namespace, obj.metadata.labels) == (
        "typed",
        namespace,
        {"l": "v"},
    )
    assert not hasattr(obj, "data")


async def test_list_paginates_over_more_than_five_hundred_objects(
    client: Client, namespace: str
) -> None:
    await create_configmaps(client, namespace, "cm-{:04d}", 520)
    pages = await page_sizes(client, resources.CONFIGMAPS, namespace, limit=200)
    # 520 ours + kube-root-ca.crt published by kube-controller-manager (may lag behind)
    assert pages[:2] == [200, 200]
    assert len(pages) == 3
    listed = await client.list(resources.CONFIGMAPS, namespace=namespace, limit=100, type=Object)
    names = {o.metadata.name for o in listed.items}
    assert {f"cm-{i:04d}" for i in range(520)} <= names
    assert listed.resource_version.isdigit()


async def test_list_reduced_reduces_each_page_before_fetching_the_next(
    connection: config.ConnectionConfig, client: Client, namespace: str
) -> None:
    for i in range(5):
        await client.create(resources.CONFIGMAPS, builders.configmap(f"r-{i}", namespace))

    class Count:
        responses = 0

        def api_request(self, method: str, code: str, host: str) -> None:
            self.responses += 1

        def api_request_done(self, verb: str, host: str, seconds: float) -> None:
            pass

    count = Count()
    seen_at: list[int] = []

    def reduce(obj: Object) -> str:
        seen_at.append(count.responses)
        return obj.metadata.name

    async with Client(connection, user_agent="kube-reloader-tests", observer=count) as c:
        listed = await c.list_reduced(
            resources.CONFIGMAPS,
            namespace=namespace,
            limit=2,
            type=Object,
            reduce=reduce,
        )
    assert {f"r-{i}" for i in range(5)} <= set(listed.items)
    # Items of page n are reduced once n answers have arrived, not after the last page.
    assert seen_at == [i // 2 + 1 for i in range(len(seen_at))]
    assert listed.resource_version.isdigit()


async def test_pages_sized_by_bytes_hold_fewer_large_objects(
    client: Client, namespace: str
) -> None:
    for i in range(8):  # about 27 KiB each once base64-encoded in the answer
        await client.create(
            resources.SECRETS,
            builders.secret(f"big-{i}", namespace, {"blob": f"{i}" * 20_000}),
        )
    pages = await page_sizes(client, resources.SECRETS, namespace, limit=4, page_bytes=64 * 1024)
    # 4 at first (the cap), then as many as fit in 64 KiB judging by that page: 2
    assert pages == [4, 2, 2]


async def test_pages_sized_by_bytes_grow_to_the_cap_for_small_objects(
    client: Client, namespace: str
) -> None:
    await create_configmaps(client, namespace, "s-{:03d}", 130)
    pages = await page_sizes(
        client, resources.CONFIGMAPS, namespace, limit=60, page_bytes=1024 * 1024
    )
    # a first page of FIRST_PAGE_LIMIT (50), then the cap (60); kube-root-ca.crt may lag
    assert pages[:2] == [50, 60]
    assert sum(pages) in (130, 131)


async def test_list_filters_by_label_selector(client: Client, namespace: str) -> None:
    for i, team in enumerate(["a", "b", "a"]):
        await client.create(
            resources.CONFIGMAPS, builders.configmap(f"l{i}", namespace, labels={"team": team})
        )
    listed = await client.list(resources.CONFIGMAPS, namespace=namespace, label_selector="team=a")
    assert sorted(o["metadata"]["name"] for o in listed.items) == ["l0", "l2"]


@pytest.mark.parametrize(
    ("patch_type", "patch", "expected_env"),
    [
        (
            PatchType.STRATEGIC,
            {"spec": {"template": {"spec": {"containers": [{"name": "app", "env": [{"name": "X", "value": "1"}]}]}}}},
            [{"name": "X", "value": "1"}],
        ),
        (
            PatchType.MERGE,
            {"spec": {"template": {"metadata": {"annotations": {"k": "v"}}}}},
            None,
        ),
        (
            PatchType.JSON,
            [{"op": "add", "path": "/spec/template/spec/containers/0/env", "value": [{"name": "J", "value": "2"}]}],
            [{"name": "J", "value": "2"}],
        ),
    ],
    ids=["strategic merge", "json merge", "json patch"],
)  # fmt: skip
async def test_patch_applies_each_patch_type_with_a_field_manager(
    client: Client,
    namespace: str,
    patch_type: PatchType,
    patch: object,
    expected_env: object,
) -> None:
    await client.create(resources.DEPLOYMENTS, builders.deployment("web", namespace))
    out = await client.patch(
        resources.DEPLOYMENTS,
        "web",
        patch,  # type: ignore[arg-type]
        namespace=namespace,
        patch_type=patch_type,
        field_manager="Reloader",
    )
    container = out["spec"]["template"]["spec"]["containers"][0]
    assert container.get("env") == expected_env
    if patch_type is PatchType.MERGE:
        assert out["spec"]["template"]["metadata"]["annotations"] == {"k": "v"}
    managers = {m["manager"] for m in out["metadata"]["managedFields"]}
    assert "Reloader" in managers


async def test_server_side_apply_patch_is_supported(client: Client, namespace: str) -> None:
    body = builders.configmap("applied", namespace, {"k": "v"})
    out = await client.patch(
        resources.CONFIGMAPS,
        "applied",
        body,
        namespace=namespace,
        patch_type=PatchType.APPLY,
        field_manager="kube-reloader-tests",
        force=True,
    )
    assert out["data"] == {"k": "v"}


async def test_strategic_merge_patch_on_a_custom_resource_is_unsupported_media_type(
    client: Client, namespace: str
) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets{namespace.replace('-', '')}.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {
                "plural": f"widgets{namespace.replace('-', '')}",
                "singular": f"widget{namespace.replace('-', '')}",
                "kind": f"Widget{namespace.replace('-', '').capitalize()}",
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }
    await client.create(resources.CUSTOMRESOURCEDEFINITIONS, crd)
    res = resources.Resource(
        "example.com", "v1", crd["spec"]["names"]["plural"], crd["spec"]["names"]["kind"]
    )
    try:
        body = {
            "apiVersion": "example.com/v1",
            "kind": res.kind,
            "metadata": {"name": "w"},
            "spec": {"a": 1},
        }
        for _ in range(100):  # the new resource is served a moment after the CRD is created
            try:
                await client.create(res, body, namespace=namespace)
                break
            except errors.NotFound:
                await asyncio.sleep(0.1)
        with pytest.raises(errors.UnsupportedMediaType):
            await client.patch(res, "w", {"spec": {"a": 2}}, namespace=namespace)
        out = await client.patch(
            res, "w", {"spec": {"a": 2}}, namespace=namespace, patch_type=PatchType.MERGE
        )
        assert out["spec"] == {"a": 2}
    finally:
        await client.delete(resources.CUSTOMRESOURCEDEFINITIONS, crd["metadata"]["name"])


async def test_update_with_a_stale_resource_version_raises_conflict(
    client: Client, namespace: str
) -> None:
    created = await client.create(
        resources.CONFIGMAPS, builders.configmap("c", namespace, {"v": "1"})
    )
    await client.patch(
        resources.CONFIGMAPS,
        "c",
        {"data": {"v": "2"}},
        namespace=namespace,
        patch_type=PatchType.MERGE,
    )
    created["data"] = {"v": "3"}
    with pytest.raises(errors.Conflict, match="the object has been modified"):
        await client.update(resources.CONFIGMAPS, created)
    fresh = await client.get(resources.CONFIGMAPS, "c", namespace=namespace)
    fresh["data"] = {"v": "3"}
    updated = await client.update(resources.CONFIGMAPS, fresh)
    assert updated["data"] == {"v": "3"}


async def test_create_of_an_existing_name_raises_already_exists(
    client: Client, namespace: str
) -> None:
    await client.create(resources.SECRETS, builders.secret("s", namespace, {"k": "v"}))
    with pytest.raises(errors.AlreadyExists) as info:
        await client.create(resources.SECRETS, builders.secret("s", namespace, {"k": "v"}))
    assert info.value.code == 409
    assert not isinstance(info.value, errors.Conflict)


async def test_invalid_object_raises_invalid_with_the_api_message(
    client: Client, namespace: str
) -> None:
    with pytest.raises(errors.Invalid, match="Invalid value"):
        await client.create(resources.CONFIGMAPS, builders.configmap("Not_A_DNS_Name", namespace))


async def test_delete_with_background_propagation_removes_a_job_and_its_pods(
    client: Client, namespace: str
) -> None:
    await client.create(resources.JOBS, builders.job("once", namespace))

    async def pods() -> list[object]:
        listed = await client.list(
            resources.PODS, namespace=namespace, label_selector="job-name=once"
        )
        return listed.items

    await eventually(pods, what="the Job's pod")
    await client.delete(
        resources.JOBS, "once", namespace=namespace, propagation_policy="Background"
    )

    async def job_gone() -> bool:
        return not await exists(client, resources.JOBS, "once", namespace)

    await eventually(job_gone, what="the Job to be deleted")

    async def pods_gone() -> bool:
        return not await pods()

    await eventually(pods_gone, what="the garbage collector to delete the Job's pods")


async def test_client_certificate_credentials_authenticate(kubeconfig_path: Path) -> None:
    cfg = config.load_kubeconfig([kubeconfig_path], context="kube-reloader-dev-cert")
    async with Client(cfg) as c:
        ns = await c.get(resources.NAMESPACES, "default")
    assert ns["metadata"]["name"] == "default"


async def test_client_certificate_given_as_data_authenticates(
    kubeconfig_path: Path, tmp_path: Path
) -> None:
    pki = kubeconfig_path.parent / "pki"
    server = config.load_kubeconfig([kubeconfig_path]).server

    def b64(name: str) -> str:
        return base64.b64encode((pki / name).read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server, "certificate-authority-data": b64("ca.crt")}}],
        "users": [{"name": "u", "user": {"client-certificate-data": b64("admin.crt"), "client-key-data": b64("admin.key")}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "kube-system"}}],
        "current-context": "x",
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    cfg = config.load_kubeconfig([path])
    assert cfg.namespace == "kube-system"
    async with Client(cfg) as c:
        got = await c.get(resources.NAMESPACES, cfg.namespace)
    assert got["metadata"]["name"] == "kube-system"


async def test_wrong_token_raises_unauthorized(kubeconfig_path: Path) -> None:
    bad = bearer_connection(config.load_kubeconfig([kubeconfig_path]), "not-a-token")
    async with Client(bad) as c:
        with pytest.raises(errors.Unauthorized):
            await c.get(resources.NAMESPACES, "default")


async def test_untrusted_server_certificate_is_refused(kubeconfig_path: Path) -> None:
    good = config.load_kubeconfig([kubeconfig_path])
    other_ca = (kubeconfig_path.parent / "pki" / "admin.crt").read_bytes()  # not a CA
    cfg = config.ConnectionConfig(server=good.server, credentials=good.credentials, ca_pem=other_ca)
    async with Client(cfg) as c:
        with pytest.raises(errors.ConnectionFailed, match="cannot reach"):
            await c.get(resources.NAMESPACES, "default")


async def test_service_account_without_rbac_gets_forbidden(client: Client, namespace: str) -> None:
    await client.create(
        resources.SERVICEACCOUNTS,
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": "nobody", "namespace": namespace},
        },
    )
    token = await service_account_token(client, namespace, "nobody", expiration_seconds=600)
    cfg = bearer_connection(client.config, token)
    async with Client(cfg) as c:
        with pytest.raises(errors.Forbidden, match="cannot list resource"):
            await c.list(resources.SECRETS, namespace=namespace)


class ConnectProxy:
    """A minimal HTTP CONNECT proxy on 127.0.0.1 that counts the tunnels it opens."""

    def __init__(self) -> None:
        self.tunnels: list[str] = []  # the target of each tunnel
        self.auth: list[str] = []  # each CONNECT's Proxy-Authorization
        self._writers: list[asyncio.StreamWriter] = []
        self._server: asyncio.Server | None = None

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._tunnel, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    async def stop(self) -> None:
        for w in self._writers:
            w.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        head = (await reader.readuntil(b"\r\n\r\n")).decode().split("\r\n")
        method, target, _ = head[0].split(" ")
        host, _, port = target.rpartition(":")
        if method != "CONNECT" or host != "127.0.0.1":  # loopback only, never the network
            writer.write(b"HTTP/1.1 403 Forbidden\r\n\r\n")
            writer.close()
            return
        self.tunnels.append(target)
        self.auth += [
            h.split(":", 1)[1].strip() for h in head if h.lower().startswith("proxy-auth")
        ]
        up_reader, up_writer = await asyncio.open_connection(host, int(port))
        self._writers.append(up_writer)
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    try:
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
    except OSError:
        pass
    finally:
        sink.close()


def with_proxy_url(kubeconfig: Path, proxy: str, dst: Path) -> Path:
    """A copy of `kubeconfig` whose clusters all name `proxy` as their `proxy-url`."""
    doc = yaml.safe_load(kubeconfig.read_text())
    for cluster in doc["clusters"]:
        cluster["cluster"]["proxy-url"] = proxy
    dst.write_text(yaml.safe_dump(doc))
    return dst


async def added(c: Client, namespace: str) -> list[str]:
    return [
        ev.object["metadata"]["name"]
        async for ev in c.watch(resources.CONFIGMAPS, namespace=namespace, timeout_seconds=1)
        if ev.type == "ADDED"
    ]


async def test_a_cluster_proxy_url_carries_every_request_and_watch_through_a_connect_tunnel(
    kubeconfig_path: Path, tmp_path: Path, namespace: str
) -> None:
    proxy = ConnectProxy()
    url = (await proxy.start()).replace("http://", "http://tester:s%40cret@")
    try:
        path = with_proxy_url(kubeconfig_path, url, tmp_path / "kubeconfig")
        cfg = config.load_kubeconfig([path], env={"NO_PROXY": "*"})  # proxy-url wins anyway
        server = cfg.server.removeprefix("https://")
        async with Client(cfg) as c:
            await c.create(resources.CONFIGMAPS, builders.configmap("via-proxy", namespace))
            got = await c.get(resources.CONFIGMAPS, "via-proxy", namespace=namespace)
            assert proxy.tunnels == [server], "requests share one tunnel (a pooled connection)"
            # the server ends each watch after a second, once it has sent the ADDED events;
            # the first watch takes over the idle tunnel, the second needs one of its own
            watched = await asyncio.gather(added(c, namespace), added(c, namespace))
        assert got["metadata"]["name"] == "via-proxy"
        assert all("via-proxy" in names for names in watched)
        assert proxy.tunnels == [server, server], "a second stream opens a tunnel of its own"
        assert proxy.auth == ["Basic " + base64.b64encode(b"tester:s@cret").decode()] * 2
    finally:
        await proxy.stop()
