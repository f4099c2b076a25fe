"""TLS to the API server: which certificates to trust and which one to present.

With a CA in the connection config, exactly that CA is trusted, not the system store;
`insecure-skip-tls-verify` verifies nothing. A client certificate is loaded through a
private, short-lived directory, since `ssl` only reads them from files.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from kube_reloader.kube import errors
from kube_reloader.kube.config import ConnectionConfig
from kube_reloader.kube.credentials import AuthState


def client_context(config: ConnectionConfig, auth: AuthState) -> ssl.SSLContext:
    """The context to reach `config.server` with, presenting `auth`'s client certificate."""
    if config.insecure_skip_tls_verify:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    elif config.ca_pem:
        # Trust exactly the cluster's CA, not the system store.
        try:
            ctx = ssl.create_default_context(
                ssl.Purpose.SERVER_AUTH, cadata=config.ca_pem.decode("ascii")
            )
        except (ssl.SSLError, UnicodeDecodeError, ValueError) as exc:
            raise errors.ConfigError(
                f"{config.source or config.server}: certificate authority is not valid PEM"
            ) from exc
    else:
        ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if auth.cert_pem and auth.key_pem:
        _load_cert_chain(ctx, auth.cert_pem, auth.key_pem, config.source)
    return ctx


def _load_cert_chain(ctx: ssl.SSLContext, cert: bytes, key: bytes, source: str) -> None:
    """`ssl` only loads client certificates from files: use a private, short-lived dir."""
    with tempfile.TemporaryDirectory(prefix="kube-reloader-tls-") as tmp:
        cert_path = os.path.join(tmp, "tls.crt")
        key_path = os.path.join(tmp, "tls.key")
        for path, data in ((cert_path, cert), (key_path, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        try:
            ctx.load_cert_chain(cert_path, key_path)
        except ssl.SSLError as exc:
            raise errors.ConfigError(
                f"{source}: client certificate/key cannot be loaded ({exc.reason})"
            ) from exc
