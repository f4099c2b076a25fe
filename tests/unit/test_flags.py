"""Reloader v1's flags: names, types, defaults, pflag parsing and validation."""

from __future__ import annotations

import re

import pytest

from kube_reloader.cli.flags import FlagError, parse
from kube_reloader.core.evicting import PodStrategy
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.strategies import Strategy


def test_defaults_match_reloader_v1() -> None:
    s = parse([], env={})
    o = s.options
    assert o.plan.strategy is Strategy.ENV_VARS
    assert o.plan.match.auto_reload_all is False
    assert o.plan.match.keys.auto == "reloader.stakater.com/auto"
    assert o.plan.match.keys.ignore == "reloader.stakater.com/ignore"
    assert o.namespaces is None
    assert o.resources == (ResourceType.CONFIGMAP, ResourceType.SECRET)
    assert (o.reload_on_create, o.reload_on_delete, o.sync_after_restart) == (False, False, False)
    assert (s.log_format, s.log_level) == ("", "info")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--auto-reload-all"], True),
        (["--auto-reload-all=true"], True),
        (["--auto-reload-all=True"], True),
        (["--auto-reload-all=1"], True),
        (["--auto-reload-all=false"], False),
        (["--auto-reload-all=0"], False),
    ],
)
def test_bool_flags_follow_pflag(argv: list[str], expected: bool) -> None:
    assert parse(argv, env={}).options.plan.match.auto_reload_all is expected


def test_a_bool_flag_does_not_take_a_separate_value() -> None:
    with pytest.raises(FlagError, match="unrecognized arguments: false"):
        parse(["--auto-reload-all", "false"], env={})


@pytest.mark.parametrize(
    ("value", "on"), [("true", True), ("True", False), ("1", False), ("false", False)]
)
def test_string_booleans_count_only_when_exactly_true(value: str, on: bool) -> None:
    o = parse([f"--reload-on-create={value}", "--reload-on-delete", value], env={}).options
    assert (o.reload_on_create, o.reload_on_delete) == (on, on)


def test_annotation_flags_rename_keys() -> None:
    keys = parse(
        ["--auto-annotation=example.com/auto", "--configmap-annotation", "example.com/cm"], env={}
    ).options.plan.match.keys
    assert (keys.auto, keys.configmap_reload) == ("example.com/auto", "example.com/cm")


def test_slices_repeat_and_split_as_csv() -> None:
    o = parse(["--namespaces=a,b", "--namespaces", "c"], env={}).options
    assert o.namespaces == ("a", "b", "c")
    sel = parse(
        ['--namespace-selector="env in (prod,stage)"', "--namespace-selector=team:web"], env={}
    ).options
    assert sel.namespace_selector == "env in (prod,stage),team=web"


@pytest.mark.parametrize(("elements", "selector"), [
    (["a:b"], "a=b"), (["a:*"], "a"), (["a=*"], "a"), (["a=b,c!=d"], "a=b,c!=d"), (["!x"], "!x"),
])  # fmt: skip
def test_legacy_selector_forms_are_rewritten(elements: list[str], selector: str) -> None:
    argv = [f"--resource-label-selector={e}" for e in elements]
    assert parse(argv, env={}).options.resource_label_selector == selector


def test_kubernetes_namespace_env_selects_single_namespace_mode() -> None:
    assert parse([], env={"KUBERNETES_NAMESPACE": "team"}).options.namespaces == ("team",)
    assert parse(["--namespaces=x"], env={"KUBERNETES_NAMESPACE": "team"}).options.namespaces == (
        "x",
    )


def test_resources_to_ignore_is_case_insensitive_and_limited_to_one() -> None:
    assert parse(["--resources-to-ignore=configMaps"], env={}).options.resources == (
        ResourceType.SECRET,
    )
    with pytest.raises(FlagError, match="only one of configmaps or secrets"):
        parse(["--resources-to-ignore=configmaps,secrets"], env={})


def test_invalid_ignored_workload_types_warn_and_disable_the_filter() -> None:
    s = parse(["--ignored-workload-types=Jobs"], env={})
    assert s.options.plan.match.ignored_workload_types == ("Jobs",)
    assert any("filter is disabled" in w for w in s.warnings)


def test_the_argo_flag_keeps_its_capitals_and_accepts_the_readme_spelling() -> None:
    assert parse(["--is-Argo-Rollouts=false"], env={}).options is not None
    assert parse(["--is-argo-rollouts=false"], env={}).options is not None


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (
            ["--reload-strategy=rolling"],
            {},
            "--reload-strategy: 'rolling' must be env-vars or annotations",
        ),
        (
            ["--resources-to-ignore=pods"],
            {},
            "--resources-to-ignore: 'pods' must be configmaps or secrets",
        ),
        (["--no-such-flag"], {}, "unrecognized arguments: --no-such-flag"),
        (["--namespaces=Bad_Name"], {}, "--namespaces: 'Bad_Name' is not a valid namespace name"),
        (
            ["--namespace-selector=a in b"],
            {},
            "--namespace-selector: 'a in b' is not a valid label selector",
        ),
        (["--webhook-url=ftp://x"], {}, "--webhook-url: 'ftp://x' is not an http(s) URL"),
        (
            ["--enable-ha"],
            {},
            "--enable-ha: the POD_NAME and POD_NAMESPACE environment variables are required",
        ),
        (
            ["--enable-ha", "--leader-election-lease-duration=5s"],
            {"POD_NAME": "a", "POD_NAMESPACE": "n"},
            "--leader-election-lease-duration must be greater than --leader-election-renew-deadline",
        ),
        (
            ["--enable-ha", "--leader-election-retry-period=9s"],
            {"POD_NAME": "a", "POD_NAMESPACE": "n"},
            "--leader-election-renew-deadline must be greater than 1.2 x --leader-election-retry-period",
        ),
        (
            ["--leader-election-retry-period=2"],
            {},
            "--leader-election-retry-period: '2' is not a duration",
        ),
        (["--metrics-addr=9090"], {}, "--metrics-addr: '9090' is not host:port"),
        (["--workers=0"], {}, "--workers: must be at least 1"),
    ],
)
def test_invalid_or_unavailable_settings_fail_with_one_line_naming_them(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(FlagError) as info:
        parse(argv, env=env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_namespace_selector_is_ignored_in_scoped_mode_with_a_warning() -> None:
    s = parse(["--namespaces=a", "--namespace-selector=x=y"], env={})
    assert s.options.namespace_selector == ""
    assert any("--namespace-selector" in w for w in s.warnings)


def test_side_channel_settings_come_from_flags_and_environment() -> None:
    env = {"ALERT_ON_RELOAD": "true", "ALERT_WEBHOOK_URL": " http://hook ", "ALERT_SINK": " Slack ",
           "ALERT_ADDITIONAL_INFO": " prod ", "ALERT_WEBHOOK_PROXY": "http://proxy:3128"}  # fmt: skip
    o = parse(
        ["--webhook-url=http://x", "--is-Argo-Rollouts=true", "--enable-csi-integration"], env=env
    ).options
    assert o.webhook_url == "http://x"
    assert o.argo_rollouts is True
    assert o.csi is True
    assert o.alerts is not None
    assert (o.alerts.url, o.alerts.sink, o.alerts.additional_info, o.alerts.proxy) == (
        "http://hook", "slack", "prod", "http://proxy:3128",
    )  # fmt: skip


def test_alerts_need_exactly_true_and_a_url() -> None:
    assert (
        parse([], env={"ALERT_ON_RELOAD": "True", "ALERT_WEBHOOK_URL": "http://h"}).options.alerts
        is None
    )
    s = parse([], env={"ALERT_ON_RELOAD": "true"})
    assert s.options.alerts is None
    assert any("ALERT_WEBHOOK_URL is empty" in w for w in s.warnings)


def test_ignored_workload_types_are_not_watched() -> None:
    from kube_reloader.core.objects import WorkloadKind

    kinds = parse(["--ignored-workload-types=jobs,cronjobs"], env={}).options.workload_kinds
    assert WorkloadKind.JOB not in kinds
    assert WorkloadKind.CRONJOB not in kinds
    assert WorkloadKind.DEPLOYMENT in kinds


def test_ha_settings_and_pprof_address() -> None:
    s = parse(["--enable-ha", "--leader-election-lease-duration=4s", "--leader-election-renew-deadline=3s",
               "--leader-election-retry-period=1s", "--enable-pprof"], env={"POD_NAME": "a", "POD_NAMESPACE": "n"})  # fmt: skip
    assert s.ha is not None
    assert (s.ha.identity, s.ha.namespace) == ("a", "n")
    assert (s.ha.timing.lease_duration, s.ha.timing.renew_deadline, s.ha.timing.retry_period) == (
        4,
        3,
        1,
    )
    assert s.pprof_addr == "127.0.0.1:6060", "the default pprof address binds to loopback"
    assert (
        parse(["--enable-pprof", "--pprof-addr=0.0.0.0:7000"], env={}).pprof_addr == "0.0.0.0:7000"
    )
    assert parse([], env={}).pprof_addr is None


def test_coalescing_and_rate_limit_flags() -> None:
    o = parse([], env={}).options
    assert (o.coalesce_window, o.min_interval, o.reload_rate, o.reload_burst) == (
        0.3,
        5.0,
        50.0,
        200.0,
    )
    o = parse(
        ["--reload-coalesce-window=0", "--reload-min-interval=1m", "--reload-rate=0"], env={}
    ).options
    assert (o.coalesce_window, o.min_interval, o.reload_rate) == (0.0, 60.0, 0.0)
    with pytest.raises(FlagError, match="--reload-min-interval: 'soon' is not a duration"):
        parse(["--reload-min-interval=soon"], env={})
    with pytest.raises(FlagError, match="--reload-coalesce-window: must not be negative"):
        parse(["--reload-coalesce-window=-1s"], env={})


def test_the_hash_algorithm_defaults_to_reloaders_sha1() -> None:
    assert parse([], env={}).hash_key is None


def test_hmac_sha256_names_the_key_secret_in_the_controllers_namespace() -> None:
    s = parse(["--hash-algorithm=hmac-sha256"], env={"POD_NAMESPACE": "reloader"})
    assert s.hash_key is not None
    assert (s.hash_key.namespace, s.hash_key.secret) == ("reloader", "kube-reloader-hash-key")


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--hash-algorithm=md5"], {}, "must be sha1 or hmac-sha256"),
        (["--hash-algorithm=hmac-sha256"], {}, "POD_NAMESPACE environment variable is required"),
        (["--hash-algorithm=hmac-sha256", "--hash-key-secret=Bad_Name"], {"POD_NAMESPACE": "r"},
         "is not a valid name"),
    ],
)  # fmt: skip
def test_bad_hash_settings_stop_the_start_with_one_line(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    with pytest.raises(FlagError, match=message):
        parse(argv, env=env)


@pytest.mark.parametrize(
    ("argv", "want"),
    [([], PodStrategy.PATCH), (["--default-strategy=evict"], PodStrategy.EVICT),
     (["--default-strategy", "patch"], PodStrategy.PATCH)],
)  # fmt: skip
def test_the_default_strategy_is_the_template_patch_unless_evict_is_asked(
    argv: list[str], want: PodStrategy
) -> None:
    assert parse(argv, env={}).options.default_strategy is want


def test_an_unknown_default_strategy_stops_the_start_with_one_line() -> None:
    with pytest.raises(FlagError, match="--default-strategy: 'delete' must be patch or evict"):
        parse(["--default-strategy=delete"], env={})


@pytest.mark.parametrize(
    ("argv", "cap", "halt", "freeze", "policies"),
    [
        ([], 0, 0, False, True),
        (["--max-concurrent-rollouts=10", "--halt-after-failures", "3"], 10, 3, False, True),
        (["--freeze"], 0, 0, True, True),
        (["--freeze=false", "--namespace-policies=false"], 0, 0, False, False),
    ],
)
def test_the_fleet_safety_flags_set_their_options(
    argv: list[str], cap: int, halt: int, freeze: bool, policies: bool
) -> None:
    o = parse(argv, env={}).options
    assert (o.max_concurrent_rollouts, o.halt_after_failures) == (cap, halt)
    assert (o.freeze, o.namespace_policies) == (freeze, policies)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["--max-concurrent-rollouts=-1"],
            "--max-concurrent-rollouts: '-1' must be a whole number",
        ),
        (["--halt-after-failures=lots"], "--halt-after-failures: 'lots' must be a whole number"),
        (["--max-concurrent-rollouts=1000001"], "from 0 to 100000"),
        (["--freeze=maybe"], "--freeze: 'maybe' must be true or false"),
    ],
)
def test_a_bad_fleet_safety_flag_stops_with_one_line_naming_it(
    argv: list[str], message: str
) -> None:
    with pytest.raises(FlagError, match=re.escape(message)):
        parse(argv, env={})


@pytest.mark.parametrize(
    ("argv", "fmt", "level", "warning"),
    [
        (["--log-level=WARNING"], "", "warning", None),
        (["--log-level=Info"], "", "info", None),
        (["--log-level=warn"], "", "warn", None),
        (["--log-level=loud"], "", "info", "--log-level: 'loud' is not one of"),
        (["--log-format=JSON"], "", "info", "unsupported logging formatter 'JSON'"),
        (["--log-format=xml", "--log-level=debug"], "", "info", "formatter 'xml'; using text"),
        (["--log-format=json", "--log-level=DEBUG"], "json", "debug", None),
    ],
)
def test_log_flags_are_as_lenient_as_reloaders_warning_instead_of_stopping(
    argv: list[str], fmt: str, level: str, warning: str | None
) -> None:
    s = parse(argv, env={})
    assert (s.log_format, s.log_level) == (fmt, level)
    if warning is None:
        assert not any("--log" in w for w in s.warnings)
    else:
        assert any(warning in w for w in s.warnings), s.warnings


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--namespaces=a\n\"b"], {}, "--namespaces: "),
        (["--health-addr=:99999"], {}, "--health-addr: ':99999' is not host:port"),
        (["--metrics-addr=:8080\n"], {}, "--metrics-addr: ':8080\\n' is not host:port"),
        (["--leader-election-id=lock\n"], {}, "--leader-election-id: 'lock\\n'"),
        (
            ["--enable-ha", "--leader-election-lease-duration=10.5s",
             "--leader-election-renew-deadline=10.2s"],
            {"POD_NAME": "a", "POD_NAMESPACE": "n"},
            "--leader-election-lease-duration must be greater than",
        ),
    ],
)  # fmt: skip
def test_odd_values_stop_the_start_with_one_line_instead_of_a_traceback_later(
    argv: list[str], env: dict[str, str], message: str
) -> None:
    """A line break in a list or a name, a port past 65535, a lease whose whole seconds (what
    the Lease records) do not outlast the renew deadline."""
    with pytest.raises(FlagError) as info:
        parse(argv, env=env)
    assert message in str(info.value)
    assert "\n" not in str(info.value)
