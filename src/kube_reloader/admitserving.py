"""The admission webhook's HTTP edge: `POST /mutate` takes an AdmissionReview and answers
with what `runtime.admission.Admitter` decided. Served over TLS by `serving.Server`, behind
`runtime.admissioncerts.LIMITS`: one review per connection, a body sent within the header
timeout, fewer connections than the probe listener.

A body is read and parsed by at most `MAX_READING` requests at once (reading buffers it whole,
parsing holds the event loop): a request arriving while they are busy, or announcing more than
`max_bytes`, is answered at once, before its body is read, with `busy` (allowed, no patch, no
uid: the API server counts it a failed call and, `failurePolicy: Ignore`, admits the object
unchanged). A chunked body growing past `max_bytes` is refused while it is read (413)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from aiohttp import web

log = logging.getLogger(__name__)

PATH = "/mutate"
#: requests reading and parsing a body at once
MAX_READING = 2

T = TypeVar("T")


class Reading:
    """How many requests are reading or parsing a body now."""

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
        finally:
            reads.now -= 1
        return closed(await respond(parsed))

    app = web.Application(client_max_size=max_bytes)
    app.router.add_post(PATH, mutate)
    return app
