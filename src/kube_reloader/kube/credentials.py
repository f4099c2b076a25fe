"""Who we are to the API server: credentials that can refresh themselves.

Token files are re-read (bound service-account tokens rotate), exec plugins are re-run when
their credential expires or the server answers 401. Which of them a kubeconfig user stanza
describes is read in `kubeconfig`.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import msgspec

from kube_reloader.kube.errors import ConfigError

TOKEN_REREAD_SECONDS = 60.0
EXEC_EXPIRY_SKEW_SECONDS = 10.0
EXEC_API_VERSIONS = (
    "client.authentication.k8s.io/v1",
    "client.authentication.k8s.io/v1beta1",
)


class AuthState(msgspec.Struct, frozen=True):
    """What to present on the next request: a bearer token and/or a client certificate."""

    token: str | None = None
    basic: tuple[str, str] | None = None
    cert_pem: bytes | None = None
    key_pem: bytes | None = None

    def __repr__(self) -> str:
        """Which credentials are set, never their values (a repr can reach a log line)."""
        held = [n for n in ("token", "basic", "cert_pem", "key_pem") if getattr(self, n)]
        return f"AuthState(set={held})"


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


class ExecConfig(msgspec.Struct, frozen=True):
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
