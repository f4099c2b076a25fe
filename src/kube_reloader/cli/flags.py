"""Reloader's command line, flag for flag (v1: compat-spec §6.1; v2: v2-spec §1.2), turned into
`Options`; `--compat=v2` reads it as Reloader v2 does (`compat`).

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
import socket
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import msgspec

from kube_reloader.cli import admissionflags, compat, eventloops, fleet
from kube_reloader.cli.flagset import (
    ANNOTATION_FLAGS,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    FlagError,
    build_parser,
    normalize_bools,
    split_csv,
)
from kube_reloader.core import evicting, matching, planning, scoping
from kube_reloader.core.annotations import Keys
from kube_reloader.core.customkinds import CustomKind, CustomKindError, parse_workload_kind
from kube_reloader.core.matching import MatchConfig, ignored_workload_types_valid
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.pausing import DurationError, parse_duration
from kube_reloader.core.selectors import SelectorError, legacy_to_selector, validate
from kube_reloader.core.strategies import Compat, Strategy
from kube_reloader.runtime.admitsettings import AdmissionSettings
from kube_reloader.runtime.leadership import LOCK_NAME, V2_LOCK_NAME, HASettings, Timing
from kube_reloader.runtime.manager import HashKeySettings
from kube_reloader.runtime.options import Options

__all__ = ["FlagError", "RunSettings", "parse", "settings"]


class RunSettings(msgspec.Struct, frozen=True):
    options: Options
    log_format: str
    log_level: str
    kubeconfig: str | None
    context: str | None
    warnings: tuple[str, ...]
    #: None: not served (`--metrics-addr=0` under `--compat=v2`)
    metrics_addr: str | None = ":9090"
    ha: HASettings | None = None
    #: diagnostics listener (`--enable-pprof`); the default `:6060` binds to loopback only
    pprof_addr: str | None = None
    hash_key: HashKeySettings | None = None
    compat: Compat = Compat.V1
    #: Reloader v2's health listener (`/healthz`, `/readyz`); None: not served
    health_addr: str | None = None
    #: the mutating admission webhook (`--admission-addr`); None: not served
    admission: AdmissionSettings | None = None
    event_loop: str = "auto"


def parse(argv: Sequence[str], env: Mapping[str, str] | None = None) -> RunSettings:
    argv = normalize_bools(argv)
    ns = build_parser().parse_args(argv)
    return settings(ns, argv, os.environ if env is None else env)


def settings(ns: argparse.Namespace, argv: Sequence[str], env: Mapping[str, str]) -> RunSettings:
    """The parsed flags (`flagset.add_flags`'s, `argv` after `normalize_bools`), checked and
    turned into the settings the controller runs with; `explain` and `impact` call it too."""
    warnings: list[str] = []
    mode = compat.mode(ns.compat)
    v2 = mode is Compat.V2
    if v2:
        compat.bind_env(ns, argv, env)
    plan = _plan(ns, mode, warnings)
    log_format, log_level = compat.log_flags(mode, ns, warnings)
    if ns.workers < 1:
        raise FlagError("--workers: must be at least 1")
    options = _options(ns, mode, env, plan, warnings)
    admission = _admission(ns, env)
    if admission is not None and _writes_hashes(options.plan):
        options = replace(
            options, admission_grace=admission.grace, admission_keys=admission.authenticated
        )
    _check_addrs(ns)
    eventloops.loop_factory(ns.event_loop, tls_listener=admission is not None)  # or one line
    return RunSettings(
        options=options,
        metrics_addr=ns.metrics_addr,
        pprof_addr=_pprof(ns),
        ha=_ha(ns, v2, env),
        log_format=log_format,
        log_level=log_level,
        kubeconfig=ns.kubeconfig,
        context=ns.context,
        warnings=tuple(warnings),
        hash_key=_hash_key(ns, env),
        compat=mode,
        # v1 as today: no health listener unless --health-addr is given
        health_addr=ns.health_addr if v2 or "health_addr" in compat.given(argv) else None,
        admission=admission,
        event_loop=ns.event_loop,
    )


def _slice(ns: argparse.Namespace, flag: str) -> list[str]:
    try:
        return [v for raw in getattr(ns, flag.replace("-", "_")) for v in split_csv(raw)]
    except FlagError as exc:
        raise FlagError(f"--{flag}: {exc}") from None


def _plan(ns: argparse.Namespace, mode: Compat, warnings: list[str]) -> planning.Config:
    """What decides a reload: the rules, the annotation keys, the strategy and the scope
    (the workload-type filter of v1 is part of it)."""
    reload_scope = scoping.parse_scope(ns.reload_scope)
    if reload_scope is None:
        raise FlagError(f"--reload-scope: {ns.reload_scope!r} must be object or keys")
    strategy = ns.reload_strategy or ("env-vars" if mode is Compat.V2 else "")
    if strategy not in (s.value for s in Strategy):
        raise FlagError(f"--reload-strategy: {strategy!r} must be env-vars or annotations")
    keys = Keys(**{field: getattr(ns, flag.replace("-", "_")) for flag, field in ANNOTATION_FLAGS})
    return planning.Config(
        match=MatchConfig(
            keys=keys,
            auto_reload_all=bool(ns.auto_reload_all),
            ignored_workload_types=() if mode is Compat.V2 else _v1_workload_types(ns, warnings),
            reload_tls_secrets=bool(ns.reload_tls_secrets),
            v2=mode is Compat.V2,
        ),
        strategy=Strategy(strategy),
        compat=mode,
        scope=reload_scope,
    )


def _v1_workload_types(ns: argparse.Namespace, warnings: list[str]) -> tuple[str, ...]:
    types = tuple(_slice(ns, "ignored-workload-types"))
    if types and not ignored_workload_types_valid(types):
        warnings.append(
            f"--ignored-workload-types: {', '.join(types)} contains a value other "
            "than jobs or cronjobs; as in Reloader, the filter is disabled"
        )
    return types


def _ignored_kinds(ns: argparse.Namespace, plan: planning.Config) -> frozenset[str]:
    if plan.compat is Compat.V2:
        return compat.v2_ignored_kinds(ns)
    types = plan.match.ignored_workload_types
    valid = ignored_workload_types_valid(types)
    return frozenset(
        k
        for k in Options().workload_kinds
        if valid and matching.ignored_workload_type_token(k) in types
    )


def _options(
    ns: argparse.Namespace,
    mode: Compat,
    env: Mapping[str, str],
    plan: planning.Config,
    warnings: list[str],
) -> Options:
    resources = (
        compat.v2_resources(ns)
        if mode is Compat.V2
        else _v1_resources(_slice(ns, "resources-to-ignore"))
    )
    ignored_kinds = _ignored_kinds(ns, plan)
    scope, ignored_ns, selectors = _namespaces(ns, mode, env, warnings)
    alerts = compat.alerts(mode, ns, env, warnings)
    openshift = ns.is_openshift.strip().lower()
    if openshift not in ("", "auto", "true", "false"):
        raise FlagError(f"--is-openshift: {ns.is_openshift!r} must be auto, true or false")
    if ns.webhook_url and not re.match(r"^https?://", ns.webhook_url):
        raise FlagError(f"--webhook-url: {ns.webhook_url!r} is not an http(s) URL")
    durations = _durations(ns)
    return Options(
        plan=plan,
        namespaces=scope,
        namespaces_to_ignore=frozenset(ignored_ns) if scope is None else frozenset(),
        namespace_selector=selectors["namespace-selector"] if scope is None else "",
        resource_label_selector=selectors["resource-label-selector"],
        resources=resources,
        reload_on_create=compat.string_bool(mode, ns.reload_on_create),
        reload_on_delete=compat.string_bool(mode, ns.reload_on_delete),
        sync_after_restart=bool(ns.sync_after_restart),
        workers=ns.workers,
        workload_kinds=tuple(k for k in Options().workload_kinds if k not in ignored_kinds),
        argo_rollouts=compat.string_bool(mode, ns.is_argo_rollouts)
        and WorkloadKind.ROLLOUT not in ignored_kinds,
        deployment_configs=openshift != "false"
        and WorkloadKind.DEPLOYMENTCONFIG not in ignored_kinds,
        csi=bool(ns.enable_csi_integration),
        webhook_url=ns.webhook_url,
        alerts=alerts,
        coalesce_window=durations["reload-coalesce-window"],
        reconcile_on_start=bool(ns.reconcile_on_start),
        min_interval=durations["reload-min-interval"],
        audit_interval=durations["audit-interval"],
        reload_rate=ns.reload_rate,
        reload_burst=ns.reload_burst,
        default_strategy=_pod_strategy(ns.default_strategy),
        custom_kinds=_custom_kinds(ns.workload_kind),
        field_manager=mode.field_manager,
        **_fleet(ns),
    )


def _namespaces(
    ns: argparse.Namespace, mode: Compat, env: Mapping[str, str], warnings: list[str]
) -> tuple[tuple[str, ...] | None, list[str], dict[str, str]]:
    """The watched namespaces (None: all), the ignored ones and the two selectors."""
    v2 = mode is Compat.V2
    namespaces = [n.strip() for n in _slice(ns, "namespaces") if n.strip()]
    for n in namespaces:
        if not DNS_LABEL.fullmatch(n):
            raise FlagError(f"--namespaces: {n!r} is not a valid namespace name")
    scope: tuple[str, ...] | None = tuple(namespaces) or None
    if scope is None and env.get("KUBERNETES_NAMESPACE", "").strip():
        scope = (env["KUBERNETES_NAMESPACE"].strip(),)
    selectors = {}
    for flag in ("namespace-selector", "resource-label-selector"):
        # v2 joins the entries as they are: v1's `key:value` and `key:*` forms are errors there
        sel = compat.joined(_slice(ns, flag)) if v2 else legacy_to_selector(_slice(ns, flag))
        try:
            validate(sel)
        except SelectorError as exc:
            raise FlagError(f"--{flag}: {exc}") from None
        selectors[flag] = sel
    ignored = (
        compat.plain_list(ns, "namespaces-to-ignore") if v2 else _slice(ns, "namespaces-to-ignore")
    )
    if scope is not None:
        for flag, values in (
            ("namespace-selector", _slice(ns, "namespace-selector")),
            ("namespaces-to-ignore", ignored),
        ):
            if values:
                warnings.append(f"--{flag} applies to all-namespaces mode only; ignored")
    return scope, ignored, selectors


def _durations(ns: argparse.Namespace) -> dict[str, float]:
    durations = {}
    for flag in ("reload-coalesce-window", "reload-min-interval", "audit-interval"):
        raw = getattr(ns, flag.replace("-", "_"))
        try:
            durations[flag] = parse_duration(raw)
        except DurationError:
            raise FlagError(f"--{flag}: {raw!r} is not a duration (e.g. 300ms, 5s)") from None
        if durations[flag] < 0:
            raise FlagError(f"--{flag}: must not be negative")
    if ns.reload_rate < 0 or ns.reload_burst < 0:
        raise FlagError("--reload-rate and --reload-burst must not be negative")
    return durations


def _ha(ns: argparse.Namespace, v2: bool, env: Mapping[str, str]) -> HASettings | None:
    timing = Timing()
    for flag in ("lease-duration", "renew-deadline", "retry-period"):
        raw = getattr(ns, f"leader_election_{flag.replace('-', '_')}")
        try:
            seconds = parse_duration(raw)
        except DurationError:
            raise FlagError(
                f"--leader-election-{flag}: {raw!r} is not a duration (e.g. 15s)"
            ) from None
        if v2 and seconds == 0:  # v2: zero (or invalid in the environment) is the default
            seconds = getattr(Timing(), flag.replace("-", "_"))
        timing = msgspec.structs.replace(timing, **{flag.replace("-", "_"): seconds})
    lock = ns.leader_election_id
    if lock is None:
        lock = V2_LOCK_NAME if v2 else LOCK_NAME
    if not DNS_SUBDOMAIN.fullmatch(lock):
        raise FlagError(f"--leader-election-id: {lock!r} is not a valid Lease name")
    lease_ns = ns.leader_election_namespace
    if lease_ns and not DNS_LABEL.fullmatch(lease_ns):
        raise FlagError(f"--leader-election-namespace: {lease_ns!r} is not a valid namespace name")
    if not ns.enable_ha:
        return None
    problems = timing.problems()
    if problems:
        raise FlagError(problems[0])
    pod, pod_ns = env.get("POD_NAME", ""), env.get("POD_NAMESPACE", "")
    if not pod or not pod_ns:
        raise FlagError(
            "--enable-ha: the POD_NAME and POD_NAMESPACE environment variables are required"
        )
    return HASettings(
        # v2 requires POD_NAME but campaigns as controller-runtime's default: <hostname>_<uuid>
        identity=f"{socket.gethostname()}_{uuid.uuid4()}" if v2 else pod,
        namespace=lease_ns or pod_ns,
        timing=timing,
        lock_name=lock,
        release_on_cancel=ns.leader_election_release_on_cancel,
    )


def _check_addrs(ns: argparse.Namespace) -> None:
    addrs = (
        ("--metrics-addr", ns.metrics_addr),
        ("--pprof-addr", ns.pprof_addr),
        ("--health-addr", ns.health_addr),
    )
    for flag, addr in addrs:
        if addr is None:
            continue
        found = re.fullmatch(r"(\[[0-9a-fA-F:]+\]|[A-Za-z0-9.-]*):(\d{1,5})", addr)
        if found is None or int(found.group(2)) > 65535:
            raise FlagError(f"{flag}: {addr!r} is not host:port (e.g. :9090)")


def _hash_key(ns: argparse.Namespace, env: Mapping[str, str]) -> HashKeySettings | None:
    if ns.hash_algorithm not in ("sha1", "hmac-sha256"):
        raise FlagError(f"--hash-algorithm: {ns.hash_algorithm!r} must be sha1 or hmac-sha256")
    if ns.hash_algorithm != "hmac-sha256":
        return None
    key_ns = env.get("POD_NAMESPACE", "")
    if not key_ns:
        raise FlagError(
            "--hash-algorithm=hmac-sha256: the POD_NAMESPACE environment variable is required "
            "(the key Secret lives in the controller's namespace)"
        )
    if not DNS_SUBDOMAIN.fullmatch(ns.hash_key_secret):
        raise FlagError(f"--hash-key-secret: {ns.hash_key_secret!r} is not a valid name")
    return HashKeySettings(namespace=key_ns, secret=ns.hash_key_secret)


def _writes_hashes(plan: planning.Config) -> bool:
    """`admitting.writes_hashes`, imported only where the webhook is on."""
    from kube_reloader.core import admitting

    return admitting.writes_hashes(plan)


def _admission(ns: argparse.Namespace, env: Mapping[str, str]) -> AdmissionSettings | None:
    try:
        return admissionflags.settings(ns, env)
    except admissionflags.AdmissionFlagError as exc:
        raise FlagError(str(exc)) from None


def _pprof(ns: argparse.Namespace) -> str | None:
    if not ns.enable_pprof:
        return None
    return "127.0.0.1:6060" if ns.pprof_addr == ":6060" else str(ns.pprof_addr)


def _v1_resources(ignored: list[str]) -> tuple[ResourceType, ...]:
    """v1: `configmaps` or `secrets` (any case), not both; anything else stops the start."""
    ignored = [v.lower() for v in ignored]
    for v in ignored:
        if v not in ("configmaps", "secrets"):
            raise FlagError(f"--resources-to-ignore: {v!r} must be configmaps or secrets")
    if len(set(ignored)) > 1:
        raise FlagError("--resources-to-ignore: only one of configmaps or secrets can be ignored")
    return tuple(
        r for r in (ResourceType.CONFIGMAP, ResourceType.SECRET) if r.plural not in ignored
    )


def _fleet(ns: argparse.Namespace) -> dict[str, Any]:
    try:
        return fleet.options(ns)
    except fleet.FleetFlagError as exc:
        raise FlagError(str(exc)) from None


def _pod_strategy(text: str) -> evicting.PodStrategy:
    """patch or evict: the in-place strategies need an agent in each pod, so they are asked
    for per workload, never by default."""
    if text not in (evicting.PodStrategy.PATCH, evicting.PodStrategy.EVICT):
        raise FlagError(f"--default-strategy: {text!r} must be patch or evict")
    return evicting.PodStrategy(text)


def _custom_kinds(values: list[str]) -> tuple[CustomKind, ...]:
    try:
        kinds = tuple(parse_workload_kind(v) for v in values)
    except CustomKindError as exc:
        raise FlagError(str(exc)) from None
    if len({(k.group, k.plural) for k in kinds}) != len(kinds):
        raise FlagError("--workload-kind: a resource is named twice")
    return kinds
