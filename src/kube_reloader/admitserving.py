"""The admission webhook's HTTP edge: `POST /mutate` takes an AdmissionReview and answers
with what `runtime.admission.Admitter` decided. Served over TLS by `serving.Server`, behind
`runtime.admissioncerts.LIMITS`: one review per connection, a body sent within the header
timeout, fewer connections than the probe listener; anything over the caps is refused (the
API server then admits the object unchanged: `failurePolicy: Ignore`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

log = logging.getLogger(__name__)

PATH = "/mutate"


def build_admission_app(
    answer: Callable[[bytes], Awaitable[bytes]], max_bytes: int
) -> web.Application:
    async def mutate(request: web.Request) -> web.Response:
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:
            log.info("admitted unchanged", extra={"reason": f"review over {max_bytes} bytes"})
            raise
        response = web.Response(body=await answer(body), content_type="application/json")
        # one review per connection: the edge counts a body as the next request's head, so
        # a kept-alive connection would be timed out after its body (see `serving.Limits`)
        response.force_close()
        return response

    app = web.Application(client_max_size=max_bytes)
    app.router.add_post(PATH, mutate)
    return app
