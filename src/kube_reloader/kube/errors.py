"""The project's own error taxonomy for everything that can go wrong talking to the API server.

Callers branch on these classes, never on aiohttp exceptions or raw status codes: `Conflict`
means re-read and retry, `Transient` means back off and retry, `Gone` means the watch window
expired and a relist is due, everything else is terminal for that request. The API's `Status`
message is carried through verbatim so an error always names the object and the problem.
`client_go_text` is what client-go's error says for the same answer (Reloader v1's Events
quote it).
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
        text: str | None = None,
    ) -> None:
        self.code = code
        self.message = message
        #: what client-go's error says for this answer (`client_go_text`)
        self.text = message if text is None else text
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


#: client-go's sentence for an error answer that carries no `Status` (apimachinery's
#: `NewGenericServerResponse`); None: the server's own text
_GENERIC: dict[int, str | None] = {
    400: "the server rejected our request for an unknown reason",
    401: "the server has asked for the client to provide credentials",
    403: None,
    404: "the server could not find the requested resource",
    405: "the server does not allow this method on the requested resource",
    409: "the server reported a conflict",
    415: None,
    422: "the server rejected our request due to an error in our request",
    429: "the server has received too many requests and has asked us to try again later",
    503: "the server is currently unable to handle the request",
    504: "the server was unable to return a response in the time allotted, but may still be "
    "processing the request",
}


def _go_quote(text: str) -> str:
    """Go's `%q` of a string (close enough for printable text)."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + escaped.replace("\n", "\\n").replace("\t", "\\t").replace("\r", "\\r") + '"'


def _resource_of(path: str) -> tuple[str, str]:
    """(resource.group, name) of an API path, as client-go names them in its errors."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 2:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        group, rest = parts[1], parts[3:]
    else:
        return "", ""
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    if not rest:
        return "", ""
    resource = f"{rest[0]}.{group}" if group else rest[0]
    return resource, rest[1] if len(rest) > 1 else ""


def client_go_text(code: int, method: str, path: str, server_text: str) -> str:
    """client-go's message for an error answer without a `Status` body; `server_text` is
    the body (its first 2,048 bytes) when it is text, else "unknown"."""
    if code == 406:
        text = server_text
        if server_text in ("", "unknown"):
            text = "the server was unable to respond with a content type that the client supports"
    elif code in _GENERIC:
        generic = _GENERIC[code]
        text = server_text if generic is None else generic
    elif code >= 500:
        quoted = _go_quote(server_text)
        text = f"an error on the server ({quoted}) has prevented the request from succeeding"
    else:
        text = (
            f"the server responded with the status code {code} but did not return more information"
        )
    resource, name = _resource_of(path)
    if resource and name:
        return f"{text} ({method.lower()} {resource} {name})"
    if resource:
        return f"{text} ({method.lower()} {resource})"
    return text


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
    content_type: str | None = None,
) -> ApiError:
    """Map an HTTP error answer to the most specific `ApiError` subclass.

    `body` is usually a `metav1.Status`; anything else (HTML from a proxy, empty body) is
    kept, shortened, as the message so the user still sees what came back.
    """
    reason = ""
    message = ""
    text: str | None = None
    try:
        status = msgspec.json.decode(body, type=_Status)
        message, reason = status.message, status.reason
        if status.kind == "Status" and status.status == "Failure":
            text = status.message  # client-go's StatusError says exactly this
    except (msgspec.DecodeError, msgspec.ValidationError):
        message = body[:300].decode("utf-8", "replace").strip()
    if text is None:
        media = (content_type or "").split(";", 1)[0].strip().lower()
        is_text = not media or media.startswith("text/")
        server_text = body[:2048].decode("utf-8", "replace").strip() if is_text else "unknown"
        text = client_go_text(code, method, path, server_text)
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
        text=text,
    )


def client_go_error(exc: KubeError) -> str:
    """What client-go's error would say for the same failure (Reloader v1's Events print it
    with `%v`): for an API answer, its `text`; for anything else, our own message."""
    return exc.text if isinstance(exc, ApiError) else str(exc)


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
