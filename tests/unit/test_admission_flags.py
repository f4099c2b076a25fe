"""The `--admission-*` flags: parsed into the webhook's settings, or refused with the flag named;
and a controller without them never imports the webhook's crypto."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kube_reloader.cli.flags import FlagError, parse

NS = {"POD_NAMESPACE": "kube-system"}


def test_without_an_address_there_is_no_webhook() -> None:
    assert parse([], env=NS).admission is None


def test_the_flags_become_the_webhooks_settings() -> None:
    settings = parse(
        ["--admission-addr=:9443", "--admission-service=rel-admission",
         "--admission-webhook-config=rel", "--admission-ca-secret=rel-ca",
         "--admission-cert-validity=1h"],
        env=NS,
    ).admission  # fmt: skip
    assert settings is not None
    assert (settings.addr, settings.namespace) == (":9443", "kube-system")
    assert (settings.webhook_config, settings.ca_secret) == ("rel", "rel-ca")
    assert settings.cert_validity == 3600
    assert settings.hosts[0] == "rel-admission.kube-system.svc"
    assert "127.0.0.1" in settings.hosts


BAD = [
    (["--admission-addr=9443"], {**NS}, "--admission-addr"),
    (["--admission-addr=:9443"], {}, "POD_NAMESPACE"),
    (["--admission-addr=:9443", "--admission-cert-validity=5s"], NS, "--admission-cert-validity"),
    (["--admission-addr=:9443", "--admission-cert-validity=soon"], NS, "--admission-cert-validity"),
    (["--admission-addr=:9443", "--admission-ca-secret=Bad_Name"], NS, "--admission-ca-secret"),
    (["--admission-addr=:9443", "--admission-service=a/b"], NS, "--admission-service"),
    (["--admission-addr=:9443", "--admission-grace=soon"], NS, "--admission-grace"),
    (["--admission-addr=:9443", "--admission-grace=11s"], NS, "--admission-grace"),
]

GRACE = [
    # (argv, the grace the controller's fan-out uses)
    ([], 0.0),
    (["--admission-addr=:9443"], 2.0),
    (["--admission-addr=:9443", "--admission-grace=500ms"], 0.5),
    (["--admission-addr=:9443", "--admission-grace=0s"], 0.0),
    # the webhook writes nothing under these: nothing to wait for
    (["--admission-addr=:9443", "--reload-strategy=annotations"], 0.0),
    (["--admission-addr=:9443", "--compat=v2"], 0.0),
]


@pytest.mark.parametrize(("argv", "grace"), GRACE, ids=[" ".join(g[0]) or "none" for g in GRACE])
def test_the_admission_grace_applies_only_where_the_webhook_writes_hashes(
    argv: list[str], grace: float
) -> None:
    assert parse(argv, env=NS).options.admission_grace == grace


@pytest.mark.parametrize(
    ("argv", "env", "named"), BAD, ids=[b[2] + str(i) for i, b in enumerate(BAD)]
)
def test_a_bad_admission_flag_is_refused_naming_it(
    argv: list[str], env: dict[str, str], named: str
) -> None:
    with pytest.raises(FlagError, match=named):
        parse(argv, env=env)


def test_the_controller_alone_never_imports_cryptography() -> None:
    code = (
        "import sys, kube_reloader.cli.run, kube_reloader.runtime.manager;"
        "print('cryptography' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
