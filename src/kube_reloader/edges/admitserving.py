"""The admission webhook's HTTP edge: `POST /mutate` takes an AdmissionReview and answers
with what `runtime.admitter.Admitter` decided. Served over TLS (`tlsserving`), behind
`runtime.servingcerts.LIMITS`: one review per connection, fewer connections than the probe
listener.

A review goes through two stages, each with slots shared fairly among client addresses
(`core.fairness`: alone, an address never holds every slot of a stage, so another one always
finds room at once; room that frees goes to the address holding the fewest):

* **reading** its body (network-bound; `MAX_BODIES` at once): a body that has not arrived
  `BODY_TIMEOUT` seconds after its headers is dropped (the connection aborted) and its slot
  freed, so senders that announce a body and stall cannot keep the API server's reviews
  unread;
* **answering** it (`MAX_ANSWERING` at once: parsing holds the event loop, and the parsed
  review, up to ~25 times the body's size in Python objects, lives until the answer is
  sent). A review keeps its reading slot until it has an answering slot, so the bodies held
  are bounded too, and a slow sender never holds an answering slot.

A review that finds a stage full waits for its turn, but only within its budget
(`core.admitting.answer_budget`: the API server's own deadline for the call, `?timeout=`,
minus a margin): at the budget it is answered `busy` (allowed, no patch, no uid: the API
server counts it a failed call and, `failurePolicy: Ignore`, admits the object unchanged).
The answering stage can read the budget left (`remaining`). A review announcing more than
`max_bytes` is answered `busy` at once, unread; a chunked body growing past it is refused
while it is read (413)."""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from aiohttp import web

from kube_reloader.core import admitting
from kube_reloader.turns import FairSlots

log = logging.getLogger(__name__)

PATH = "/mutate"
#: bodies being read (or waiting, read, for an answering slot) at once
MAX_BODIES = 8
#: reviews being parsed and answered at once (alone, a client address gets 2 of them)
MAX_ANSWERING = 3
#: seconds for a body to arrive after its headers
BODY_TIMEOUT = 5.0
#: bytes of review parsed on the event loop; a larger one is parsed in a worker thread (a
#: forged 3.5 MiB review of many small objects takes 0.1-0.2 s to decode)
PARSE_ON_LOOP = 256 * 1024

T = TypeVar("T")

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "admission_deadline", default=None
)


def remaining() -> float | None:
    """Seconds left in the budget of the review being answered (None outside a review)."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return None
    return max(0.0, deadline - asyncio.get_running_loop().time())


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class Gates:
    """The two stages' slots, and what became of the reviews that could not have one."""

    reading: FairSlots = field(default_factory=lambda: FairSlots(MAX_BODIES))
    answering: FairSlots = field(default_factory=lambda: FairSlots(MAX_ANSWERING))
    #: answered `busy` unread: announced too large, or no slot within the budget
    unread: int = 0
    #: bodies that did not arrive within `BODY_TIMEOUT`
    dropped: int = 0


def build_admission_app(
    parse: Callable[[bytes], T],
    respond: Callable[[T], Awaitable[bytes]],
    max_bytes: int,
    busy: bytes,
    gates: Gates | None = None,
) -> web.Application:
    edge = _Edge(parse, respond, max_bytes, busy, gates or Gates())
    app = web.Application(client_max_size=max_bytes)
    app.router.add_post(PATH, edge.mutate)
    return app


def _closed(body: bytes, status: int = 200) -> web.Response:
    response = web.Response(body=body, status=status, content_type="application/json")
    # one review per connection: the edge counts a body as the next request's head, so a
    # kept-alive connection would be timed out after its body (see `serving.Limits`)
    response.force_close()
    return response


class _Edge(Generic[T]):
    def __init__(
        self,
        parse: Callable[[bytes], T],
        respond: Callable[[T], Awaitable[bytes]],
        max_bytes: int,
        busy: bytes,
        gates: Gates,
    ) -> None:
        self.parse, self.respond = parse, respond
        self.max_bytes, self.busy, self.gates = max_bytes, busy, gates

    def unread(self, reason: str, client: str) -> web.Response:
        self.gates.unread += 1
        log.info("admitted unchanged", extra={"reason": reason, "client": client})
        return _closed(self.busy)

    async def mutate(self, request: web.Request) -> web.Response:
        loop = asyncio.get_running_loop()
        budget = admitting.answer_budget(request.query.get("timeout"))
        deadline = loop.time() + budget
        client = request.remote or ""
        length = request.content_length
        if length is not None and length > self.max_bytes:
            return self.unread(f"review over {self.max_bytes} bytes", client)
        reading, answering = self.gates.reading, self.gates.answering
        if not await reading.acquire(client, deadline):
            return self.unread(f"no reading slot within {budget:g}s (busy)", client)
        try:
            body = await self.read(request, client)
            if body is None:  # dropped: aiohttp would otherwise linger to read the rest
                if request.transport is not None:
                    request.transport.abort()
                return _closed(b'{"error":"the body did not arrive in time"}', 408)
            if not await answering.acquire(client, deadline):
                return self.unread(f"no answering slot within {budget:g}s (busy)", client)
        finally:
            reading.release(client)
        token = _DEADLINE.set(deadline)
        try:
            if len(body) > PARSE_ON_LOOP:  # up to 0.2 s of decoding: not on the event loop
                parsed = await asyncio.to_thread(self.parse, body)
            else:
                parsed = self.parse(body)
            del body
            return _closed(await self.respond(parsed))
        finally:
            _DEADLINE.reset(token)
            answering.release(client)

    async def read(self, request: web.Request, client: str) -> bytes | None:
        """The whole body, or None when it stopped arriving (`BODY_TIMEOUT`)."""
        try:
            async with asyncio.timeout(BODY_TIMEOUT):
                return await request.read()
        except TimeoutError:
            self.gates.dropped += 1
            log.info(
                "review dropped",
                extra={
                    "reason": f"its body did not arrive within {BODY_TIMEOUT:g}s",
                    "client": client,
                },
            )
            return None
        except web.HTTPRequestEntityTooLarge:
            log.info("admitted unchanged", extra={"reason": f"review over {self.max_bytes} bytes"})
            raise
