"""Where the API server is and who we are to it: kubeconfig files and in-cluster credentials.

Follows client-go's loading rules so kube-reloader connects wherever kubectl and Reloader do:
an explicit `--kubeconfig`, else every file in `KUBECONFIG` merged (the first file to define a
name wins, relative paths resolve against the file that holds them), else `~/.kube/config`,
else the pod's service account. Credentials are objects that can refresh themselves: token
files are re-read (bound service-account tokens rotate), exec plugins are re-run when their
credential expires or the server answers 401.

Fields are typed as client-go's structs type them: `insecure-skip-tls-verify: "false"` (a
string) fails to load, as it does for kubectl, rather than being read as "true" because it
is not empty. The proxy is chosen as client-go chooses it: the cluster's `proxy-url`, else
Go's `ProxyFromEnvironment` (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY`).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import ipaddress
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple, Protocol
from urllib.parse import SplitResult, urlsplit

import yaml

from kube_reloader.kube.errors import ConfigError

IN_CLUSTER_ROOT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_SECONDS = 60.0
EXEC_EXPIRY_SKEW_SECONDS = 10.0
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


@dataclass(frozen=True, slots=True)
class AuthState:
    """What to present on the next request: a bearer token and/or a client certificate."""

    token: str | None = None
    basic: tuple[str, str] | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None


class Credentials(Protocol):
    """A source of `AuthState` that may change over time."""

    async def current(self) -> AuthState:
        """The credentials to use now (cheap when nothing needs refreshing)."""
        ...

    async def invalidate(self) -> bool:
        """Called after a 401: drop cached state. True when a retry could succeed."""
        ...


class StaticCredentials:
    """A fixed token, basic-auth pair or client certificate (or nothing at all)."""

    def __init__(self, state: AuthState) -> None:
        self._state = state

    async def current(self) -> AuthState:
        return self._state

    async def invalidate(self) -> bool:
        return False


class TokenFileCredentials:
    """A bearer token read from a file, re-read periodically and after every 401.

    Bound service-account tokens are rotated by the kubelet about every hour; client-go
    re-reads the file at most once a minute, and so do we.
    """

    def __init__(
        self,
        path: Path,
        *,
        reread_seconds: float = TOKEN_REREAD_SECONDS,
        base: AuthState | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._path = path
        self._reread = reread_seconds
        self._base = base or AuthState()
        self._clock = clock
        self._token: str | None = None
        self._read_at = 0.0

    async def current(self) -> AuthState:
        now = self._clock()
        if self._token is None or now - self._read_at >= self._reread:
            self._token = _read_token(self._path)
            self._read_at = now
        return AuthState(
            token=self._token, cert_pem=self._base.cert_pem, key_pem=self._base.key_pem
        )

    async def invalidate(self) -> bool:
        old = self._token
        self._token = _read_token(self._path)
        self._read_at = self._clock()
        return self._token != old


def _read_token(path: Path) -> str:
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"token file {path}: cannot be read: {exc.strerror}") from exc
    if not token:
        raise ConfigError(f"token file {path}: is empty")
    return token


@dataclass(frozen=True, slots=True)
class ExecConfig:
    """The `users[].user.exec` stanza of a kubeconfig."""

    command: str
    api_version: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    provide_cluster_info: bool = False
    install_hint: str = ""


class ExecCredentials:
    """Credentials from an exec plugin (`client.authentication.k8s.io/v1` or `v1beta1`).

    The plugin runs on first use, again when its `expirationTimestamp` is near, and again
    after a 401. Concurrent callers share one run.
    """

    def __init__(
        self,
        config: ExecConfig,
        *,
        cluster: Mapping[str, Any] | None = None,
        base: AuthState | None = None,
        clock: Callable[[], float] = time.time,
        timeout: float = 60.0,
    ) -> None:
        self._config = config
        self._cluster = dict(cluster or {})
        self._base = base or AuthState()
        self._clock = clock
        self._timeout = timeout
        self._state: AuthState | None = None
        self._expires_at: float | None = None
        self._lock = asyncio.Lock()

    async def current(self) -> AuthState:
        async with self._lock:
            if self._state is None or (
                self._expires_at is not None
                and self._clock() >= self._expires_at - EXEC_EXPIRY_SKEW_SECONDS
            ):
                self._state, self._expires_at = await self._run()
            return self._state

    async def invalidate(self) -> bool:
        async with self._lock:
            self._state = None
            self._expires_at = None
        return True

    async def _run(self) -> tuple[AuthState, float | None]:
        cfg = self._config
        spec: dict[str, Any] = {"interactive": False}
        if cfg.provide_cluster_info:
            spec["cluster"] = self._cluster
        info = {"apiVersion": cfg.api_version, "kind": "ExecCredential", "spec": spec}
        env = dict(os.environ)
        env.update(dict(cfg.env))
        env["KUBERNETES_EXEC_INFO"] = json.dumps(info)
        name = f"exec plugin {cfg.command!r}"
        try:
            proc = await asyncio.create_subprocess_exec(
                cfg.command,
                *cfg.args,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            hint = f" ({cfg.install_hint.strip()})" if cfg.install_hint else ""
            raise ConfigError(f"{name}: cannot be started: {exc.strerror}{hint}") from exc
        try:
            out, err = await asyncio.wait_for(proc.communicate(), self._timeout)
        except TimeoutError as exc:
            proc.kill()
            await proc.wait()
            raise ConfigError(f"{name}: no answer within {self._timeout:.0f}s") from exc
        if proc.returncode != 0:
            tail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
            raise ConfigError(f"{name}: exited with code {proc.returncode}: {tail[0]}")
        return self._parse(out, name)

    def _parse(self, out: bytes, name: str) -> tuple[AuthState, float | None]:
        try:
            cred = json.loads(out)
        except ValueError as exc:
            raise ConfigError(f"{name}: printed something that is not JSON") from exc
        if not isinstance(cred, dict) or cred.get("kind") != "ExecCredential":
            raise ConfigError(f"{name}: output is not an ExecCredential")
        if cred.get("apiVersion") != self._config.api_version:
            raise ConfigError(
                f"{name}: apiVersion {cred.get('apiVersion')!r} does not match the "
                f"requested {self._config.api_version!r}"
            )
        status = cred.get("status") or {}
        token = status.get("token") or None
        cert = status.get("clientCertificateData")
        key = status.get("clientKeyData")
        if bool(cert) != bool(key):
            raise ConfigError(f"{name}: status has only one of clientCertificateData/clientKeyData")
        if not token and not cert:
            raise ConfigError(f"{name}: status has neither a token nor a client certificate")
        expires: float | None = None
        stamp = status.get("expirationTimestamp")
        if stamp:
            try:
                expires = datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
            except ValueError as exc:
                raise ConfigError(
                    f"{name}: status.expirationTimestamp {stamp!r} is not RFC 3339"
                ) from exc
        state = AuthState(
            token=token,
            cert_pem=cert.encode() if cert else self._base.cert_pem,
            key_pem=key.encode() if key else self._base.key_pem,
        )
        return state, expires


@dataclass(frozen=True)
class ConnectionConfig:
    """Everything the client needs to reach and authenticate to one API server."""

    server: str
    credentials: Credentials
    ca_pem: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    namespace: str = "default"
    source: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the proxy to reach the server through (see `proxy_for`); None connects directly
    proxy: str | None = None
    #: the cluster's `disable-compression`: do not ask for gzip-encoded answers
    disable_compression: bool = False

    def __post_init__(self) -> None:
        if self.insecure_skip_tls_verify and self.ca_pem:
            raise ConfigError(f"{self.source or self.server}: {_CA_AND_INSECURE}")


_CA_AND_INSECURE = (
    "certificate-authority and insecure-skip-tls-verify: true are both set (client-go: "
    "specifying a root certificates file with the insecure flag is not allowed)"
)


def load(
    kubeconfig: str | os.PathLike[str] | None = None,
    *,
    context: str | None = None,
    env: Mapping[str, str] | None = None,
    in_cluster_root: Path = IN_CLUSTER_ROOT,
) -> ConnectionConfig:
    """Load the connection the way client-go does (see the module docstring)."""
    env = os.environ if env is None else env
    if kubeconfig:
        return load_kubeconfig([Path(kubeconfig)], context=context, env=env)
    if env.get("KUBECONFIG"):
        paths = [Path(p) for p in env["KUBECONFIG"].split(os.pathsep) if p]
        return load_kubeconfig(paths, context=context, env=env)
    home = Path(env.get("HOME") or Path.home())
    default = home / ".kube" / "config"
    if default.exists():
        return load_kubeconfig([default], context=context, env=env)
    if env.get("KUBERNETES_SERVICE_HOST"):
        return load_in_cluster(env=env, root=in_cluster_root)
    raise ConfigError(
        "no Kubernetes credentials: pass --kubeconfig, set KUBECONFIG, create "
        f"{default}, or run in a pod with a service account"
    )


def load_in_cluster(
    *, env: Mapping[str, str] | None = None, root: Path = IN_CLUSTER_ROOT
) -> ConnectionConfig:
    """The pod's service account: token file (re-read), CA bundle and namespace."""
    env = os.environ if env is None else env
    host = env.get("KUBERNETES_SERVICE_HOST", "")
    port = env.get("KUBERNETES_SERVICE_PORT", "443")
    if not host:
        raise ConfigError("in-cluster: KUBERNETES_SERVICE_HOST is not set")
    token_path = root / "token"
    if not token_path.exists():
        raise ConfigError(f"in-cluster: token file {token_path} does not exist")
    ca_path = root / "ca.crt"
    try:
        ca = ca_path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"in-cluster: CA file {ca_path}: {exc.strerror}") from exc
    ns_path = root / "namespace"
    namespace = ns_path.read_text().strip() if ns_path.exists() else "default"
    server_host = f"[{host}]" if ":" in host else host
    server = f"https://{server_host}:{port}"
    return ConnectionConfig(
        server=server,
        credentials=TokenFileCredentials(token_path),
        ca_pem=ca,
        namespace=namespace or "default",
        source="in-cluster service account",
        proxy=proxy_for(server, env),
    )


def load_kubeconfig(
    paths: list[Path], *, context: str | None = None, env: Mapping[str, str] | None = None
) -> ConnectionConfig:
    """Merge kubeconfig files (first definition of a name wins) and resolve one context.

    `env` (default: the process environment) is read only for the proxy settings.
    """
    env = os.environ if env is None else env
    merged = _merge(paths)
    where = "kubeconfig " + os.pathsep.join(str(p) for p in paths)
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"{where}: no current-context is set and no --context was given")
    ctx = merged.contexts.get(name)
    if ctx is None:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise ConfigError(f"{where}: context {name!r} not found (contexts: {known})")
    cluster_name = str(ctx.body.get("cluster") or "")
    user_name = str(ctx.body.get("user") or "")
    if cluster_name not in merged.clusters:
        raise ConfigError(f"{where}: context {name!r} names cluster {cluster_name!r}, not defined")
    cluster, cluster_file, cluster_dir = merged.clusters[cluster_name]
    what = f"kubeconfig {cluster_file}: cluster {cluster_name!r}"
    server = str(cluster.get("server") or "")
    if not server:
        raise ConfigError(f"{what} has no server")
    insecure = cluster.get("insecure-skip-tls-verify") is True
    if insecure and (
        cluster.get("certificate-authority") or cluster.get("certificate-authority-data")
    ):
        raise ConfigError(f"{what}: {_CA_AND_INSECURE}")
    ca = _bytes_field(cluster, "certificate-authority", cluster_dir, what)
    proxy_url = str(cluster.get("proxy-url") or "")
    proxy = proxy_for(server, env, proxy_url, what=what)
    user: Mapping[str, Any] = {}
    user_file, user_dir = ctx.file, ctx.base
    if user_name:
        if user_name not in merged.users:
            raise ConfigError(f"{where}: context {name!r} names user {user_name!r}, not defined")
        user, user_file, user_dir = merged.users[user_name]
    cluster_info = {
        "server": server,
        "certificate-authority-data": base64.b64encode(ca).decode() if ca else None,
        "insecure-skip-tls-verify": insecure,
        "tls-server-name": cluster.get("tls-server-name"),
        "proxy-url": proxy_url or None,
        "disable-compression": cluster.get("disable-compression") is True,
    }
    user_what = f"kubeconfig {user_file}: user {user_name!r}"
    credentials = _credentials(user, user_dir, user_what, cluster_info)
    return ConnectionConfig(
        server=server.rstrip("/"),
        credentials=credentials,
        ca_pem=ca,
        insecure_skip_tls_verify=insecure,
        tls_server_name=cluster.get("tls-server-name") or None,
        namespace=str(ctx.body.get("namespace") or "default"),
        source=f"{where} (context {name!r})",
        proxy=proxy,
        disable_compression=cluster.get("disable-compression") is True,
    )


class _Entry(NamedTuple):
    body: Mapping[str, Any]
    file: Path  # the file that defines it, for messages
    base: Path  # its directory, for relative paths


@dataclass
class _Merged:
    clusters: dict[str, _Entry] = field(default_factory=dict)
    users: dict[str, _Entry] = field(default_factory=dict)
    contexts: dict[str, _Entry] = field(default_factory=dict)
    current_context: str = ""


def _merge(paths: list[Path]) -> _Merged:
    merged = _Merged()
    found = False
    for path in paths:
        if not path.exists():
            if len(paths) == 1:
                raise ConfigError(f"kubeconfig {path}: file does not exist")
            continue  # client-go skips missing files in KUBECONFIG
        found = True
        try:
            doc = yaml.load(path.read_text(), Loader=_Loader) or {}  # noqa: S506 - a safe loader
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = f":{mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"kubeconfig {path}{line}: not valid YAML") from exc
        except OSError as exc:
            raise ConfigError(f"kubeconfig {path}: cannot be read: {exc.strerror}") from exc
        if not isinstance(doc, dict):
            raise ConfigError(f"kubeconfig {path}: top level is not a mapping")
        _check(doc, "config", f"kubeconfig {path}")
        base = path.resolve().parent
        for section, inner, target in (
            ("clusters", "cluster", merged.clusters),
            ("users", "user", merged.users),
            ("contexts", "context", merged.contexts),
        ):
            for i, entry in enumerate(doc.get(section) or []):
                if not isinstance(entry, dict) or not entry.get("name"):
                    raise ConfigError(f"kubeconfig {path}: {section}[{i}] has no name")
                _check(entry, "named", f"kubeconfig {path}: {section}[{i}]")
                body = entry.get(inner) or {}
                if not isinstance(body, dict):
                    raise ConfigError(f"kubeconfig {path}: {section}[{i}].{inner} is not a mapping")
                # client-go decodes every entry of every file: a mistyped field anywhere fails
                _check(body, inner, f"kubeconfig {path}: {inner} {entry['name']!r}")
                target.setdefault(str(entry["name"]), _Entry(body, path, base))
        if not merged.current_context and doc.get("current-context"):
            merged.current_context = str(doc["current-context"])
    if not found:
        raise ConfigError(
            "kubeconfig: none of these files exists: " + ", ".join(str(p) for p in paths)
        )
    return merged


# ----------------------------------------------------------------------- typed fields

_STR, _BOOL, _STRS, _MAP, _LIST = (
    "a string",
    "true or false (a YAML boolean, not quoted)",
    "a list of strings",
    "a mapping",
    "a list",
)
#: client-go decodes a kubeconfig into typed structs (YAML -> JSON -> Go): a value of
#: another type (a quoted "false" for a bool, a number for a string) fails the whole load.
_FIELDS: dict[str, dict[str, str]] = {
    "config": {"current-context": _STR, "clusters": _LIST, "users": _LIST, "contexts": _LIST},
    "named": {"name": _STR},
    "cluster": {
        "server": _STR,
        "tls-server-name": _STR,
        "insecure-skip-tls-verify": _BOOL,
        "certificate-authority": _STR,
        "certificate-authority-data": _STR,
        "proxy-url": _STR,
        "disable-compression": _BOOL,
    },
    "user": {
        **dict.fromkeys(("client-certificate", "client-certificate-data", "client-key"), _STR),
        **dict.fromkeys(("client-key-data", "token", "tokenFile", "username", "password"), _STR),
        "as": _STR,
        "as-groups": _STRS,
        "exec": _MAP,
        "auth-provider": _MAP,
    },
    "context": {"cluster": _STR, "user": _STR, "namespace": _STR},
    "exec": {
        "command": _STR,
        "args": _STRS,
        "env": _LIST,
        "apiVersion": _STR,
        "installHint": _STR,
        "provideClusterInfo": _BOOL,
        "interactiveMode": _STR,
    },
    "exec env": {"name": _STR, "value": _STR},
}


def _check(body: Mapping[str, Any], kind: str, what: str) -> None:
    """Raise a one-line `ConfigError` for the first field of `body` that has the wrong type."""
    for key, want in _FIELDS[kind].items():
        value = body.get(key)
        if value is None:  # absent or null: the zero value, as in Go
            continue
        ok = {
            _STR: isinstance(value, str),
            _BOOL: isinstance(value, bool),
            _STRS: isinstance(value, list) and all(isinstance(v, str) for v in value),
            _MAP: isinstance(value, dict),
            _LIST: isinstance(value, list),
        }[want]
        if not ok:
            raise ConfigError(f"{what}: {key} must be {want}, not {_kind_of(value)}")
    if kind == "user" and isinstance(body.get("exec"), dict):
        _check(body["exec"], "exec", f"{what}: exec")
        for i, item in enumerate(body["exec"].get("env") or []):
            if not isinstance(item, dict):
                raise ConfigError(f"{what}: exec.env[{i}] must be a mapping with a name and value")
            _check(item, "exec env", f"{what}: exec.env[{i}]")


def _kind_of(value: object) -> str:
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, int | float):
        return f"the number {value}"
    return "a list" if isinstance(value, list) else "a mapping"


class _Loader(yaml.SafeLoader):
    """YAML as Go's decoder reads it into JSON: an unquoted date stays a string."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


# ----------------------------------------------------------------------- proxies

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


def _bytes_field(body: Mapping[str, Any], key: str, base: Path, what: str) -> bytes | None:
    """`<key>-data` (base64) wins over `<key>` (a path relative to the kubeconfig file)."""
    data = body.get(f"{key}-data")
    if data:
        try:
            # Go's decoder skips line breaks (a folded YAML block); Python's strict one does not
            return base64.b64decode(str(data).replace("\n", "").replace("\r", ""), validate=True)
        except (binascii.Error, ValueError) as exc:
            raise ConfigError(f"{what}: {key}-data is not valid base64") from exc
    path = body.get(key)
    if path:
        full = (base / str(path)).expanduser()
        try:
            return full.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{what}: {key} {full}: {exc.strerror}") from exc
    return None


def _credentials(
    user: Mapping[str, Any], base: Path, what: str, cluster_info: Mapping[str, Any]
) -> Credentials:
    cert = _bytes_field(user, "client-certificate", base, what)
    key = _bytes_field(user, "client-key", base, what)
    if bool(cert) != bool(key):
        raise ConfigError(f"{what}: client-certificate and client-key must be given together")
    tls = AuthState(cert_pem=cert, key_pem=key)
    if user.get("auth-provider"):
        provider = (user.get("auth-provider") or {}).get("name", "?")
        raise ConfigError(
            f"{what}: auth-provider {provider!r} is not supported (removed from client-go); "
            "use an exec credential plugin"
        )
    if user.get("exec"):
        return ExecCredentials(
            _exec_config(user["exec"], base, what), cluster=cluster_info, base=tls
        )
    if user.get("token"):
        return StaticCredentials(AuthState(token=str(user["token"]), cert_pem=cert, key_pem=key))
    if user.get("tokenFile"):
        return TokenFileCredentials((base / str(user["tokenFile"])).expanduser(), base=tls)
    if user.get("username") or user.get("password"):
        basic = (str(user.get("username") or ""), str(user.get("password") or ""))
        return StaticCredentials(AuthState(basic=basic, cert_pem=cert, key_pem=key))
    return StaticCredentials(tls)


def _exec_config(raw: Any, base: Path, what: str) -> ExecConfig:
    if not isinstance(raw, dict) or not raw.get("command"):
        raise ConfigError(f"{what}: exec.command is required")
    api_version = str(raw.get("apiVersion") or "")
    if api_version not in EXEC_API_VERSIONS:
        raise ConfigError(
            f"{what}: exec.apiVersion {api_version!r} is not supported "
            f"(use one of {', '.join(EXEC_API_VERSIONS)})"
        )
    command = str(raw["command"])
    if os.sep in command and not os.path.isabs(command):
        command = str(base / command)  # client-go: relative to the kubeconfig's directory
    env_items: list[tuple[str, str]] = []
    for i, item in enumerate(raw.get("env") or []):
        if not isinstance(item, dict) or "name" not in item:
            raise ConfigError(f"{what}: exec.env[{i}] needs a name and a value")
        env_items.append((str(item["name"]), str(item.get("value") or "")))
    return ExecConfig(
        command=command,
        api_version=api_version,
        args=tuple(str(a) for a in raw.get("args") or ()),
        env=tuple(env_items),
        provide_cluster_info=raw.get("provideClusterInfo") is True,
        install_hint=str(raw.get("installHint") or ""),
    )
