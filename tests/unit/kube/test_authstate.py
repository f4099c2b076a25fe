"""Credentials and keys in memory never show their values, whatever prints them."""

from __future__ import annotations

import pytest

from kube_reloader.kube.admissioncerts import Ca
from kube_reloader.kube.credentials import AuthState


@pytest.mark.parametrize(
    ("state", "shown"),
    [
        (AuthState(), "AuthState(set=[])"),
        (AuthState(token="s3cr3t-token"), "AuthState(set=['token'])"),
        (AuthState(basic=("user", "s3cr3t-pw")), "AuthState(set=['basic'])"),
        (
            AuthState(cert_pem=b"-----CERT s3cr3t", key_pem=b"-----KEY s3cr3t"),
            "AuthState(set=['cert_pem', 'key_pem'])",
        ),
    ],
)
def test_an_auth_state_names_what_is_set_and_never_its_value(state: AuthState, shown: str) -> None:
    for text in (repr(state), str(state), f"{state}", f"{[state]}"):
        assert "s3cr3t" not in text
    assert repr(state) == shown


def test_two_auth_states_still_compare_by_their_values() -> None:
    assert AuthState(token="a") == AuthState(token="a")
    assert AuthState(token="a") != AuthState(token="b")


def test_the_webhooks_ca_never_shows_its_private_key() -> None:
    ca = Ca(cert_pem=b"-----CERT", key_pem=b"-----KEY s3cr3t", bundle_pem=b"-----CERT")
    assert "s3cr3t" not in repr(ca)
    assert "s3cr3t" not in f"{ca}"
