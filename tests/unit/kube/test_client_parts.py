"""The client by composition: `Client` owns a transport, a pager and a watcher that send through
it, and the pager's LIST logic runs against a transport that answers from a script (no HTTP:
the wire is `test_client_http`'s)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import msgspec
import pytest

from kube_reloader.kube import config, credentials, errors, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.paging import Pager
from kube_reloader.kube.streams import Watcher
from kube_reloader.kube.transport import RawObject, Transport

CONN = config.ConnectionConfig(
    server="https://kube.invalid:6443",
    credentials=credentials.StaticCredentials(credentials.AuthState(token="t")),
)

Answer = dict[str, Any] | errors.ApiError


class ScriptedTransport(Transport):
    """A transport whose `request` answers from a script (in order, the last one repeated)
    and records each request's method, path and query; decoding is the real one."""

    def __init__(self, *answers: Answer) -> None:
        super().__init__(CONN)
        self.answers = list(answers)
        self.sent: list[tuple[str, str, dict[str, str]]] = []

    async def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        retry: bool = True,
    ) -> bytes:
        self.sent.append((method, path, dict(params or {})))
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, errors.ApiError):
            raise answer
        return msgspec.json.encode(answer)


def page(rv: str, *names: str, token: str = "") -> dict[str, Any]:
    meta = {"resourceVersion": rv, **({"continue": token} if token else {})}
    return {"metadata": meta, "items": [{"metadata": {"name": n}} for n in names]}


def names(items: list[Any]) -> list[str]:
    return [i["metadata"]["name"] for i in items]


EXPIRED = errors.Gone(410, "continue token expired")


async def test_a_client_owns_one_transport_that_its_pager_and_watcher_share() -> None:
    async with Client(CONN, user_agent="parts-test", max_connections=3) as c:
        assert isinstance(c.pager, Pager)
        assert isinstance(c.watcher, Watcher)
        assert c.pager.transport is c.transport
        assert c.watcher.transport is c.transport
        assert (c.config, c.host, c.observer) == (CONN, "kube.invalid:6443", None)
        assert c.pool is c.transport.pool
        assert (c.pool.limit, c.stream_pool.limit) == (3, 0)
        pools = (c.pool, c.stream_pool)
    assert all(p.closed for p in pools), "closing the client closes its transport"


async def test_a_client_over_a_given_transport_sends_every_verb_through_it() -> None:
    transport = ScriptedTransport({"metadata": {"name": "cm"}}, page("7", "a"))
    c = Client.over(transport)
    assert (c.transport, c.pager.transport, c.watcher.transport) == (transport,) * 3
    assert await c.get(resources.CONFIGMAPS, "cm", namespace="ns") == {"metadata": {"name": "cm"}}
    listed = await c.list(resources.CONFIGMAPS, namespace="ns")
    assert (names(listed.items), listed.resource_version) == (["a"], "7")
    assert [(m, p) for m, p, _ in transport.sent] == [
        ("GET", "/api/v1/namespaces/ns/configmaps/cm"),
        ("GET", "/api/v1/namespaces/ns/configmaps"),
    ]


async def test_the_pager_follows_a_continue_token_to_the_second_page() -> None:
    transport = ScriptedTransport(page("10", "a", "b", token="tok"), page("10", "c"))
    listed = await Pager(transport).list(resources.SECRETS, namespace="ns", limit=2)
    assert names(listed.items) == ["a", "b", "c"]
    assert listed.resource_version == "10"
    first, second = (params for _, _, params in transport.sent)
    assert first == {"limit": "2"}
    assert second == {"limit": "2", "continue": "tok"}


async def test_an_expired_continue_token_restarts_the_list_from_its_first_page_once() -> None:
    transport = ScriptedTransport(
        page("1", "a", token="t1"), EXPIRED, page("2", "a", token="t2"), page("2", "b")
    )
    listed = await Pager(transport).list_reduced(
        resources.SECRETS, type=RawObject, reduce=lambda item: item["metadata"]["name"].upper()
    )
    assert listed.items == ["A", "B"], "nothing of the abandoned first attempt is kept"
    assert listed.resource_version == "2"
    continues = [params.get("continue") for _, _, params in transport.sent]
    assert continues == [None, "t1", None, "t2"]


async def test_a_continue_token_that_expires_twice_is_raised_as_gone() -> None:
    transport = ScriptedTransport(page("1", "a", token="t1"), EXPIRED, page("2", "a", token="t2"))
    transport.answers.append(EXPIRED)
    with pytest.raises(errors.Gone, match="continue token expired"):
        await Pager(transport).list(resources.SECRETS)
    assert len(transport.sent) == 4


async def test_a_page_that_does_not_decode_is_a_kube_error_naming_the_list() -> None:
    transport = ScriptedTransport({"metadata": {"resourceVersion": 5}})
    with pytest.raises(errors.KubeError, match="LIST secrets: cannot decode"):
        await Pager(transport).list(resources.SECRETS)
