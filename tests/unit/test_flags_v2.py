"""`--compat=v1|v2` and Reloader v2's flags (v2-spec §1): both modes accept every v2 flag; v2
mode adds viper's environment binding, v2's plain string lists and string booleans."""

from __future__ import annotations

import re
import socket
from typing import Any

import pytest

from kube_reloader.cli.flags import FlagError, RunSettings, parse
from kube_reloader.core.matching import Reason, decide
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.strategies import Compat, Strategy

V1, V2 = [], ["--compat=v2"]
HA_ENV = {"POD_NAME": "pod-a", "POD_NAMESPACE": "reloader"}


def parsed(argv: list[str], env: dict[str, str] | None = None) -> RunSettings:
    return parse(argv, env={} if env is None else env)


# ---------------------------------------------------------------------- --compat


@pytest.mark.parametrize(("argv", "compat", "manager"), [
    ([], Compat.V1, "Reloader"),
    (["--compat=v1"], Compat.V1, "Reloader"),
    (["--compat=v2"], Compat.V2, "reloader"),
    (["--compat", "v2"], Compat.V2, "reloader"),
])  # fmt: skip
def test_compat_sets_what_the_planner_writes_and_the_field_manager(
    argv: list[str], compat: Compat, manager: str
) -> None:
    s = parsed(argv)
    assert (s.compat, s.options.plan.compat, s.options.field_manager) == (compat, compat, manager)


@pytest.mark.parametrize("value", ["v3", "V2", "", "2"])
def test_an_unknown_compat_stops_the_start_with_one_line(value: str) -> None:
    with pytest.raises(FlagError) as info:
        parsed([f"--compat={value}"])
    assert str(info.value) == f"--compat: {value!r} must be v1 or v2"


def test_compat_is_not_read_from_the_environment() -> None:
    assert parsed([], {"COMPAT": "v2"}).compat is Compat.V1


# ---------------------------------------------------------------------- the v2 flags, both modes

ANNOTATION_DEFAULTS = [
    ("configmap_exclude", "configmaps.exclude.reloader.stakater.com/reload"),
    ("secret_exclude", "secrets.exclude.reloader.stakater.com/reload"),
    ("spc_reload", "secretproviderclass.reloader.stakater.com/reload"),
    ("spc_auto", "secretproviderclass.reloader.stakater.com/auto"),
    ("spc_exclude", "secretproviderclasses.exclude.reloader.stakater.com/reload"),
]


@pytest.mark.parametrize("mode", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize(("field", "default"), ANNOTATION_DEFAULTS)
def test_the_v2_annotation_flags_default_to_reloaders_keys(
    mode: list[str], field: str, default: str
) -> None:
    assert getattr(parsed(mode).options.plan.match.keys, field) == default


@pytest.mark.parametrize("mode", [V1, V2], ids=["v1", "v2"])
@pytest.mark.parametrize(("flag", "field"), [
    ("configmap-exclude-annotation", "configmap_exclude"),
    ("secret-exclude-annotation", "secret_exclude"),
    ("secretproviderclass-annotation", "spc_reload"),
    ("secretproviderclass-auto-annotation", "spc_auto"),
    ("secretproviderclass-exclude-annotation", "spc_exclude"),
])  # fmt: skip
def test_each_v2_annotation_flag_renames_its_key(mode: list[str], flag: str, field: str) -> None:
    keys = parsed([*mode, f"--{flag}=example.com/{flag}"]).options.plan.match.keys
    assert getattr(keys, field) == f"example.com/{flag}"


@pytest.mark.parametrize(("argv", "rtype", "workload", "reason"), [
    (["--configmap-exclude-annotation=x.io/no-cm"], ResourceType.CONFIGMAP,
     {"reloader.stakater.com/auto": "true", "x.io/no-cm": "c"}, Reason.EXCLUDED),
    (["--secret-exclude-annotation=x.io/no-s"], ResourceType.SECRET,
     {"reloader.stakater.com/auto": "true", "x.io/no-s": "c"}, Reason.EXCLUDED),
    (["--secretproviderclass-exclude-annotation=x.io/no-spc"], ResourceType.SECRETPROVIDERCLASS,
     {"reloader.stakater.com/auto": "true", "x.io/no-spc": "c"}, Reason.EXCLUDED),
    (["--secretproviderclass-annotation=x.io/spc"], ResourceType.SECRETPROVIDERCLASS,
     {"x.io/spc": "c"}, Reason.NAMED),
    (["--secretproviderclass-auto-annotation=x.io/spc-auto"], ResourceType.SECRETPROVIDERCLASS,
     {"x.io/spc-auto": "true"}, Reason.AUTO),
    # the default key no longer counts once renamed
    (["--configmap-exclude-annotation=x.io/no-cm"], ResourceType.CONFIGMAP,
     {"reloader.stakater.com/auto": "true",
      "configmaps.exclude.reloader.stakater.com/reload": "c"}, Reason.AUTO),
])  # fmt: skip
def test_the_decision_reads_the_renamed_exclude_and_spc_keys(
    argv: list[str], rtype: ResourceType, workload: dict[str, str], reason: Reason
) -> None:
    config = parsed(argv).options.plan.match
    decision = decide(
        rtype=rtype, name="c", resource_annotations={}, kind="Deployment",
        workload_annotations=workload, template_annotations={}, config=config,
    )  # fmt: skip
    assert decision.reason is reason


@pytest.mark.parametrize("mode", [V1, V2], ids=["v1", "v2"])
def test_the_v2_flags_default_to_no_alerts_and_a_released_lease(mode: list[str]) -> None:
    s = parsed([*mode, "--enable-ha"], HA_ENV)
    assert s.options.alerts is None
    assert s.ha is not None
    assert (s.ha.namespace, s.ha.release_on_cancel) == ("reloader", True)


# ---------------------------------------------------------------------- leader election


@pytest.mark.parametrize(("argv", "lock", "namespace", "release"), [
    ([], "stakater-reloader-lock", "reloader", True),
    (V2, "reloader-leader-election", "reloader", True),
    (["--leader-election-id=my-lock"], "my-lock", "reloader", True),
    ([*V2, "--leader-election-id=my-lock"], "my-lock", "reloader", True),
    ([*V2, "--leader-election-namespace=elect"], "reloader-leader-election", "elect", True),
    (["--leader-election-namespace=elect"], "stakater-reloader-lock", "elect", True),
    ([*V2, "--leader-election-release-on-cancel=false"], "reloader-leader-election", "reloader",
     False),
    (["--leader-election-release-on-cancel=false"], "stakater-reloader-lock", "reloader", False),
])  # fmt: skip
def test_the_lease_name_namespace_and_release_follow_the_mode_and_the_flags(
    argv: list[str], lock: str, namespace: str, release: bool
) -> None:
    ha = parsed([*argv, "--enable-ha"], HA_ENV).ha
    assert ha is not None
    assert (ha.lock_name, ha.namespace, ha.release_on_cancel) == (lock, namespace, release)


@pytest.mark.parametrize(("mode", "identity"), [
    (V1, re.escape("pod-a")),
    (V2, re.escape(socket.gethostname()) + "_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}"),
])  # fmt: skip
def test_the_lease_holder_is_pod_name_in_v1_and_hostname_and_a_uuid_in_v2_as_each_campaigns(
    mode: list[str], identity: str
) -> None:
    first, second = (parsed([*mode, "--enable-ha"], HA_ENV).ha for _ in range(2))
    assert first is not None
    assert second is not None
    assert re.fullmatch(identity, first.identity), first.identity
    assert (first.identity == second.identity) is (mode == V1), "v2: a new identity per start"


@pytest.mark.parametrize(("argv", "message"), [
    (["--leader-election-id=Bad_Lock"], "--leader-election-id: 'Bad_Lock' is not a valid Lease"),
    (["--leader-election-id="], "--leader-election-id: '' is not a valid Lease name"),
    (["--leader-election-namespace=Bad_NS"],
     "--leader-election-namespace: 'Bad_NS' is not a valid namespace name"),
    (["--enable-ha", "--leader-election-retry-period=0s"],
     "leader election durations must be positive"),
])  # fmt: skip
def test_bad_leader_election_values_stop_the_start_with_one_line(
    argv: list[str], message: str
) -> None:
    with pytest.raises(FlagError, match=message):
        parsed(argv, HA_ENV)


def test_v2_reads_a_zero_duration_as_its_default() -> None:
    ha = parsed([*V2, "--enable-ha", "--leader-election-lease-duration=0"], HA_ENV).ha
    assert ha is not None
    assert ha.timing.lease_duration == 15.0


# ---------------------------------------------------------------------- health address


@pytest.mark.parametrize(("argv", "env", "addr"), [
    ([], {}, None),
    (["--health-addr=127.0.0.1:8081"], {}, "127.0.0.1:8081"),
    (V2, {}, ":8080"),
    ([*V2, "--health-addr=127.0.0.1:8081"], {}, "127.0.0.1:8081"),
    (V2, {"HEALTH_ADDR": ":8181"}, ":8181"),
    ([], {"HEALTH_ADDR": ":8181"}, None),
])  # fmt: skip
def test_the_health_listener_is_v2s_default_and_in_v1_only_when_asked_for(
    argv: list[str], env: dict[str, str], addr: str | None
) -> None:
    assert parsed(argv, env).health_addr == addr


def test_a_health_address_without_a_port_stops_the_start() -> None:
    with pytest.raises(FlagError, match="--health-addr: '8080' is not host:port"):
        parsed([*V2, "--health-addr=8080"])


@pytest.mark.parametrize(("argv", "metrics", "health"), [
    ([*V2, "--metrics-addr=0"], None, ":8080"),
    ([*V2, "--health-addr=0"], ":9090", None),
    ([*V2, "--metrics-addr=0", "--health-addr=0"], None, None),
    ([*V2, "--metrics-addr=127.0.0.1:9191"], "127.0.0.1:9191", ":8080"),
    ([*V2, "--metrics-addr=", "--health-addr="], ":8080", None),
])  # fmt: skip
def test_v2_reads_address_zero_and_empty_as_controller_runtime_does(
    argv: list[str], metrics: str | None, health: str | None
) -> None:
    s = parsed(argv)
    assert (s.metrics_addr, s.health_addr) == (metrics, health)


def test_v2_reads_address_zero_from_its_environment_too() -> None:
    assert parsed(V2, {"METRICS_ADDR": "0"}).metrics_addr is None


def test_v1_refuses_address_zero_as_before() -> None:
    with pytest.raises(FlagError, match="--metrics-addr: '0' is not host:port"):
        parsed(["--metrics-addr=0"])


@pytest.mark.parametrize(("argv", "fmt", "level"), [
    ([], "", "info"),
    (["--log-level=", "--log-format=json"], "json", "info"),
    (["--log-level=trace"], "", "trace"),
    (["--log-level=warning"], "", "warning"),
    (["--log-level=error"], "", "error"),
])  # fmt: skip
def test_v2_takes_its_own_log_levels_and_formats(argv: list[str], fmt: str, level: str) -> None:
    s = parsed([*V2, *argv])
    assert (s.log_format, s.log_level) == (fmt, level)
    assert not s.warnings


@pytest.mark.parametrize(("argv", "message"), [
    (["--log-level=INFO"], "--log-level: unsupported log level: 'INFO'"),
    (["--log-level=fatal"], "--log-level: unsupported log level: 'fatal'"),
    (["--log-format=text"], "--log-format: unsupported log format: 'text'"),
    (["--log-format=JSON"], "--log-format: unsupported log format: 'JSON'"),
])  # fmt: skip
def test_v2_stops_at_start_on_a_log_flag_it_does_not_know_where_v1_starts(
    argv: list[str], message: str
) -> None:
    with pytest.raises(FlagError, match=message):
        parsed([*V2, *argv])
    assert parsed(argv).compat is Compat.V1  # v1 reads it, or warns and uses its default


# ---------------------------------------------------------------------- v2: the environment


def ha_of(s: RunSettings) -> Any:
    assert s.ha is not None
    return s.ha


@pytest.mark.parametrize(("argv", "env", "read", "want"), [
    ([], {"RELOAD_STRATEGY": "annotations"}, lambda s: s.options.plan.strategy,
     Strategy.ANNOTATIONS),
    (["--reload-strategy=env-vars"], {"RELOAD_STRATEGY": "annotations"},
     lambda s: s.options.plan.strategy, Strategy.ENV_VARS),
    ([], {"RELOAD_STRATEGY": ""}, lambda s: s.options.plan.strategy, Strategy.ENV_VARS),
    ([], {"AUTO_RELOAD_ALL": "T"}, lambda s: s.options.plan.match.auto_reload_all, True),
    ([], {"AUTO_RELOAD_ALL": "yes"}, lambda s: s.options.plan.match.auto_reload_all, False),
    (["--auto-reload-all=false"], {"AUTO_RELOAD_ALL": "true"},
     lambda s: s.options.plan.match.auto_reload_all, False),
    (["--enable-ha"], {**HA_ENV, "LEADER_ELECTION_RELEASE_ON_CANCEL": "maybe"},
     lambda s: ha_of(s).release_on_cancel, False),
    ([], {"ENABLE_HA": "1", **HA_ENV}, lambda s: s.ha is not None, True),
    ([], {"NAMESPACES": "a b\tc"}, lambda s: s.options.namespaces, ("a", "b", "c")),
    (["--namespaces=x"], {"NAMESPACES": "a b"}, lambda s: s.options.namespaces, ("x",)),
    ([], {"NAMESPACE_SELECTOR": "team=web env!=dev"}, lambda s: s.options.namespace_selector,
     "team=web,env!=dev"),
    ([], {"IS_ARGO_ROLLOUTS": "yes"}, lambda s: s.options.argo_rollouts, True),
    ([], {"RELOAD_ON_DELETE": " TRUE "}, lambda s: s.options.reload_on_delete, True),
    ([], {"CONFIGMAP_EXCLUDE_ANNOTATION": "x.io/no"},
     lambda s: s.options.plan.match.keys.configmap_exclude, "x.io/no"),
    ([], {"LOG_LEVEL": "debug"}, lambda s: s.log_level, "debug"),
    ([], {"METRICS_ADDR": "127.0.0.1:9191"}, lambda s: s.metrics_addr, "127.0.0.1:9191"),
    (["--enable-ha"], {**HA_ENV, "LEADER_ELECTION_ID": "from-env"},
     lambda s: ha_of(s).lock_name, "from-env"),
    (["--enable-ha"], {**HA_ENV, "LEADER_ELECTION_NAMESPACE": "elect"},
     lambda s: ha_of(s).namespace, "elect"),
    (["--enable-ha"], {**HA_ENV, "LEADER_ELECTION_LEASE_DURATION": "20s"},
     lambda s: ha_of(s).timing.lease_duration, 20.0),
    (["--enable-ha"], {**HA_ENV, "LEADER_ELECTION_LEASE_DURATION": "30000000000"},
     lambda s: ha_of(s).timing.lease_duration, pytest.approx(30.0)),
    (["--enable-ha"], {**HA_ENV, "LEADER_ELECTION_LEASE_DURATION": "soon"},
     lambda s: ha_of(s).timing.lease_duration, 15.0),
    ([], {"WORKERS": "9", "CONTEXT": "other"}, lambda s: (s.options.workers, s.context),
     (4, None)),
    ([], {"RESOURCES_TO_IGNORE": "secrets"}, lambda s: s.options.resources,
     (ResourceType.CONFIGMAP,)),
    ([], {"NAMESPACES_TO_IGNORE": "kube-system, tools"},
     lambda s: s.options.namespaces_to_ignore, frozenset({"kube-system", "tools"})),
])  # fmt: skip
def test_v2_reads_every_v2_flag_from_its_environment_variable_below_the_command_line(
    argv: list[str], env: dict[str, str], read: Any, want: object
) -> None:
    assert read(parsed([*V2, *argv], env)) == want


@pytest.mark.parametrize(("env", "read", "want"), [
    ({"RELOAD_STRATEGY": "annotations"}, lambda s: s.options.plan.strategy, Strategy.ENV_VARS),
    ({"AUTO_RELOAD_ALL": "true"}, lambda s: s.options.plan.match.auto_reload_all, False),
    ({"NAMESPACES": "a"}, lambda s: s.options.namespaces, None),
    ({"IS_ARGO_ROLLOUTS": "true"}, lambda s: s.options.argo_rollouts, False),
])  # fmt: skip
def test_v1_reads_no_flag_from_the_environment(
    env: dict[str, str], read: Any, want: object
) -> None:
    assert read(parsed(V1, env)) == want


def test_v2_splits_a_list_from_the_environment_on_white_space_only() -> None:
    with pytest.raises(FlagError, match="--namespaces: 'a,b' is not a valid namespace name"):
        parsed(V2, {"NAMESPACES": "a,b"})


# ---------------------------------------------------------------------- v2: plain string lists


@pytest.mark.parametrize(("argv", "resources"), [
    (["--resources-to-ignore=configMaps"], (ResourceType.SECRET,)),
    (["--resources-to-ignore= secrets ,"], (ResourceType.CONFIGMAP,)),
    (["--resources-to-ignore=configmaps,secrets"], ()),
    (["--resources-to-ignore=pods"], (ResourceType.CONFIGMAP, ResourceType.SECRET)),
    (["--resources-to-ignore=secrets", "--resources-to-ignore=configmaps"],
     (ResourceType.SECRET,)),
])  # fmt: skip
def test_v2_resources_to_ignore_is_a_last_wins_string_that_ignores_unknown_values(
    argv: list[str], resources: tuple[ResourceType, ...]
) -> None:
    assert parsed([*V2, *argv]).options.resources == resources


@pytest.mark.parametrize(("value", "gone"), [
    ("jobs,cronjobs", {WorkloadKind.JOB, WorkloadKind.CRONJOB}),
    (" Deployments , daemonset", {WorkloadKind.DEPLOYMENT, WorkloadKind.DAEMONSET}),
    ("StatefulSet", {WorkloadKind.STATEFULSET}),
    ("job,,", {WorkloadKind.JOB}),
])  # fmt: skip
def test_v2_ignored_workload_types_take_v2s_kind_names_and_are_never_watched(
    value: str, gone: set[str]
) -> None:
    o = parsed([*V2, f"--ignored-workload-types={value}"]).options
    assert set(o.workload_kinds) == set(WorkloadKind) - gone - {
        WorkloadKind.ROLLOUT, WorkloadKind.DEPLOYMENTCONFIG,
    }  # fmt: skip
    assert o.plan.match.ignored_workload_types == ()


@pytest.mark.parametrize(("value", "argo", "dc"), [
    ("rollouts", False, True), ("deploymentconfig", True, False), ("", True, True),
])  # fmt: skip
def test_v2_ignoring_rollouts_or_deploymentconfigs_stops_watching_them(
    value: str, argo: bool, dc: bool
) -> None:
    o = parsed([*V2, "--is-Argo-Rollouts=true", f"--ignored-workload-types={value}"]).options
    assert (o.argo_rollouts, o.deployment_configs) == (argo, dc)


def test_v2_an_unknown_workload_type_stops_the_start_with_one_line() -> None:
    with pytest.raises(FlagError) as info:
        parsed([*V2, "--ignored-workload-types=jobs,Pods"])
    assert str(info.value) == "--ignored-workload-types: unknown workload type 'pods'"


def test_v2_the_last_ignored_workload_types_wins() -> None:
    kinds = parsed(
        [*V2, "--ignored-workload-types=jobs", "--ignored-workload-types=cronjobs"]
    ).options.workload_kinds
    assert (WorkloadKind.JOB in kinds, WorkloadKind.CRONJOB in kinds) == (True, False)


@pytest.mark.parametrize(("argv", "ignored"), [
    ([*V2, "--namespaces-to-ignore=a,b", "--namespaces-to-ignore= c , "], {"c"}),
    ([*V1, "--namespaces-to-ignore=a,b", "--namespaces-to-ignore=c"], {"a", "b", "c"}),
])  # fmt: skip
def test_namespaces_to_ignore_is_last_wins_in_v2_and_repeats_in_v1(
    argv: list[str], ignored: set[str]
) -> None:
    assert parsed(argv).options.namespaces_to_ignore == ignored


def test_v1_keeps_its_strict_resources_to_ignore() -> None:
    with pytest.raises(FlagError, match="only one of configmaps or secrets"):
        parsed(["--resources-to-ignore=configmaps,secrets"])


def test_v2_accepts_an_empty_reload_strategy_as_env_vars_where_v1_refuses_it() -> None:
    assert parsed([*V2, "--reload-strategy="]).options.plan.strategy is Strategy.ENV_VARS
    with pytest.raises(FlagError, match="--reload-strategy: '' must be env-vars or annotations"):
        parsed(["--reload-strategy="])


# ---------------------------------------------------------------------- string booleans


@pytest.mark.parametrize(("value", "v1", "v2"), [
    ("true", True, True), ("1", False, True), ("yes", False, True), (" TRUE ", False, True),
    ("Yes", False, True), ("t", False, False), ("no", False, False), ("false", False, False),
])  # fmt: skip
def test_string_booleans_are_exactly_true_in_v1_and_true_1_or_yes_in_v2(
    value: str, v1: bool, v2: bool
) -> None:
    argv = [f"--reload-on-create={value}", f"--reload-on-delete={value}",
            f"--is-Argo-Rollouts={value}"]  # fmt: skip
    for mode, want in ((V1, v1), (V2, v2)):
        o = parsed([*mode, *argv]).options
        assert (o.reload_on_create, o.reload_on_delete, o.argo_rollouts) == (want, want, want)


# ---------------------------------------------------------------------- alerts

FLAGS = ["--alert-on-reload", "--alert-webhook-url=http://hook", "--alert-sink=Slack",
         "--alert-proxy=http://proxy:3128", "--alert-additional-info=prod",
         "--alert-structured"]  # fmt: skip


@pytest.mark.parametrize("mode", [V1, V2], ids=["v1", "v2"])
def test_the_alert_flags_feed_the_alert_settings_in_both_modes(mode: list[str]) -> None:
    a = parsed([*mode, *FLAGS]).options.alerts
    assert a is not None
    assert (a.url, a.sink, a.proxy, a.additional_info, a.structured) == (
        "http://hook", "slack", "http://proxy:3128", "prod", True,
    )  # fmt: skip


@pytest.mark.parametrize(("argv", "env", "want"), [
    # v1: ALERT_* as Reloader v1 reads them; a flag wins over its variable
    (V1, {"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": " http://env "}, ("http://env", "")),
    (V1, {"ALERT_WEBHOOK_URL": "http://env"}, None),
    (V1, {"ALERT_ON_RELOAD": "1", "ALERT_WEBHOOK_URL": "http://env"}, None),
    ([*V1, "--alert-webhook-url=http://flag"], {"ALERT_WEBHOOK_URL": "http://env"},
     ("http://flag", "")),
    ([*V1, "--alert-on-reload", "--alert-sink=teams"],
     {"ALERT_WEBHOOK_URL": "http://env", "ALERT_SINK": "slack"}, ("http://env", "teams")),
    # v2: the variables are the flags; a URL alone turns alerting on
    (V2, {"ALERT_WEBHOOK_URL": "http://env"}, ("http://env", "")),
    (V2, {"ALERT_ON_RELOAD": "1", "ALERT_WEBHOOK_URL": "http://env", "ALERT_SINK": "GChat"},
     ("http://env", "gchat")),
    ([*V2, "--alert-webhook-url=http://flag"], {"ALERT_WEBHOOK_URL": "http://env"},
     ("http://flag", "")),
    (V2, {"ALERT_ON_RELOAD": "true"}, None),
    (V2, {}, None),
])  # fmt: skip
def test_alerts_are_enabled_as_the_mode_enables_them(
    argv: list[str], env: dict[str, str], want: tuple[str, str] | None
) -> None:
    a = parsed(argv, env).options.alerts
    assert (None if a is None else (a.url, a.sink)) == want


@pytest.mark.parametrize(("argv", "env", "proxy"), [
    (V2, {"ALERT_PROXY": "http://a", "ALERT_WEBHOOK_PROXY": "http://b"}, "http://a"),
    (V2, {"ALERT_PROXY": "", "ALERT_WEBHOOK_PROXY": "http://b"}, "http://b"),
    ([*V2, "--alert-proxy=http://c"], {"ALERT_PROXY": "http://a"}, "http://c"),
    (V1, {"ALERT_PROXY": "http://a", "ALERT_WEBHOOK_PROXY": "http://b"}, "http://b"),
])  # fmt: skip
def test_the_alert_proxy_comes_from_alert_proxy_then_alert_webhook_proxy(
    argv: list[str], env: dict[str, str], proxy: str
) -> None:
    env = {**env, "ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": "http://hook"}
    a = parsed(argv, env).options.alerts
    assert a is not None
    assert a.proxy == proxy


def test_v2_alert_on_reload_without_a_url_warns_and_sends_nothing() -> None:
    s = parsed([*V2, "--alert-on-reload"])
    assert s.options.alerts is None
    assert any("--alert-webhook-url is empty" in w for w in s.warnings)


def test_v2_alert_structured_comes_from_its_variable() -> None:
    env = {"ALERT_WEBHOOK_URL": "http://hook", "ALERT_STRUCTURED": "true"}
    a = parsed(V2, env).options.alerts
    assert a is not None
    assert a.structured is True


@pytest.mark.parametrize(("element", "v1", "v2"), [
    ("team:web", "team=web", None), ("team:*", "team", None), ("team=*", "team", None),
    ("team=web", "team=web", "team=web"), ("env in (a,b)", "env in (a,b)", "env in (a,b)"),
    ("!canary", "!canary", "!canary"),
])  # fmt: skip
def test_v1s_legacy_selector_forms_are_rewritten_in_v1_and_refused_in_v2(
    element: str, v1: str, v2: str | None
) -> None:
    for flag, read in (("namespace-selector", lambda o: o.namespace_selector),
                       ("resource-label-selector", lambda o: o.resource_label_selector)):  # fmt: skip
        assert read(parsed([f"--{flag}={element}"]).options) == v1
        if v2 is None:
            with pytest.raises(FlagError, match=f"--{flag}: .* is not a valid label selector"):
                parsed([*V2, f"--{flag}={element}"])
        else:
            assert read(parsed([*V2, f"--{flag}={element}"]).options) == v2
