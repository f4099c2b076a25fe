"""What kubeconfig files say, read as client-go reads them.

Files are merged (the first file to define a name wins, relative paths resolve against the
file that holds them), and fields are typed as client-go's structs type them:
`insecure-skip-tls-verify: "false"` (a string) fails to load, as it does for kubectl, rather
than being read as "true" because it is not empty. A user stanza becomes the `credentials`
object it describes. Which files to read and which context to use is decided in `config`.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from kube_reloader.kube.credentials import (
    EXEC_API_VERSIONS,
    AuthState,
    Credentials,
    ExecConfig,
    ExecCredentials,
    StaticCredentials,
    TokenFileCredentials,
)
from kube_reloader.kube.errors import ConfigError

if TYPE_CHECKING:
    import yaml


class Entry(NamedTuple):
    """One named cluster, user or context, and where it was defined."""

    body: Mapping[str, Any]
    file: Path  # the file that defines it, for messages
    base: Path  # its directory, for relative paths


@dataclass
class Merged:
    """The clusters, users and contexts of several files, each as its first file defines it."""

    clusters: dict[str, Entry] = field(default_factory=dict)
    users: dict[str, Entry] = field(default_factory=dict)
    contexts: dict[str, Entry] = field(default_factory=dict)
    current_context: str = ""


def merge(paths: list[Path]) -> Merged:
    """Read, type-check and merge kubeconfig files in order (missing ones skipped if several)."""
    merged = Merged()
    found = False
    for path in paths:
        if not path.exists():
            if len(paths) == 1:
                raise ConfigError(f"kubeconfig {path}: file does not exist")
            continue  # client-go skips missing files in KUBECONFIG
        found = True
        doc = _document(path)
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
                target.setdefault(str(entry["name"]), Entry(body, path, base))
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


def _document(path: Path) -> Any:
    """The file's document. JSON, which client-go's reader turns every kubeconfig into, is
    read as JSON: no YAML parser is loaded for it (~15 ms of a start's CPU). Anything else is
    YAML, with libyaml's parser where PyYAML has it."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"kubeconfig {path}: cannot be read: {exc.strerror}") from exc
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text, parse_constant=_not_json)
        except (ValueError, RecursionError):
            pass  # a YAML flow mapping, NaN, nesting past Python's stack: YAML decides
    import yaml  # only for a YAML kubeconfig: an in-cluster start never parses any

    try:
        return yaml.load(text, Loader=_loader()) or {}  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise ConfigError(f"kubeconfig {path}{line}: not valid YAML") from exc


def _not_json(token: str) -> Any:
    """`NaN` and `Infinity` are not JSON: YAML reads them as strings, as Go's decoder would."""
    raise ValueError(token)


@functools.cache
def _loader() -> type[yaml.SafeLoader] | type[yaml.CSafeLoader]:
    """YAML as Go's decoder reads it into JSON: an unquoted date stays a string."""
    import yaml

    class Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
        pass

    Loader.yaml_implicit_resolvers = {
        first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    return Loader


# ----------------------------------------------------------------------- certificates and users


def bytes_field(body: Mapping[str, Any], key: str, base: Path, what: str) -> bytes | None:
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


def user_credentials(
    user: Mapping[str, Any], base: Path, what: str, cluster_info: Mapping[str, Any]
) -> Credentials:
    """The credentials a user stanza describes: exec plugin, token, token file, basic or TLS."""
    cert = bytes_field(user, "client-certificate", base, what)
    key = bytes_field(user, "client-key", base, what)
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
