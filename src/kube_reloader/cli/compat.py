"""`--compat=v1|v2`: whose command-line semantics apply (v2-spec §1).

Both modes accept every flag of both Reloader versions. `v1` (the default) reads them as
Reloader v1.4 does (`flags`); `v2` reads them as Reloader v2 (cobra + viper) does:

* **the environment**: every v2 flag may come from the variable `UPPER_SNAKE(flag)`
  (`RELOAD_STRATEGY`, `IS_ARGO_ROLLOUTS`, `ALERT_WEBHOOK_URL`, `HEALTH_ADDR`). A flag passed on
  the command line wins over the variable, the variable over the default; an empty variable
  is ignored. From the environment a boolean is Go's `strconv.ParseBool` (anything else is
  false), a list is split on white space (not on commas, so `NAMESPACES="a,b"` names the one
  namespace `a,b` and is refused), a duration without a unit is nanoseconds and an invalid one
  is the default. `--alert-proxy` falls back to `ALERT_WEBHOOK_PROXY`. Only Reloader v2's flags
  are bound: ours (`--workers`, `--context`, ...) never read the environment;
* `--resources-to-ignore`, `--ignored-workload-types` and `--namespaces-to-ignore` are plain
  strings (the last occurrence wins) split on commas, entries trimmed, empty ones dropped.
  Unknown resources are ignored and both may be given (nothing is watched); workload types
  are v2's kind names (`deployment(s)`, `daemonset(s)`, `statefulset(s)`, `rollout(s)`,
  `job(s)`, `cronjob(s)`, `deploymentconfig(s)`, any case) and an unknown one stops the start;
* the string booleans (`--reload-on-create`, `--reload-on-delete`, `--is-Argo-Rollouts`) are
  true for `true`, `1` or `yes` (trimmed, any case);
* `--namespace-selector` and `--resource-label-selector` entries are ANDed as written: v1's
  `key:value`, `key:*` and `key=*` forms are not rewritten, so they stop the start;
* alerts are on with `--alert-on-reload` or a non-empty `--alert-webhook-url`.

In v1 mode the alert flags feed the same settings as v1's `ALERT_*` variables (a flag wins,
and a non-empty `--alert-webhook-url` turns alerting on, as in v2).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence

from kube_reloader.cli.flagset import ANNOTATION_FLAGS, BOOL_FLAGS, V2_STRING_FLAGS, FlagError
from kube_reloader.core.annotations import parse_bool
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.pausing import DurationError, parse_duration
from kube_reloader.core.strategies import Compat
from kube_reloader.logs import LEVELS
from kube_reloader.runtime.options import AlertSettings

#: Reloader v2's flags, by how a value from the environment is read
V2_BOOLS = tuple(f for f in BOOL_FLAGS if f != "reconcile-on-start")
V2_SLICES = ("namespaces", "namespace-selector", "resource-label-selector")
V2_PLAIN_LISTS = ("resources-to-ignore", "ignored-workload-types", "namespaces-to-ignore")
V2_DURATIONS = (
    "leader-election-lease-duration",
    "leader-election-renew-deadline",
    "leader-election-retry-period",
)
V2_STRINGS = (
    *(flag for flag, _ in ANNOTATION_FLAGS),
    *(flag for flag, _ in V2_STRING_FLAGS),
    "leader-election-id",
    "reload-strategy",
    "is-Argo-Rollouts",
    "is-openshift",
    "reload-on-create",
    "reload-on-delete",
    "webhook-url",
    "log-format",
    "log-level",
    "metrics-addr",
    "pprof-addr",
)
#: v2's `--ignored-workload-types` names (`workload.KindFromString`)
V2_KIND_NAMES = {
    "deployment": WorkloadKind.DEPLOYMENT,
    "daemonset": WorkloadKind.DAEMONSET,
    "statefulset": WorkloadKind.STATEFULSET,
    "rollout": WorkloadKind.ROLLOUT,
    "job": WorkloadKind.JOB,
    "cronjob": WorkloadKind.CRONJOB,
    "deploymentconfig": WorkloadKind.DEPLOYMENTCONFIG,
}
_V2_KIND_ALIASES = {a: k for n, k in V2_KIND_NAMES.items() for a in (n, n + "s")}


def mode(value: str) -> Compat:
    try:
        return Compat(value)
    except ValueError:
        raise FlagError(f"--compat: {value!r} must be v1 or v2") from None


def dest(flag: str) -> str:
    """The argparse attribute of `--flag` (`--is-Argo-Rollouts` -> `is_argo_rollouts`)."""
    return flag.replace("-", "_").lower()


def env_name(flag: str) -> str:
    """viper's automatic environment key: `is-Argo-Rollouts` -> `IS_ARGO_ROLLOUTS`."""
    return flag.replace("-", "_").upper()


def given(argv: Sequence[str]) -> frozenset[str]:
    """The attributes of the flags present in `argv` (after `normalize_bools`: every flag is
    one `--name` or `--name=value` token, and argparse refuses a value that looks like one)."""
    out = set()
    for token in argv:
        if token == "--":
            break
        if token.startswith("--"):
            out.add(dest(token[2:].split("=", 1)[0]))
    return frozenset(out)


def go_bool(value: str) -> bool:
    """viper's `GetBool` of an environment value: `strconv.ParseBool`, invalid is false."""
    return parse_bool(value) is True


def _csv_quoted(value: str) -> str:
    """`value` as one CSV field, so the command line's CSV split leaves it whole."""
    return '"' + value.replace('"', '""') + '"'


def _env_duration(value: str) -> str:
    """cast's `ToDuration`: no unit letter means nanoseconds; invalid is 0 (the default)."""
    text = value if any(c in value for c in "nsuµmh") else value + "ns"
    try:
        parse_duration(text)
    except DurationError:
        return "0"
    return text


def bind_env(ns: argparse.Namespace, argv: Sequence[str], env: Mapping[str, str]) -> None:
    """v2: fill every v2 flag not on the command line from its environment variable."""
    explicit = given(argv)
    for kind, flags in (
        ("bool", V2_BOOLS),
        ("slice", V2_SLICES),
        ("plain", V2_PLAIN_LISTS),
        ("duration", V2_DURATIONS),
        ("string", V2_STRINGS),
    ):
        for flag in flags:
            if dest(flag) in explicit:
                continue
            raw = env.get(env_name(flag), "")
            if flag == "alert-proxy" and raw == "":
                raw = env.get("ALERT_WEBHOOK_PROXY", "")
            if raw == "":
                continue
            value: object = raw
            if kind == "bool":
                value = go_bool(raw)
            elif kind == "slice":
                value = [_csv_quoted(v) for v in raw.split()]
            elif kind == "plain":
                value = [raw]
            elif kind == "duration":
                value = _env_duration(raw)
            setattr(ns, dest(flag), value)


def string_bool(compat: Compat, value: str) -> bool:
    """`--reload-on-create` and the like: v1 exactly `true`; v2 `true`, `1` or `yes`."""
    if compat is Compat.V1:
        return value == "true"
    return value.strip().lower() in ("true", "1", "yes")


def plain_list(ns: argparse.Namespace, flag: str) -> list[str]:
    """v2's plain string list flag: the last occurrence, split on commas, trimmed."""
    values: list[str] = getattr(ns, dest(flag))
    if not values:
        return []
    return [p.strip() for p in values[-1].split(",") if p.strip()]


def joined(selectors: Sequence[str]) -> str:
    """v2's `--namespace-selector` / `--resource-label-selector`: the entries ANDed as they
    are (no rewriting of v1's legacy forms)."""
    return ",".join(e.strip() for e in selectors if e.strip())


def v2_resources(ns: argparse.Namespace) -> tuple[ResourceType, ...]:
    ignored = {v.lower() for v in plain_list(ns, "resources-to-ignore")}
    return tuple(
        r for r in (ResourceType.CONFIGMAP, ResourceType.SECRET) if r.plural not in ignored
    )


def v2_ignored_kinds(ns: argparse.Namespace) -> frozenset[str]:
    kinds = set()
    for name in plain_list(ns, "ignored-workload-types"):
        kind = _V2_KIND_ALIASES.get(name.lower())
        if kind is None:
            raise FlagError(f"--ignored-workload-types: unknown workload type {name.lower()!r}")
        kinds.add(str(kind))
    return frozenset(kinds)


def alerts(
    compat: Compat, ns: argparse.Namespace, env: Mapping[str, str], warnings: list[str]
) -> AlertSettings | None:
    """The alert settings: v2 from its flags (already bound to the environment); v1 from
    `ALERT_*` (`ALERT_ON_RELOAD` exactly `true`, values trimmed), each overridden by its flag."""
    if compat is Compat.V2:
        url, sink = ns.alert_webhook_url, ns.alert_sink.lower()
        info, proxy = ns.alert_additional_info, ns.alert_proxy
        on = ns.alert_on_reload or url != ""
        missing = "--alert-on-reload is set but --alert-webhook-url is empty: no alerts are sent"
    else:
        url = ns.alert_webhook_url or env.get("ALERT_WEBHOOK_URL", "").strip()
        sink = (ns.alert_sink or env.get("ALERT_SINK", "")).strip().lower()
        info = ns.alert_additional_info or env.get("ALERT_ADDITIONAL_INFO", "").strip()
        proxy = ns.alert_proxy or env.get("ALERT_WEBHOOK_PROXY", "").strip()
        on = (
            ns.alert_on_reload
            or ns.alert_webhook_url != ""
            or env.get("ALERT_ON_RELOAD", "") == "true"
        )
        missing = "ALERT_ON_RELOAD=true but ALERT_WEBHOOK_URL is empty: no alerts are sent"
    if not on:
        return None
    if not url:
        warnings.append(missing)
        return None
    return AlertSettings(
        url=url, sink=sink, additional_info=info, proxy=proxy, structured=ns.alert_structured
    )


#: Reloader v2's log levels, exactly as it spells them ("" is info), as ours
V2_LOG_LEVELS = {
    "trace": "trace",
    "debug": "debug",
    "info": "info",
    "": "info",
    "warn": "warn",
    "warning": "warning",
    "error": "error",
}


def log_flags(mode: Compat, ns: argparse.Namespace, warnings: list[str]) -> tuple[str, str]:
    """The log format and level; under v2 also its "0" addresses (`v2_addr`)."""
    if mode is not Compat.V2:
        return _v1_logging(ns.log_format, ns.log_level, warnings)
    ns.metrics_addr = v2_addr(ns.metrics_addr, empty=":8080")
    ns.health_addr = v2_addr(ns.health_addr, empty=None)
    if ns.log_level not in V2_LOG_LEVELS:  # v2 stops at start: so does kube-reloader
        raise FlagError(f"--log-level: unsupported log level: {ns.log_level!r}")
    if ns.log_format not in ("", "json"):
        raise FlagError(f"--log-format: unsupported log format: {ns.log_format!r}")
    return ns.log_format, V2_LOG_LEVELS[ns.log_level]


def _v1_logging(fmt: str, level: str, warnings: list[str]) -> tuple[str, str]:
    """Reloader's leniency: a level in any case (`WARNING`, `Info`); an unknown level or
    format is a warning and the defaults are used (and, as Reloader does, an unknown
    format leaves the level at info too)."""
    if fmt not in ("", "json", "text"):
        warnings.append(f"--log-format: unsupported logging formatter {fmt!r}; using text")
        return "", "info"
    if level.lower() not in LEVELS:
        warnings.append(f"--log-level: {level!r} is not one of {', '.join(LEVELS)}; using info")
        return fmt, "info"
    return fmt, level.lower()


def v2_addr(addr: str | None, *, empty: str | None) -> str | None:
    """`--metrics-addr`/`--health-addr` as controller-runtime reads them: "0" turns the
    server off (None); "" is its default (metrics: `:8080`; health probes: off)."""
    if addr == "":
        return empty
    return None if addr == "0" else addr
