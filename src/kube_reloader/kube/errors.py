"""The project's own error taxonomy for everything that can go wrong talking to the API server.

Callers branch on these classes, never on aiohttp exceptions or raw status codes: `Conflict`
means re-read and retry, `Transient` means back off and retry, `Gone` means the watch window
expired and a relist is due, everything else is terminal for that request. The API's `Status`
message is carried through verbatim so an error always names the object and the problem.
"""

from __future__ import annotations

from typing import Any

import msgspec


class KubeError(Exception):
    """Base class of every error raised by `kube_reloader.kube`."""


class ConfigError(KubeError):
    """The kubeconfig, in-cluster credentials or an exec plugin could not be used."""


class Transient(KubeError):
    """A failure worth retrying after a backoff (network errors, 429, 5xx)."""


class ConnectionFailed(Transient):
    """The API server could not be reached, or the connection broke mid-request."""


class ApiError(KubeError):
    """The API server answered with an error status (a `metav1.Status` body, usually)."""

    def __init__(
        self,
        code: int,
        message: str,
        *,
        reason: str = "",
        method: str = "",
        path: str = "",
        retry_after: float | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.reason = reason
        self.method = method
        self.path = path
        self.retry_after = retry_after
        where = f"{method} {path}: " if method else ""
        super().__init__(f"{where}{code} {reason or 'Error'}: {message}")


class BadRequest(ApiError):
    """400: the request was malformed (a bad patch, a bad selector...)."""


class Unauthorized(ApiError, ConfigError):
    """401: the credentials were refused."""


class Forbidden(ApiError):
    """403: RBAC does not allow this verb on this resource."""


class NotFound(ApiError):
    """404: the object (or the resource type) does not exist."""


class Conflict(ApiError):
    """409 Conflict: the object changed since it was read; re-read and retry."""


class AlreadyExists(ApiError):
    """409 AlreadyExists: create of an object whose name is taken."""


class Gone(ApiError):
    """410: the requested resourceVersion is older than the server keeps; relist."""


class UnsupportedMediaType(ApiError):
    """415: e.g. a strategic merge patch sent to a custom resource."""


class Invalid(ApiError):
    """422: the object failed validation."""


class TooManyRequests(ApiError, Transient):
    """429: throttled by API priority and fairness; honour Retry-After."""


class ServerError(ApiError, Transient):
    """5xx: the server failed; retry with backoff."""


class _Status(msgspec.Struct):
    kind: str = ""
    status: str = ""
    message: str = ""
    reason: str = ""
    code: int = 0


_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    410: Gone,
    415: UnsupportedMediaType,
    422: Invalid,
    429: TooManyRequests,
}


def from_status(
    code: int,
    body: bytes,
    *,
    method: str = "",
    path: str = "",
    retry_after: str | None = None,
) -> ApiError:
    """Map an HTTP error answer to the most specific `ApiError` subclass.

    `body` is usually a `metav1.Status`; anything else (HTML from a proxy, empty body) is
    kept, shortened, as the message so the user still sees what came back.
    """
    reason = ""
    message = ""
    try:
        status = msgspec.json.decode(body, type=_Status)
        message, reason = status.message, status.reason
    except (msgspec.DecodeError, msgspec.ValidationError):
        message = body[:300].decode("utf-8", "replace").strip()
    if not message:
        message = f"HTTP {code}"
    cls: type[ApiError]
    if code == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    elif code >= 500:
        cls = ServerError
    else:
        cls = _BY_CODE.get(code, ApiError)
    return cls(
        code,
        message,
        reason=reason,
        method=method,
        path=path,
        retry_after=_parse_retry_after(retry_after),
    )


def from_watch_error(obj: dict[str, Any]) -> ApiError:
    """Map the `object` of a watch `ERROR` event (a `metav1.Status`) to an `ApiError`."""
    code = int(obj.get("code") or 500)
    return from_status(code, msgspec.json.encode(obj))


def _parse_retry_after(value: str | None) -> float | None:
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
