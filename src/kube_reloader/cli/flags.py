"""Reloader v1's command line, flag for flag (compat-spec §6.1), turned into `Options`.

pflag semantics are reproduced: boolean flags accept `--flag` and `--flag=<bool>` (never
`--flag value`); string-slice flags may repeat and each value is split as CSV (so
`--namespace-selector="a in (b,c)"` survives); several "booleans" are really strings that
count only when exactly `true`. Invalid values stop the program at startup with one line
naming the flag.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kube_reloader.cli import fleet
from kube_reloader.core import evicting, matching, planning
from kube_reloader.core.annotations import Keys, parse_bool
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

BOOL_FLAGS = (
    "reconcile-on-start",
    "auto-reload-all",
    "enable-ha",
    "sync-after-restart",
    "enable-pprof",
    "enable-csi-integration",
)
# (flag, default, Keys field) for the annotation-renaming flags
ANNOTATION_FLAGS = (
    ("configmap-annotation", "configmap_reload"),
    ("secret-annotation", "secret_reload"),
    ("auto-annotation", "auto"),
    ("ignore-annotation", "ignore"),
    ("configmap-auto-annotation", "configmap_auto"),
    ("secret-auto-annotation", "secret_auto"),
    ("auto-search-annotation", "search"),
    ("search-match-annotation", "match"),
    ("pause-deployment-annotation", "pause_period"),
    ("pause-deployment-time-annotation", "paused_at"),
)
SLICE_FLAGS = (
    "resources-to-ignore",
    "ignored-workload-types",
    "namespaces",
    "namespaces-to-ignore",
    "namespace-selector",
    "resource-label-selector",
)
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class FlagError(ValueError):
    """One line, naming the flag."""


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


def _bool(flag: str) -> Callable[[str], bool]:
    def parse(value: str) -> bool:
        parsed = parse_bool(value)
        if parsed is None:
            raise argparse.ArgumentTypeError(f"--{flag}: {value!r} is not a boolean")
        return parsed

    return parse


def _csv(value: str) -> list[str]:
    if value == "":
        return []
    return [v for row in csv.reader([value]) for v in row]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kube-reloader",
        description=(
            "Run the reload controller (Stakater Reloader v1 compatible flags). "
            "Other commands: `kube-reloader dev-cluster ...`, `kube-reloader run [flags]`."
        ),
        allow_abbrev=False,
    )
    for flag in BOOL_FLAGS:
        # ours: --reconcile-on-start (default true) applies changes made while no replica ran
        default = flag == "reconcile-on-start"
        parser.add_argument(f"--{flag}", type=_bool(flag), default=default, metavar="BOOL")
    for flag, field in ANNOTATION_FLAGS:
        parser.add_argument(f"--{flag}", default=getattr(Keys(), field))
    for flag in SLICE_FLAGS:
        parser.add_argument(f"--{flag}", action="append", default=[], metavar="LIST")
    parser.add_argument("--log-format", default="", help="json, or empty for text")
    parser.add_argument("--log-level", default="info")
    parser.add_argument("--webhook-url", default="")
    parser.add_argument(
        "--is-Argo-Rollouts", "--is-argo-rollouts", dest="is_argo_rollouts", default="false"
    )
    parser.add_argument("--reload-strategy", default="env-vars")
    parser.add_argument("--reload-on-create", default="false")
    parser.add_argument("--reload-on-delete", default="false")
    parser.add_argument("--pprof-addr", default=":6060")
    parser.add_argument(
        "--is-openshift", default="", help="DeploymentConfig support: auto (default), true, false"
    )
    # ours, not Reloader's
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig file (default: KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument("--context", default=None, help="kubeconfig context")
    parser.add_argument("--workers", type=int, default=4, help="concurrent workload patches")
    parser.add_argument(
        "--metrics-addr", default=":9090", help="address of /metrics, /live and /readyz"
    )
    parser.add_argument(
        "--reload-coalesce-window", default="300ms",
        help="changes to one workload within this window become one reload (0 disables)",
    )  # fmt: skip
    parser.add_argument(
        "--reload-min-interval", default="5s",
        help="minimum time between two reloads of one workload; later ones wait (0 disables)",
    )  # fmt: skip
    parser.add_argument(
        "--reload-rate", type=float, default=50.0, help="reloads/s, cluster-wide (0 disables)"
    )
    parser.add_argument(
        "--reload-burst", type=float, default=200.0, help="burst of the reload rate"
    )
    parser.add_argument("--leader-election-lease-duration", default="15s")
    parser.add_argument("--leader-election-renew-deadline", default="10s")
    parser.add_argument("--leader-election-retry-period", default="2s")
    # ours: keyed content hashes (not Reloader-identical) for clusters where the unsalted
    # SHA-1 of a short Secret must not be readable from env vars and annotations
    parser.add_argument("--hash-algorithm", default="sha1", metavar="sha1|hmac-sha256")
    parser.add_argument("--hash-key-secret", default="kube-reloader-hash-key", metavar="NAME")
    # ours: pod-level reloads for workloads without kube-reloader.io/strategy
    parser.add_argument("--default-strategy", default="patch", metavar="patch|evict")
    parser.add_argument("--workload-kind", action="append", default=[],
                        metavar="GROUP/VERSION/RESOURCE:PATH")  # fmt: skip
    fleet.add(parser)  # ours: fleet-safe rotations
    return parser


def normalize_bools(argv: Sequence[str]) -> list[str]:
    """pflag: a bare boolean flag means `=true`."""
    bare = {f"--{f}" for f in (*BOOL_FLAGS, *fleet.BOOL_FLAGS)}
    return [f"{a}=true" if a in bare else a for a in argv]


def parse(argv: Sequence[str], env: Mapping[str, str] | None = None) -> RunSettings:
    env = os.environ if env is None else env
    parser = build_parser()
    ns = parser.parse_args(normalize_bools(argv))
    warnings: list[str] = []

    def slice_of(flag: str) -> list[str]:
        return [v for raw in getattr(ns, flag.replace("-", "_")) for v in _csv(raw)]

    strategy = ns.reload_strategy
    if strategy not in (s.value for s in Strategy):
        raise FlagError(f"--reload-strategy: {strategy!r} must be env-vars or annotations")
    if ns.log_format not in ("", "json", "text"):
        raise FlagError(f"--log-format: {ns.log_format!r} must be json or empty")
    if ns.log_level not in LEVELS:
        raise FlagError(f"--log-level: {ns.log_level!r} must be one of {', '.join(LEVELS)}")
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
        if not _DNS_LABEL.match(n):
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
        if not _DNS_SUBDOMAIN.match(ns.hash_key_secret):
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
        log_format=ns.log_format,
        log_level=ns.log_level,
        kubeconfig=ns.kubeconfig,
        context=ns.context,
        warnings=tuple(warnings),
        hash_key=hash_key,
    )


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
