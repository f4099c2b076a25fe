"""The admission webhook's HTTP edge: `POST /mutate` takes an AdmissionReview and answers
with what `runtime.admission.Admitter` decided. Served over TLS by `serving.Server`, behind
`runtime.admissioncerts.LIMITS`: one review per connection, a body sent within the header
timeout, fewer connections than the probe listener.

At most `MAX_READING` requests are read, parsed and answered at once (reading buffers the body
whole, parsing holds the event loop, and the parsed review, up to ~25 times the body's size in
Python objects, lives until the answer is sent): a request arriving while they are busy, or
announcing more than `max_bytes`, is answered at once, before its body is read, with `busy`
(allowed, no patch, no uid: the API server counts it a failed call and, `failurePolicy:
Ignore`, admits the object unchanged). A chunked body growing past `max_bytes` is refused
while it is read (413)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

log = logging.getLogger(__name__)

PATH = "/mutate"
#: requests reading, parsing and answering a review at once
MAX_READING = 2

T = TypeVar("T")


class Reading:
    """How many requests are reading, parsing or answering a review now."""

    def __init__(self) -> None:
        self.now = 0


def build_admission_app(
    parse: Callable[[bytes], T],
    respond: Callable[[T], Awaitable[bytes]],
    max_bytes: int,
    busy: bytes,
    reading: Reading | None = None,
) -> web.Application:
    reads = reading or Reading()

    def closed(body: bytes) -> web.Response:
        response = web.Response(body=body, content_type="application/json")
        # one review per connection: the edge counts a body as the next request's head, so
        # a kept-alive connection would be timed out after its body (see `serving.Limits`)
        response.force_close()
        return response

    async def mutate(request: web.Request) -> web.Response:
        length = request.content_length
        if length is not None and length > max_bytes:
            log.info("admitted unchanged", extra={"reason": f"review over {max_bytes} bytes"})
            return closed(busy)
        if reads.now >= MAX_READING:
            log.info("admitted unchanged", extra={"reason": f"{MAX_READING} reviews being read"})
            return closed(busy)
        reads.now += 1
        try:
            try:
                body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                log.info("admitted unchanged", extra={"reason": f"review over {max_bytes} bytes"})
                raise
            parsed = parse(body)
            del body
            return closed(await respond(parsed))
        finally:
            reads.now -= 1

    app = web.Application(client_max_size=max_bytes)
    app.router.add_post(PATH, mutate)
    return app
