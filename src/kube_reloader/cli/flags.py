"""Reloader v1's command line, flag for flag (compat-spec §6.1), turned into `Options`.

pflag semantics are reproduced: boolean flags accept `--flag` and `--flag=<bool>` (never
`--flag value`); string-slice flags may repeat and each value is split as CSV (so
`--namespace-selector="a in (b,c)"` survives); several "booleans" are really strings that
count only when exactly `true`. Invalid values stop the program at startup with one line
naming the flag (exit 1, as Reloader's), except where Reloader only warns (the log level
and format), so a deployment that starts Reloader starts kube-reloader too.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kube_reloader.cli import fleet
from kube_reloader.cli.flagset import (
    ANNOTATION_FLAGS,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    FlagError,
    build_parser,
    normalize_bools,
    split_csv,
)
from kube_reloader.core import evicting, matching, planning
from kube_reloader.core.annotations import Keys
from kube_reloader.core.customkinds import CustomKind, CustomKindError, parse_workload_kind
from kube_reloader.core.matching import MatchConfig, ignored_workload_types_valid
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.pausing import DurationError, parse_duration
from kube_reloader.core.selectors import SelectorError, legacy_to_selector, validate
from kube_reloader.core.strategies import Strategy
from kube_reloader.logs import LEVELS
from kube_reloader.runtime.leadership import HASettings, Timing
from kube_reloader.runtime.manager import HashKeySettings
from kube_reloader.runtime.options import AlertSettings, Options

__all__ = ["FlagError", "RunSettings", "parse"]


@dataclass(frozen=True)
class RunSettings:
    options: Options
    log_format: str
    log_level: str
    kubeconfig: str | None
    context: str | None
    warnings: tuple[str, ...]
    metrics_addr: str = ":9090"
    ha: HASettings | None = None
    #: diagnostics listener (`--enable-pprof`); the default `:6060` binds to loopback only
    pprof_addr: str | None = None
    hash_key: HashKeySettings | None = None


def parse(argv: Sequence[str], env: Mapping[str, str] | None = None) -> RunSettings:
    env = os.environ if env is None else env
    parser = build_parser()
    ns = parser.parse_args(normalize_bools(argv))
    warnings: list[str] = []

    def slice_of(flag: str) -> list[str]:
        return [v for raw in getattr(ns, flag.replace("-", "_")) for v in split_csv(raw)]

    strategy = ns.reload_strategy
    if strategy not in (s.value for s in Strategy):
        raise FlagError(f"--reload-strategy: {strategy!r} must be env-vars or annotations")
    log_format, log_level = _logging(ns.log_format, ns.log_level, warnings)
    if ns.workers < 1:
        raise FlagError("--workers: must be at least 1")

    ignored = [v.lower() for v in slice_of("resources-to-ignore")]
    for v in ignored:
        if v not in ("configmaps", "secrets"):
            raise FlagError(f"--resources-to-ignore: {v!r} must be configmaps or secrets")
    if len(set(ignored)) > 1:
        raise FlagError("--resources-to-ignore: only one of configmaps or secrets can be ignored")
    resources = tuple(
        r for r in (ResourceType.CONFIGMAP, ResourceType.SECRET) if r.plural not in ignored
    )

    workload_types = tuple(slice_of("ignored-workload-types"))
    if workload_types and not ignored_workload_types_valid(workload_types):
        warnings.append(
            f"--ignored-workload-types: {', '.join(workload_types)} contains a value other than "
            "jobs or cronjobs; as in Reloader, the filter is disabled"
        )

    ha: HASettings | None = None
    timing = Timing()
    for flag in ("lease-duration", "renew-deadline", "retry-period"):
        raw = getattr(ns, f"leader_election_{flag.replace('-', '_')}")
        try:
            seconds = parse_duration(raw)
        except DurationError:
            raise FlagError(
                f"--leader-election-{flag}: {raw!r} is not a duration (e.g. 15s)"
            ) from None
        timing = replace(timing, **{flag.replace("-", "_"): seconds})
    if ns.enable_ha:
        problems = timing.problems()
        if problems:
            raise FlagError(problems[0])
        pod, pod_ns = env.get("POD_NAME", ""), env.get("POD_NAMESPACE", "")
        if not pod or not pod_ns:
            raise FlagError(
                "--enable-ha: the POD_NAME and POD_NAMESPACE environment variables are required"
            )
        ha = HASettings(identity=pod, namespace=pod_ns, timing=timing)

    namespaces = [n.strip() for n in slice_of("namespaces") if n.strip()]
    for n in namespaces:
        if not DNS_LABEL.match(n):
            raise FlagError(f"--namespaces: {n!r} is not a valid namespace name")
    scope: tuple[str, ...] | None = tuple(namespaces) or None
    if scope is None and env.get("KUBERNETES_NAMESPACE", "").strip():
        scope = (env["KUBERNETES_NAMESPACE"].strip(),)

    selectors = {}
    for flag in ("namespace-selector", "resource-label-selector"):
        sel = legacy_to_selector(slice_of(flag))
        try:
            validate(sel)
        except SelectorError as exc:
            raise FlagError(f"--{flag}: {exc}") from None
        selectors[flag] = sel
    if scope is not None:
        for flag in ("namespace-selector", "namespaces-to-ignore"):
            if slice_of(flag):
                warnings.append(f"--{flag} applies to all-namespaces mode only; ignored")

    alerts = None
    if env.get("ALERT_ON_RELOAD", "") == "true":
        url = env.get("ALERT_WEBHOOK_URL", "").strip()
        if url:
            alerts = AlertSettings(
                url=url,
                sink=env.get("ALERT_SINK", "").strip().lower(),
                additional_info=env.get("ALERT_ADDITIONAL_INFO", "").strip(),
                proxy=env.get("ALERT_WEBHOOK_PROXY", "").strip(),
            )
        else:
            warnings.append(
                "ALERT_ON_RELOAD=true but ALERT_WEBHOOK_URL is empty: no alerts are sent"
            )
    openshift = ns.is_openshift.strip().lower()
    if openshift not in ("", "auto", "true", "false"):
        raise FlagError(f"--is-openshift: {ns.is_openshift!r} must be auto, true or false")
    if ns.webhook_url and not re.match(r"^https?://", ns.webhook_url):
        raise FlagError(f"--webhook-url: {ns.webhook_url!r} is not an http(s) URL")

    durations = {}
    for flag in ("reload-coalesce-window", "reload-min-interval"):
        raw = getattr(ns, flag.replace("-", "_"))
        try:
            durations[flag] = parse_duration(raw)
        except DurationError:
            raise FlagError(f"--{flag}: {raw!r} is not a duration (e.g. 300ms, 5s)") from None
        if durations[flag] < 0:
            raise FlagError(f"--{flag}: must not be negative")
    if ns.reload_rate < 0 or ns.reload_burst < 0:
        raise FlagError("--reload-rate and --reload-burst must not be negative")

    kinds = tuple(
        k
        for k in Options().workload_kinds
        if not (
            ignored_workload_types_valid(workload_types)
            and matching.ignored_workload_type_token(k) in workload_types
        )
    )

    keys = Keys(**{field: getattr(ns, flag.replace("-", "_")) for flag, field in ANNOTATION_FLAGS})
    options = Options(
        plan=planning.Config(
            match=MatchConfig(
                keys=keys,
                auto_reload_all=bool(ns.auto_reload_all),
                ignored_workload_types=workload_types,
            ),
            strategy=Strategy(strategy),
        ),
        namespaces=scope,
        namespaces_to_ignore=frozenset(slice_of("namespaces-to-ignore"))
        if scope is None
        else frozenset(),
        namespace_selector=selectors["namespace-selector"] if scope is None else "",
        resource_label_selector=selectors["resource-label-selector"],
        resources=resources,
        reload_on_create=ns.reload_on_create == "true",
        reload_on_delete=ns.reload_on_delete == "true",
        sync_after_restart=bool(ns.sync_after_restart),
        workers=ns.workers,
        workload_kinds=kinds,
        argo_rollouts=ns.is_argo_rollouts == "true",
        deployment_configs=openshift != "false",
        csi=bool(ns.enable_csi_integration),
        webhook_url=ns.webhook_url,
        alerts=alerts,
        coalesce_window=durations["reload-coalesce-window"],
        reconcile_on_start=bool(ns.reconcile_on_start),
        min_interval=durations["reload-min-interval"],
        reload_rate=ns.reload_rate,
        reload_burst=ns.reload_burst,
        default_strategy=_pod_strategy(ns.default_strategy),
        custom_kinds=_custom_kinds(ns.workload_kind),
        **_fleet(ns),
    )
    for flag, addr in (("--metrics-addr", ns.metrics_addr), ("--pprof-addr", ns.pprof_addr)):
        if not re.match(r"^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):\d{1,5}$", addr):
            raise FlagError(f"{flag}: {addr!r} is not host:port (e.g. :9090)")
    hash_key = None
    if ns.hash_algorithm not in ("sha1", "hmac-sha256"):
        raise FlagError(f"--hash-algorithm: {ns.hash_algorithm!r} must be sha1 or hmac-sha256")
    if ns.hash_algorithm == "hmac-sha256":
        key_ns = env.get("POD_NAMESPACE", "")
        if not key_ns:
            raise FlagError(
                "--hash-algorithm=hmac-sha256: the POD_NAMESPACE environment variable is required "
                "(the key Secret lives in the controller's namespace)"
            )
        if not DNS_SUBDOMAIN.match(ns.hash_key_secret):
            raise FlagError(f"--hash-key-secret: {ns.hash_key_secret!r} is not a valid name")
        hash_key = HashKeySettings(namespace=key_ns, secret=ns.hash_key_secret)
    pprof = None
    if ns.enable_pprof:
        pprof = "127.0.0.1:6060" if ns.pprof_addr == ":6060" else ns.pprof_addr
    return RunSettings(
        options=options,
        metrics_addr=ns.metrics_addr,
        pprof_addr=pprof,
        ha=ha,
        log_format=log_format,
        log_level=log_level,
        kubeconfig=ns.kubeconfig,
        context=ns.context,
        warnings=tuple(warnings),
        hash_key=hash_key,
    )


def _logging(fmt: str, level: str, warnings: list[str]) -> tuple[str, str]:
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


def _fleet(ns: argparse.Namespace) -> dict[str, Any]:
    try:
        return fleet.options(ns)
    except fleet.FleetFlagError as exc:
        raise FlagError(str(exc)) from None


def _pod_strategy(text: str) -> evicting.PodStrategy:
    try:
        return evicting.parse_strategy(text)
    except evicting.EvictError:
        raise FlagError(f"--default-strategy: {text!r} must be patch or evict") from None


def _custom_kinds(values: list[str]) -> tuple[CustomKind, ...]:
    try:
        kinds = tuple(parse_workload_kind(v) for v in values)
    except CustomKindError as exc:
        raise FlagError(str(exc)) from None
    if len({(k.group, k.plural) for k in kinds}) != len(kinds):
        raise FlagError("--workload-kind: a resource is named twice")
    return kinds
