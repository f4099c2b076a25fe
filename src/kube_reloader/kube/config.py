"""Where the API server is and who we are to it: kubeconfig files and in-cluster credentials.

Follows client-go's loading rules so kube-reloader connects wherever kubectl and Reloader do:
an explicit `--kubeconfig`, else every file in `KUBECONFIG` merged (the first file to define a
name wins, relative paths resolve against the file that holds them), else `~/.kube/config`,
else the pod's service account. As in Reloader, a `KUBECONFIG` that names no existing file
in a pod (`KUBERNETES_SERVICE_HOST` set) falls back to the service account. The files are
read in `kubeconfig`, the credentials (which refresh themselves) live in `credentials`, and
the proxy is chosen in `proxies`.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from kube_reloader.kube.credentials import Credentials, TokenFileCredentials
from kube_reloader.kube.errors import ConfigError
from kube_reloader.kube.kubeconfig import Entry, Merged, bytes_field, merge, user_credentials
from kube_reloader.kube.proxies import proxy_for

IN_CLUSTER_ROOT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class ConnectionConfig(msgspec.Struct, frozen=True):
    """Everything the client needs to reach and authenticate to one API server."""

    server: str
    credentials: Credentials
    ca_pem: bytes | None = None
    insecure_skip_tls_verify: bool = False
    tls_server_name: str | None = None
    namespace: str = "default"
    source: str = ""
    extra: Mapping[str, Any] = msgspec.field(default_factory=dict)
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
        if any(p.exists() for p in paths) or not env.get("KUBERNETES_SERVICE_HOST"):
            return load_kubeconfig(paths, context=context, env=env)
        # Reloader: a KUBECONFIG that names no file falls back to the service account
        return load_in_cluster(env=env, root=in_cluster_root)
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
    merged = merge(paths)
    where = "kubeconfig " + os.pathsep.join(str(p) for p in paths)
    name, ctx = _context(merged, context, where)
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
    ca = bytes_field(cluster, "certificate-authority", cluster_dir, what)
    proxy_url = str(cluster.get("proxy-url") or "")
    proxy = proxy_for(server, env, proxy_url, what=what)
    user, user_file, user_dir = _user(merged, ctx, user_name, f"{where}: context {name!r}")
    cluster_info = {
        "server": server,
        "certificate-authority-data": base64.b64encode(ca).decode() if ca else None,
        "insecure-skip-tls-verify": insecure,
        "tls-server-name": cluster.get("tls-server-name"),
        "proxy-url": proxy_url or None,
        "disable-compression": cluster.get("disable-compression") is True,
    }
    user_what = f"kubeconfig {user_file}: user {user_name!r}"
    credentials = user_credentials(user, user_dir, user_what, cluster_info)
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


def _context(merged: Merged, context: str | None, where: str) -> tuple[str, Entry]:
    """The context to use (`--context`, else the current-context): its name and entry."""
    name = context or merged.current_context
    if not name:
        raise ConfigError(f"{where}: no current-context is set and no --context was given")
    ctx = merged.contexts.get(name)
    if ctx is None:
        known = ", ".join(sorted(merged.contexts)) or "none"
        raise ConfigError(f"{where}: context {name!r} not found (contexts: {known})")
    return name, ctx


def _user(merged: Merged, ctx: Entry, user_name: str, what: str) -> Entry:
    """The user the context names, or an empty one (from the context's file) when it names
    none."""
    if not user_name:
        return Entry({}, ctx.file, ctx.base)
    if user_name not in merged.users:
        raise ConfigError(f"{what} names user {user_name!r}, not defined")
    return merged.users[user_name]
