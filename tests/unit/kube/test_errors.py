"""Mapping of API answers to the project's error classes."""

from __future__ import annotations

import json

import pytest

from kube_reloader.kube import errors


def status(code: int, reason: str, message: str) -> bytes:
    return json.dumps(
        {"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": code,
         "reason": reason, "message": message}
    ).encode()  # fmt: skip


@pytest.mark.parametrize(
    ("code", "reason", "cls", "transient"),
    [
        (400, "BadRequest", errors.BadRequest, False),
        (401, "Unauthorized", errors.Unauthorized, False),
        (403, "Forbidden", errors.Forbidden, False),
        (404, "NotFound", errors.NotFound, False),
        (409, "Conflict", errors.Conflict, False),
        (409, "AlreadyExists", errors.AlreadyExists, False),
        (410, "Expired", errors.Gone, False),
        (415, "UnsupportedMediaType", errors.UnsupportedMediaType, False),
        (422, "Invalid", errors.Invalid, False),
        (429, "TooManyRequests", errors.TooManyRequests, True),
        (500, "InternalError", errors.ServerError, True),
        (503, "ServiceUnavailable", errors.ServerError, True),
        (418, "Teapot", errors.ApiError, False),
    ],
)
def test_status_codes_map_to_specific_error_classes(
    code: int, reason: str, cls: type[errors.ApiError], transient: bool
) -> None:
    err = errors.from_status(code, status(code, reason, "boom"), method="GET", path="/x")
    assert type(err) is cls
    assert isinstance(err, errors.Transient) is transient
    assert (err.code, err.reason, err.message) == (code, reason, "boom")


def test_the_api_status_message_is_carried_into_the_error_text() -> None:
    err = errors.from_status(
        404, status(404, "NotFound", 'configmaps "app" not found'),
        method="GET", path="/api/v1/namespaces/ns/configmaps/app",
    )  # fmt: skip
    assert str(err) == (
        'GET /api/v1/namespaces/ns/configmaps/app: 404 NotFound: configmaps "app" not found'
    )


def test_a_non_status_body_is_kept_shortened_as_the_message() -> None:
    err = errors.from_status(502, b"<html>" + b"x" * 1000)
    assert isinstance(err, errors.ServerError)
    assert err.message.startswith("<html>")
    assert len(err.message) <= 300


def test_empty_body_still_gives_a_message() -> None:
    assert errors.from_status(503, b"").message == "HTTP 503"


@pytest.mark.parametrize(
    ("header", "seconds"), [("3", 3.0), ("0.5", 0.5), ("soon", None), (None, None)]
)
def test_retry_after_is_parsed_when_numeric(header: str | None, seconds: float | None) -> None:
    assert errors.from_status(429, b"", retry_after=header).retry_after == seconds


def test_watch_error_events_map_like_http_answers() -> None:
    err = errors.from_watch_error(
        {
            "kind": "Status",
            "code": 410,
            "reason": "Expired",
            "message": "too old resource version: 1 (5)",
        }
    )
    assert isinstance(err, errors.Gone)
    assert "too old resource version" in str(err)


DEPLOYMENT = "/apis/apps/v1/namespaces/ns/deployments/web"
FORBIDDEN = (
    'deployments.apps "web" is forbidden: User "system:serviceaccount:r:r" cannot patch '
    'resource "deployments" in API group "apps" in the namespace "ns"'
)


@pytest.mark.parametrize(
    ("what", "code", "method", "path", "body", "content_type", "text"),
    [
        ("a Status body says it verbatim", 403, "PATCH", DEPLOYMENT,
         status(403, "Forbidden", FORBIDDEN), "application/json", FORBIDDEN),
        ("a Status with an empty message says nothing", 422, "PATCH", DEPLOYMENT,
         status(422, "Invalid", ""), "application/json", ""),
        ("an HTML 500 from a proxy", 500, "PATCH", DEPLOYMENT, b"<h1>oops</h1>\n", "text/html",
         'an error on the server ("<h1>oops</h1>") has prevented the request from succeeding '
         "(patch deployments.apps web)"),
        ("a JSON body that is no Status is unknown", 502, "PATCH", DEPLOYMENT, b"{}",
         "application/json", 'an error on the server ("unknown") has prevented the request '
         "from succeeding (patch deployments.apps web)"),
        ("a bare 404 of a core resource", 404, "GET", "/api/v1/namespaces/ns/configmaps/cm",
         b"", None, "the server could not find the requested resource (get configmaps cm)"),
        ("a text 403 keeps the server's words", 403, "POST", "/apis/batch/v1/namespaces/ns/jobs",
         b"RBAC: access denied", "text/plain", "RBAC: access denied (post jobs.batch)"),
        ("a 409 without a Status", 409, "PATCH", DEPLOYMENT, b"", "",
         "the server reported a conflict (patch deployments.apps web)"),
        ("an eviction names the pod", 429, "POST", "/api/v1/namespaces/ns/pods/p-1/eviction",
         b"", "", "the server has received too many requests and has asked us to try again "
         "later (post pods p-1)"),
        ("a code client-go has no sentence for", 418, "PATCH", DEPLOYMENT, b"", "",
         "the server responded with the status code 418 but did not return more information "
         "(patch deployments.apps web)"),
        ("a path outside the API has no resource", 400, "GET", "/version", b"", "",
         "the server rejected our request for an unknown reason"),
    ],
)  # fmt: skip
def test_an_api_error_says_what_client_gos_error_says_for_the_same_answer(
    what: str, code: int, method: str, path: str, body: bytes, content_type: str | None,
    text: str,
) -> None:  # fmt: skip
    err = errors.from_status(code, body, method=method, path=path, content_type=content_type)
    assert errors.client_go_error(err) == text, what
    assert str(err).startswith(f"{method} {path}: {code} "), "our own message keeps its prefix"


def test_an_error_that_is_no_api_answer_says_our_own_message() -> None:
    err = errors.KubeError("created Event: the answer is not a JSON object")
    assert errors.client_go_error(err) == "created Event: the answer is not a JSON object"
