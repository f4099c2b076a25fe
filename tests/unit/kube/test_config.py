"""Kubeconfig loading, merging and credentials (no network)."""

from __future__ import annotations

import base64
import json
import stat
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from kube_reloader.kube import config, credentials, proxies
from kube_reloader.kube.errors import ConfigError


def write(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc))
    return path


def kubeconfig(
    *,
    clusters: dict[str, dict[str, Any]] | None = None,
    users: dict[str, dict[str, Any]] | None = None,
    contexts: dict[str, dict[str, Any]] | None = None,
    current: str | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": k, "cluster": v} for k, v in (clusters or {}).items()],
        "users": [{"name": k, "user": v} for k, v in (users or {}).items()],
        "contexts": [{"name": k, "context": v} for k, v in (contexts or {}).items()],
    }
    if current:
        doc["current-context"] = current
    return doc


def simple(
    server: str = "https://a:6443", token: str = "t", ns: str | None = None
) -> dict[str, Any]:
    ctx: dict[str, Any] = {"cluster": "c", "user": "u"}
    if ns:
        ctx["namespace"] = ns
    return kubeconfig(
        clusters={"c": {"server": server}},
        users={"u": {"token": token}},
        contexts={"x": ctx},
        current="x",
    )


async def test_token_user_yields_a_bearer_token_and_the_context_namespace(tmp_path: Path) -> None:
    cfg = config.load_kubeconfig([write(tmp_path / "k", simple(ns="team-a"))])
    assert cfg.server == "https://a:6443"
    assert cfg.namespace == "team-a"
    assert (await cfg.credentials.current()).token == "t"


def test_namespace_defaults_to_default(tmp_path: Path) -> None:
    assert config.load_kubeconfig([write(tmp_path / "k", simple())]).namespace == "default"


async def test_first_file_to_define_a_name_wins_when_merging(tmp_path: Path) -> None:
    first = write(tmp_path / "1", kubeconfig(users={"u": {"token": "first"}}, current="x"))
    second = write(
        tmp_path / "2",
        kubeconfig(
            clusters={"c": {"server": "https://second"}},
            users={"u": {"token": "second"}},
            contexts={"x": {"cluster": "c", "user": "u"}, "y": {"cluster": "c", "user": "u"}},
            current="y",
        ),
    )
    cfg = config.load_kubeconfig([first, second])
    assert cfg.server == "https://second"
    assert (await cfg.credentials.current()).token == "first"
    assert "'x'" in cfg.source  # current-context from the first file that sets one


def test_kubeconfig_env_var_lists_several_files_and_skips_missing_ones(tmp_path: Path) -> None:
    real = write(tmp_path / "real", simple(server="https://from-env"))
    env = {"KUBECONFIG": f"{tmp_path / 'missing'}:{real}", "HOME": str(tmp_path)}
    assert config.load(env=env).server == "https://from-env"


def test_explicit_kubeconfig_wins_over_the_environment(tmp_path: Path) -> None:
    explicit = write(tmp_path / "explicit", simple(server="https://explicit"))
    env_file = write(tmp_path / "env", simple(server="https://env"))
    cfg = config.load(explicit, env={"KUBECONFIG": str(env_file)})
    assert cfg.server == "https://explicit"


def test_home_kubeconfig_is_used_when_nothing_else_is_set(tmp_path: Path) -> None:
    write(tmp_path / ".kube" / "config", simple(server="https://home"))
    assert config.load(env={"HOME": str(tmp_path)}).server == "https://home"


def test_context_flag_selects_another_context(tmp_path: Path) -> None:
    doc = simple()
    doc["clusters"].append({"name": "other", "cluster": {"server": "https://other"}})
    doc["contexts"].append({"name": "o", "context": {"cluster": "other", "user": "u"}})
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)], context="o")
    assert cfg.server == "https://other"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update({"current-context": "nope"}), "context 'nope' not found (contexts: x)"),
        (lambda d: d.pop("current-context"), "no current-context is set"),
        (lambda d: d["contexts"][0]["context"].update(cluster="zz"), "names cluster 'zz', not defined"),
        (lambda d: d["contexts"][0]["context"].update(user="zz"), "names user 'zz', not defined"),
        (lambda d: d["clusters"][0]["cluster"].pop("server"), "cluster 'c' has no server"),
        (lambda d: d["users"][0]["user"].update({"client-certificate-data": "bm90"}), "client-certificate and client-key must be given together"),
        (lambda d: d["clusters"][0]["cluster"].update({"certificate-authority-data": "%%%"}), "certificate-authority-data is not valid base64"),
        (lambda d: d["clusters"][0]["cluster"].update({"certificate-authority": "nope.crt"}), "certificate-authority"),
        (lambda d: d["users"][0]["user"].update({"auth-provider": {"name": "gcp"}}), "auth-provider 'gcp' is not supported"),
        (lambda d: d["users"][0]["user"].update({"exec": {"command": "x", "apiVersion": "client.authentication.k8s.io/v1alpha1"}}), "exec.apiVersion"),
        (lambda d: d["users"][0]["user"].update({"exec": {"apiVersion": "client.authentication.k8s.io/v1"}}), "exec.command is required"),
    ],
    ids=[
        "unknown context", "no current context", "unknown cluster", "unknown user",
        "cluster without server", "half a client certificate", "bad base64 CA",
        "missing CA file", "legacy auth provider", "unsupported exec version", "exec without command",
    ],
)  # fmt: skip
def test_bad_kubeconfig_gives_one_line_naming_the_file_and_field(
    tmp_path: Path, mutate: Any, message: str
) -> None:
    doc = simple()
    mutate(doc)
    path = write(tmp_path / "k", doc)
    with pytest.raises(ConfigError) as info:
        config.load_kubeconfig([path])
    text = str(info.value)
    assert message in text
    assert str(path) in text
    assert "\n" not in text


def test_broken_yaml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text("apiVersion: v1\nclusters:\n  - name: [unclosed\n")
    with pytest.raises(ConfigError, match=rf"kubeconfig {path}:\d+: not valid YAML"):
        config.load_kubeconfig([path])


@pytest.mark.parametrize(
    "text",
    [
        json.dumps(simple(ns="n")),
        "  " + json.dumps(simple(ns="n"), indent=2),
        # starts like JSON but is YAML's flow style: read as YAML
        "{apiVersion: v1, kind: Config, clusters: [{name: c, cluster: {server: 'https://a:6443'}}],"
        " users: [{name: u, user: {token: t}}], contexts: [{name: x, context: {cluster: c,"
        " user: u, namespace: n}}], current-context: x}",
    ],
    ids=["JSON", "indented JSON", "YAML flow style"],
)
def test_a_kubeconfig_in_json_or_yamls_flow_style_reads_as_its_yaml_form(
    tmp_path: Path, text: str
) -> None:
    as_yaml = config.load_kubeconfig([write(tmp_path / "y", simple(ns="n"))], env={})
    path = tmp_path / "j"
    path.write_text(text)
    got = config.load_kubeconfig([path], env={})
    assert (got.server, got.namespace, got.source.replace("/j", "/y")) == (
        as_yaml.server, as_yaml.namespace, as_yaml.source,
    )  # fmt: skip


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_a_json_looking_kubeconfig_with_a_bare_nan_or_infinity_reads_them_as_yaml_strings(
    tmp_path: Path, token: str
) -> None:
    path = tmp_path / "k"
    path.write_text(json.dumps(simple(ns="PLACE")).replace('"PLACE"', token))
    assert config.load_kubeconfig([path], env={}).namespace == token


def test_json_nested_past_pythons_stack_is_an_error_of_the_file_not_a_crash(
    tmp_path: Path,
) -> None:
    path = tmp_path / "k"
    path.write_text('{"a": ' * 200_000 + "1" + "}" * 200_000)
    with pytest.raises(ConfigError, match=rf"kubeconfig {path}"):
        config.load_kubeconfig([path])


def test_broken_json_names_the_file_as_yaml_does(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text('{"apiVersion": "v1", "clusters": [\n')
    with pytest.raises(ConfigError, match=rf"kubeconfig {path}:\d+: not valid YAML"):
        config.load_kubeconfig([path])


def test_missing_single_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="file does not exist"):
        config.load_kubeconfig([tmp_path / "nope"])


def test_no_credentials_anywhere_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass --kubeconfig, set KUBECONFIG"):
        config.load(env={"HOME": str(tmp_path)})


async def test_files_resolve_relative_to_the_kubeconfig_and_data_fields_win(tmp_path: Path) -> None:
    d = tmp_path / "conf"
    d.mkdir()
    (d / "ca.crt").write_bytes(b"CA-FROM-FILE")
    (d / "c.crt").write_bytes(b"CERT")
    (d / "c.key").write_bytes(b"KEY")
    doc = kubeconfig(
        clusters={"c": {"server": "https://s", "certificate-authority": "ca.crt"}},
        users={"u": {"client-certificate": "c.crt", "client-key": "c.key"}},
        contexts={"x": {"cluster": "c", "user": "u"}},
        current="x",
    )
    cfg = config.load_kubeconfig([write(d / "k", doc)])
    assert cfg.ca_pem == b"CA-FROM-FILE"
    state = await cfg.credentials.current()
    assert (state.cert_pem, state.key_pem, state.token) == (b"CERT", b"KEY", None)

    doc["clusters"][0]["cluster"]["certificate-authority-data"] = base64.b64encode(
        b"CA-DATA"
    ).decode()
    assert config.load_kubeconfig([write(d / "k2", doc)]).ca_pem == b"CA-DATA"


def test_insecure_and_tls_server_name_are_carried(tmp_path: Path) -> None:
    doc = simple()
    doc["clusters"][0]["cluster"].update(
        {"insecure-skip-tls-verify": True, "tls-server-name": "api.internal"}
    )
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)])
    assert cfg.insecure_skip_tls_verify is True
    assert cfg.tls_server_name == "api.internal"


async def test_basic_auth_user_is_supported(tmp_path: Path) -> None:
    doc = simple()
    doc["users"][0]["user"] = {"username": "me", "password": "pw"}
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)])
    assert (await cfg.credentials.current()).basic == ("me", "pw")


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_token_file_is_reread_after_the_interval_and_after_a_401(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("one\n")
    clock = FakeClock()
    creds = credentials.TokenFileCredentials(token, reread_seconds=60, clock=clock)
    assert (await creds.current()).token == "one"
    token.write_text("two")
    clock.now += 30
    assert (await creds.current()).token == "one", "not re-read before the interval"
    clock.now += 31
    assert (await creds.current()).token == "two"
    token.write_text("three")
    assert await creds.invalidate() is True
    assert (await creds.current()).token == "three"
    assert await creds.invalidate() is False, "unchanged token: a retry would not help"


async def test_empty_token_file_is_a_clear_error(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("  \n")
    with pytest.raises(ConfigError, match=f"token file {token}: is empty"):
        await credentials.TokenFileCredentials(token).current()


async def test_in_cluster_reads_service_account_files(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    (tmp_path / "namespace").write_text("reloader\n")
    env = {
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "HOME": str(tmp_path),
    }
    cfg = config.load(env=env, in_cluster_root=tmp_path)
    assert cfg.server == "https://10.0.0.1:443"
    assert cfg.namespace == "reloader"
    assert cfg.ca_pem == b"CA"
    assert isinstance(cfg.credentials, credentials.TokenFileCredentials)
    assert (await cfg.credentials.current()).token == "sa-token"


def test_a_kubeconfig_variable_naming_no_file_falls_back_to_the_service_account_in_a_pod(
    tmp_path: Path,
) -> None:
    (tmp_path / "token").write_text("sa-token")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    env = {"KUBECONFIG": str(tmp_path / "gone"), "KUBERNETES_SERVICE_HOST": "10.0.0.1",
           "HOME": str(tmp_path)}  # fmt: skip
    assert config.load(env=env, in_cluster_root=tmp_path).server == "https://10.0.0.1:443"
    del env["KUBERNETES_SERVICE_HOST"]
    with pytest.raises(ConfigError, match="gone"):
        config.load(env=env, in_cluster_root=tmp_path)


def test_in_cluster_ipv6_host_is_bracketed(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    cfg = config.load_in_cluster(env={"KUBERNETES_SERVICE_HOST": "fd00::1"}, root=tmp_path)
    assert cfg.server == "https://[fd00::1]:443"


def test_in_cluster_without_a_token_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"token file .* does not exist"):
        config.load_in_cluster(env={"KUBERNETES_SERVICE_HOST": "h"}, root=tmp_path)


# ----------------------------------------------------------------------- exec plugins


def plugin(tmp_path: Path, body: str) -> Path:
    """A real executable exec plugin written in Python."""
    path = tmp_path / "plugin.py"
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


COUNTING_PLUGIN = """
    import json, os, sys, pathlib
    info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
    counter = pathlib.Path(sys.argv[1])
    n = int(counter.read_text()) + 1 if counter.exists() else 1
    counter.write_text(str(n))
    status = {"token": f"token-{n}-{os.environ.get('EXTRA', '')}"}
    if len(sys.argv) > 2:
        status["expirationTimestamp"] = sys.argv[2]
    if info["spec"].get("cluster"):
        status["token"] += "-" + info["spec"]["cluster"]["server"]
    print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential", "status": status}))
"""


@pytest.mark.parametrize(
    "api_version", ["client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"]
)
async def test_exec_plugin_provides_a_token_and_is_cached(tmp_path: Path, api_version: str) -> None:
    script = plugin(tmp_path, COUNTING_PLUGIN)
    doc = simple()
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": api_version,
            "command": str(script),
            "args": [str(tmp_path / "count")],
            "env": [{"name": "EXTRA", "value": "x"}],
        }
    }
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)])
    assert (await cfg.credentials.current()).token == "token-1-x"
    assert (await cfg.credentials.current()).token == "token-1-x", "no expiry: cached"
    assert await cfg.credentials.invalidate() is True
    assert (await cfg.credentials.current()).token == "token-2-x", "re-run after a 401"


async def test_exec_plugin_reruns_when_its_credential_expires(tmp_path: Path) -> None:
    script = plugin(tmp_path, COUNTING_PLUGIN)
    clock = FakeClock()
    clock.now = 1_800_000_000.0  # 2027-01-15T08:00:00Z
    creds = credentials.ExecCredentials(
        credentials.ExecConfig(
            command=str(script),
            api_version="client.authentication.k8s.io/v1",
            args=(str(tmp_path / "count"), "2027-01-15T08:05:00Z"),
        ),
        clock=clock,
    )
    assert (await creds.current()).token == "token-1-"
    clock.now += 200
    assert (await creds.current()).token == "token-1-"
    clock.now += 95  # within the 10 s skew of the expiry
    assert (await creds.current()).token == "token-2-"


async def test_exec_plugin_gets_cluster_info_when_asked(tmp_path: Path) -> None:
    script = plugin(tmp_path, COUNTING_PLUGIN)
    doc = simple(server="https://api.example:6443")
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(script),
            "args": [str(tmp_path / "count")],
            "provideClusterInfo": True,
        }
    }
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)])
    assert (await cfg.credentials.current()).token == "token-1--https://api.example:6443"


async def test_exec_plugin_client_certificate_is_used(tmp_path: Path) -> None:
    script = plugin(
        tmp_path,
        """
        import json, os
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                          "status": {"clientCertificateData": "CERT", "clientKeyData": "KEY"}}))
        """,
    )
    creds = credentials.ExecCredentials(
        credentials.ExecConfig(command=str(script), api_version="client.authentication.k8s.io/v1")
    )
    state = await creds.current()
    assert (state.cert_pem, state.key_pem, state.token) == (b"CERT", b"KEY", None)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("import sys; sys.stderr.write('login required\\n'); sys.exit(3)", "exited with code 3: login required"),
        ("print('not json')", "printed something that is not JSON"),
        ("import json; print(json.dumps({'kind': 'Other'}))", "output is not an ExecCredential"),
        ("import json; print(json.dumps({'kind': 'ExecCredential', 'apiVersion': 'client.authentication.k8s.io/v1beta1', 'status': {'token': 't'}}))", "does not match the requested"),
        ("import json; print(json.dumps({'kind': 'ExecCredential', 'apiVersion': 'client.authentication.k8s.io/v1', 'status': {}}))", "neither a token nor a client certificate"),
        ("import json; print(json.dumps({'kind': 'ExecCredential', 'apiVersion': 'client.authentication.k8s.io/v1', 'status': {'token': 't', 'expirationTimestamp': 'soon'}}))", "is not RFC 3339"),
    ],
    ids=["non-zero exit", "not json", "wrong kind", "wrong version", "empty status", "bad expiry"],
)  # fmt: skip
async def test_exec_plugin_failures_are_clear_config_errors(
    tmp_path: Path, body: str, message: str
) -> None:
    script = plugin(tmp_path, body)
    creds = credentials.ExecCredentials(
        credentials.ExecConfig(command=str(script), api_version="client.authentication.k8s.io/v1")
    )
    with pytest.raises(ConfigError, match=message):
        await creds.current()


async def test_missing_exec_plugin_shows_its_install_hint(tmp_path: Path) -> None:
    creds = credentials.ExecCredentials(
        credentials.ExecConfig(
            command=str(tmp_path / "nope"),
            api_version="client.authentication.k8s.io/v1",
            install_hint="install it with: brew install nope",
        )
    )
    with pytest.raises(
        ConfigError, match=r"cannot be started: .*install it with: brew install nope"
    ):
        await creds.current()


def test_relative_exec_command_resolves_against_the_kubeconfig_directory(tmp_path: Path) -> None:
    doc = simple()
    doc["users"][0]["user"] = {
        "exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "./bin/auth"}
    }
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)])
    assert isinstance(cfg.credentials, credentials.ExecCredentials)
    assert cfg.credentials._config.command == str(tmp_path.resolve() / "./bin/auth")
    json.dumps(doc)  # the document stays plain data


# ----------------------------------------------------------------------- typed fields


def cluster_field(key: str, value: Any) -> Any:
    return lambda d: d["clusters"][0]["cluster"].update({key: value})


def user_field(key: str, value: Any) -> Any:
    return lambda d: d["users"][0]["user"].update({key: value})


def exec_field(key: str, value: Any) -> Any:
    stanza = {"apiVersion": "client.authentication.k8s.io/v1", "command": "x", key: value}
    return user_field("exec", stanza)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (cluster_field("insecure-skip-tls-verify", "false"), "cluster 'c': insecure-skip-tls-verify must be true or false (a YAML boolean, not quoted), not the string 'false'"),
        (cluster_field("insecure-skip-tls-verify", "true"), "insecure-skip-tls-verify must be true or false"),
        (cluster_field("insecure-skip-tls-verify", 0), "insecure-skip-tls-verify must be true or false (a YAML boolean, not quoted), not the number 0"),
        (cluster_field("disable-compression", "yes"), "disable-compression must be true or false"),
        (exec_field("provideClusterInfo", "true"), "user 'u': exec: provideClusterInfo must be true or false"),
        (cluster_field("server", 6443), "server must be a string, not the number 6443"),
        (cluster_field("proxy-url", ["http://p"]), "proxy-url must be a string, not a list"),
        (user_field("token", 12345), "user 'u': token must be a string, not the number 12345"),
        (user_field("exec", "kubelogin"), "exec must be a mapping, not the string 'kubelogin'"),
        (user_field("as-groups", "admins"), "as-groups must be a list of strings"),
        (exec_field("args", ["--port", 8000]), "exec: args must be a list of strings, not a list"),
        (exec_field("env", [{"name": "N", "value": 1}]), "exec.env[0]: value must be a string, not the number 1"),
        (exec_field("env", ["N=1"]), "exec.env[0] must be a mapping"),
        (lambda d: d["contexts"][0]["context"].update(namespace=7), "context 'x': namespace must be a string"),
        (lambda d: d["clusters"][0].update(name=True), "clusters[0]: name must be a string, not the boolean true"),
        (lambda d: d.update({"current-context": False}), "current-context must be a string"),
    ],
    ids=[
        "quoted false", "quoted true", "number for a boolean", "yes as a string",
        "quoted exec boolean", "number for a string", "list for a string", "numeric token",
        "string for a mapping", "string for a string list", "number in a string list",
        "number as an env value", "env entry not a mapping", "numeric namespace",
        "boolean name", "boolean current-context",
    ],
)  # fmt: skip
def test_a_field_of_the_wrong_type_is_a_one_line_error_naming_the_file_and_field(
    tmp_path: Path, mutate: Any, message: str
) -> None:
    doc = simple()
    mutate(doc)
    path = write(tmp_path / "k", doc)
    with pytest.raises(ConfigError) as info:
        config.load_kubeconfig([path], env={})
    text = str(info.value)
    assert message in text
    assert f"kubeconfig {path}" in text
    assert "\n" not in text


@pytest.mark.parametrize(
    ("value", "insecure"),
    [(True, True), (False, False), (None, False)],
    ids=["true", "false", "null"],
)
def test_a_real_yaml_boolean_is_read_as_such(tmp_path: Path, value: Any, insecure: bool) -> None:
    path = tmp_path / "k"
    path.write_text(
        yaml.safe_dump(simple()).replace(
            "server: https://a:6443",
            f"server: https://a:6443\n    insecure-skip-tls-verify: {json.dumps(value)}",
        )
    )
    assert config.load_kubeconfig([path], env={}).insecure_skip_tls_verify is insecure


def test_a_mistyped_field_fails_even_in_an_entry_the_context_does_not_use(tmp_path: Path) -> None:
    doc = simple()
    doc["clusters"].append(
        {"name": "unused", "cluster": {"server": "https://b", "insecure-skip-tls-verify": "false"}}
    )
    with pytest.raises(ConfigError, match="cluster 'unused': insecure-skip-tls-verify must be"):
        config.load_kubeconfig([write(tmp_path / "k", doc)], env={})


def test_a_mistyped_field_names_the_file_that_holds_it_when_merging(tmp_path: Path) -> None:
    good = write(tmp_path / "good", simple())
    bad_doc = kubeconfig(users={"other": {"token": 1}})
    bad = write(tmp_path / "bad", bad_doc)
    with pytest.raises(ConfigError, match=rf"^kubeconfig {bad}: user 'other': token must be"):
        config.load_kubeconfig([good, bad], env={})


def test_an_unquoted_date_stays_a_string_as_go_reads_it(tmp_path: Path) -> None:
    path = tmp_path / "k"
    path.write_text(yaml.safe_dump(simple(ns="placeholder")).replace("placeholder", "2026-12-01"))
    assert config.load_kubeconfig([path], env={}).namespace == "2026-12-01"


def test_base64_data_folded_over_several_lines_is_decoded_as_go_does(tmp_path: Path) -> None:
    doc = simple()
    encoded = base64.b64encode(b"A" * 100).decode()
    folded = "\n".join(encoded[i : i + 40] for i in range(0, len(encoded), 40))
    doc["clusters"][0]["cluster"]["certificate-authority-data"] = folded
    assert config.load_kubeconfig([write(tmp_path / "k", doc)], env={}).ca_pem == b"A" * 100


@pytest.mark.parametrize(
    "ca", [{"certificate-authority-data": "Q0E="}, {"certificate-authority": "missing.crt"}]
)
def test_a_ca_together_with_insecure_skip_tls_verify_is_rejected_as_client_go_does(
    tmp_path: Path, ca: dict[str, str]
) -> None:
    doc = simple()
    doc["clusters"][0]["cluster"].update({"insecure-skip-tls-verify": True, **ca})
    path = write(tmp_path / "k", doc)
    with pytest.raises(ConfigError) as info:
        config.load_kubeconfig([path], env={})
    text = str(info.value)
    assert f"kubeconfig {path}: cluster 'c'" in text
    assert "specifying a root certificates file with the insecure flag is not allowed" in text
    assert "\n" not in text


def test_a_connection_config_with_both_a_ca_and_insecure_cannot_be_built() -> None:
    with pytest.raises(ConfigError, match="insecure flag is not allowed"):
        config.ConnectionConfig(
            server="https://a",
            credentials=credentials.StaticCredentials(credentials.AuthState()),
            ca_pem=b"CA",
            insecure_skip_tls_verify=True,
        )


# ----------------------------------------------------------------------- proxies

PROXY = "http://proxy.corp:3128"


@pytest.mark.parametrize(
    ("server", "env", "expected"),
    [
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY}, PROXY),
        ("https://api.example:6443", {"https_proxy": PROXY}, PROXY),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "https_proxy": "http://lower:1"}, PROXY),
        ("https://api.example:6443", {"HTTPS_PROXY": "", "https_proxy": PROXY}, PROXY),
        ("https://api.example:6443", {"HTTP_PROXY": PROXY}, None),
        ("http://api.example:8080", {"HTTP_PROXY": PROXY}, PROXY),
        ("http://api.example:8080", {"HTTPS_PROXY": PROXY}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": "proxy.corp:3128"}, PROXY),
        ("https://api.example:6443", {"HTTPS_PROXY": "10.0.0.9:3128"}, "http://10.0.0.9:3128"),
        ("https://api.example:6443", {"HTTPS_PROXY": "https://proxy.corp"}, "https://proxy.corp"),
        ("https://api.example:6443", {"HTTPS_PROXY": "http://proxy.corp:port"}, None),
        ("https://localhost:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://127.0.0.1:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://127.8.9.10:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://[::1]:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://[::ffff:127.0.0.1]:6443", {"HTTPS_PROXY": PROXY}, None),
        ("https://localhost.example:6443", {"HTTPS_PROXY": PROXY}, PROXY),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "*"}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "a.b, *"}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example"}, None),
        ("https://API.Example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": " Api.EXAMPLE "}, None),
        ("https://k8s.api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example"}, None),
        ("https://myapi.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example"}, PROXY),
        ("https://k8s.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": ".example"}, None),
        ("https://example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": ".example"}, PROXY),
        ("https://k8s.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "*.example"}, None),
        ("https://example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "*.example"}, PROXY),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example:6443"}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example:443"}, PROXY),
        ("https://api.example", {"HTTPS_PROXY": PROXY, "NO_PROXY": "api.example:443"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.0.0.0/8"}, None),
        ("https://11.1.2.3:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.0.0.0/8"}, PROXY),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.1.2.3"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.1.2.3:6443"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "10.1.2.3:443"}, PROXY),
        ("https://[fd00::1]:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "fd00::/8"}, None),
        ("https://[fd00::1]:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "[fd00::1]:6443"}, None),
        ("https://10.1.2.3:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "3"}, PROXY),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "no_proxy": "api.example"}, None),
        ("https://api.example:6443", {"HTTPS_PROXY": PROXY, "NO_PROXY": "other", "no_proxy": "api.example"}, PROXY),
    ],
    ids=[
        "https proxy", "lower case", "upper case first", "empty upper falls back",
        "http proxy is not for https", "http proxy for http", "https proxy is not for http",
        "host:port means http", "ip:port means http", "https proxy scheme", "unparseable is ignored",
        "localhost", "loopback", "all of 127/8", "ipv6 loopback", "ipv4-mapped loopback",
        "localhost is a whole name", "star", "star among others", "exact host", "case and spaces",
        "bare domain matches subdomains", "bare domain is not a substring", "dot domain subdomain",
        "dot domain not itself", "star-dot subdomain", "star-dot not itself", "port matches",
        "port differs", "default port", "cidr", "outside cidr", "exact ip", "ip and port",
        "ip and other port", "ipv6 cidr", "bracketed ipv6 and port", "domain entry never matches ip",
        "lower-case no_proxy", "upper-case no_proxy first",
    ],
)  # fmt: skip
def test_the_proxy_is_chosen_from_the_environment_as_go_chooses_it(
    server: str, env: dict[str, str], expected: str | None
) -> None:
    assert proxies.proxy_for(server, env) == expected


def test_http_proxy_is_refused_in_a_cgi_environment_as_go_does() -> None:
    with pytest.raises(ConfigError, match="CGI"):
        proxies.proxy_for("http://a:80", {"HTTP_PROXY": PROXY, "REQUEST_METHOD": "GET"})


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("socks5://proxy:1080", "SOCKS proxies are not supported"),
        ("ftp://proxy:21", "unsupported scheme 'ftp', must be http or https"),
    ],
    ids=["socks5", "ftp"],
)
def test_an_unsupported_proxy_is_a_clear_error(value: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        proxies.proxy_for("https://api:6443", {"HTTPS_PROXY": value})
    with pytest.raises(ConfigError, match=f"proxy-url '{value}': {message}"):
        proxies.proxy_for("https://api:6443", {}, value)


def test_the_cluster_proxy_url_wins_over_the_environment_and_no_proxy(tmp_path: Path) -> None:
    doc = simple(server="https://127.0.0.1:6443")
    doc["clusters"][0]["cluster"]["proxy-url"] = "http://u:p@kube-proxy:8080"
    env = {"HTTPS_PROXY": PROXY, "NO_PROXY": "*"}
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)], env=env)
    assert cfg.proxy == "http://u:p@kube-proxy:8080"


def test_a_bad_proxy_url_names_the_file_and_cluster(tmp_path: Path) -> None:
    doc = simple()
    doc["clusters"][0]["cluster"]["proxy-url"] = "proxy:3128"  # Go reads "proxy" as the scheme
    path = write(tmp_path / "k", doc)
    with pytest.raises(ConfigError, match=rf"kubeconfig {path}: cluster 'c': proxy-url"):
        config.load_kubeconfig([path], env={})


def test_kubeconfig_and_in_cluster_loading_take_the_proxy_from_the_environment(
    tmp_path: Path,
) -> None:
    env = {"HTTPS_PROXY": PROXY, "HOME": str(tmp_path)}
    cfg = config.load(write(tmp_path / "k", simple()), env=env)
    assert cfg.proxy == PROXY
    (tmp_path / "token").write_text("t")
    (tmp_path / "ca.crt").write_bytes(b"CA")
    env["KUBERNETES_SERVICE_HOST"] = "10.96.0.1"
    assert config.load_in_cluster(env=env, root=tmp_path).proxy == PROXY
    env["NO_PROXY"] = "10.96.0.0/12"
    assert config.load_in_cluster(env=env, root=tmp_path).proxy is None


async def test_exec_plugin_cluster_info_carries_the_proxy_url(tmp_path: Path) -> None:
    script = plugin(
        tmp_path,
        """
        import json, os
        info = json.loads(os.environ["KUBERNETES_EXEC_INFO"])
        token = info["spec"]["cluster"]["proxy-url"]
        print(json.dumps({"apiVersion": info["apiVersion"], "kind": "ExecCredential",
                          "status": {"token": token}}))
        """,
    )
    doc = simple()
    doc["clusters"][0]["cluster"]["proxy-url"] = "http://kube-proxy:8080"
    doc["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": str(script),
            "provideClusterInfo": True,
        }
    }
    cfg = config.load_kubeconfig([write(tmp_path / "k", doc)], env={})
    assert (await cfg.credentials.current()).token == "http://kube-proxy:8080"
