"""What a request of the API client's wire is made of: where it goes (`Target`) and its
head's bytes (`request_head`)."""

from __future__ import annotations

import ssl
from collections.abc import Mapping
from urllib.parse import urlsplit

import msgspec

from kube_reloader.kube.wiretunnel import WireError


class Target(msgspec.Struct, frozen=True):
    """Where a pool connects: the server (scheme, host, port), its TLS, and a proxy."""

    https: bool
    host: str
    port: int
    ssl: ssl.SSLContext | None = None
    server_hostname: str | None = None
    proxy: tuple[str, int] | None = None
    #: headers of a CONNECT tunnel (https through a proxy)
    connect_headers: tuple[tuple[str, str], ...] = ()

    @staticmethod
    def of(url: str) -> tuple[str, int, bool]:
        """(host, port, https) of a URL: default ports, IPv6 brackets removed."""
        parts = urlsplit(url)
        https = parts.scheme == "https"
        port = parts.port or (443 if https else 80)
        return parts.hostname or "", port, https


def request_head(
    method: str,
    target: str,
    host: str,
    headers: Mapping[str, str],
    body: bytes | None,
) -> bytes:
    """The request line and headers, encoded once. A value with a line break (a token file
    with two lines) would start a header of its own: it is refused."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for k, v in headers.items():
        if "\r" in v or "\n" in v:
            raise WireError(f"header {k}: the value has a line break")
        lines.append(f"{k}: {v}")
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body) if body else 0}")
    try:
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError as exc:  # a token file with a byte-order mark, say
        raise WireError(f"a request header is not latin-1 text: {exc.reason}") from exc
