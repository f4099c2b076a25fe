"""Which proxy reaches the API server, chosen as client-go chooses it.

The cluster's `proxy-url`, else Go's `ProxyFromEnvironment` (`HTTPS_PROXY`, `HTTP_PROXY`,
`NO_PROXY`), so kube-reloader goes through the proxy kubectl goes through.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from urllib.parse import SplitResult, urlsplit

from kube_reloader.kube.errors import ConfigError

_DEFAULT_PORTS = {"http": "80", "https": "443"}


def proxy_for(
    server: str, env: Mapping[str, str], proxy_url: str = "", *, what: str = "proxy"
) -> str | None:
    """The proxy to reach `server` through, chosen as client-go chooses it; None: directly.

    A cluster's `proxy-url` wins and applies to every server, loopback included. Otherwise
    Go's `ProxyFromEnvironment`: `HTTPS_PROXY` for an https server, `HTTP_PROXY` for an http
    one (each name upper case first, then lower case; a value without a scheme is http),
    never for `localhost` or a loopback address, nor for a host `NO_PROXY` matches (see
    `_bypass`). Only http and https proxies are supported (not socks5).
    """
    if proxy_url:
        _supported(urlsplit(proxy_url).scheme, f"{what}: proxy-url {proxy_url!r}")
        return proxy_url
    url = urlsplit(server)
    name = {"https": "HTTPS_PROXY", "http": "HTTP_PROXY"}.get(url.scheme)
    if name is None:
        return None
    value = env.get(name) or env.get(name.lower()) or ""
    proxy = _parse_proxy(value) if value else None
    if proxy is None:
        return None  # unset, or unparseable: Go ignores it too
    if name == "HTTP_PROXY" and env.get("REQUEST_METHOD"):
        raise ConfigError(f"{name}: refusing to use it in a CGI environment (REQUEST_METHOD)")
    if _bypass(url, env.get("NO_PROXY") or env.get("no_proxy") or ""):
        return None
    _supported(proxy.scheme, f"{name} {value!r}")
    return proxy.geturl()


def _supported(scheme: str, what: str) -> None:
    if scheme in ("http", "https"):
        return
    if scheme == "socks5":
        raise ConfigError(f"{what}: SOCKS proxies are not supported; use an http(s) proxy")
    raise ConfigError(f"{what}: unsupported scheme {scheme!r}, must be http or https")


def _parse_proxy(value: str) -> SplitResult | None:
    parts = urlsplit(value)
    if not parts.scheme or not parts.netloc:
        parts = urlsplit("http://" + value)  # "host:port" means an http proxy
    try:
        _ = parts.port  # raises ValueError on a bad port
    except ValueError:
        return None
    return parts if parts.hostname else None


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    mapped = getattr(ip, "ipv4_mapped", None)
    return mapped or ip


def _bypass(url: SplitResult, no_proxy: str) -> bool:
    """Whether Go connects to `url` directly despite a proxy (golang.org/x/net httpproxy).

    Always for `localhost` and loopback addresses. Otherwise when a `NO_PROXY` entry
    (comma-separated, case-insensitive) matches: `*` matches every host; `10.0.0.0/8`
    (CIDR) and `10.1.2.3` match IP hosts; `example.com` matches it and its subdomains,
    `.example.com` and `*.example.com` only its subdomains; any entry may end with
    `:port`, then it matches that port only. Domain entries never match IP hosts.
    """
    host = url.hostname or ""
    port = str(url.port or _DEFAULT_PORTS.get(url.scheme, ""))
    ip = _ip(host)
    if host == "localhost" or (ip is not None and ip.is_loopback):
        return True
    for entry in no_proxy.split(","):
        p = entry.strip().lower()
        if p == "*":
            return True
        if "/" in p:
            try:
                if ip is not None and ip in ipaddress.ip_network(p, strict=False):
                    return True
            except ValueError:
                pass
            continue
        phost, pport = _split_host_port(p)
        if not phost or pport not in ("", port):
            continue
        pip = _ip(phost)
        if pip is not None:
            if pip == ip:
                return True
            continue
        suffix = phost[1:] if phost.startswith("*.") else phost
        exact = not suffix.startswith(".")
        if ip is None and (
            host.endswith(suffix if not exact else "." + suffix) or (exact and host == suffix)
        ):
            return True
    return False


def _split_host_port(entry: str) -> tuple[str, str]:
    """Go's net.SplitHostPort, falling back to (entry, "") where it fails."""
    if entry.startswith("["):
        end = entry.find("]")
        if end > 0 and entry[end + 1 : end + 2] == ":":
            return entry[1:end], entry[end + 2 :]
        return entry, ""
    if entry.count(":") == 1:
        host, _, port = entry.partition(":")
        return host, port
    return entry, ""
