"""The controller's command line as argparse sees it: Reloader v1's flags (compat-spec §6.1),
Reloader v2's (v2-spec §1.2) and ours, with pflag's conventions (`flags.parse` turns the result
into `Options`; `compat` adds Reloader v2's semantics under `--compat=v2`)."""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable, Sequence
from typing import NoReturn

from kube_reloader.cli import admission, fleet
from kube_reloader.core.annotations import Keys, parse_bool

BOOL_FLAGS = (
    "reconcile-on-start",
    "auto-reload-all",
    "enable-ha",
    "sync-after-restart",
    "enable-pprof",
    "enable-csi-integration",
    "alert-on-reload",
    "alert-structured",
    "leader-election-release-on-cancel",
    "reload-tls-secrets",
)
#: the boolean flags whose default is true
TRUE_BY_DEFAULT = ("reconcile-on-start", "leader-election-release-on-cancel")
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
    ("configmap-exclude-annotation", "configmap_exclude"),
    ("secret-exclude-annotation", "secret_exclude"),
    ("secretproviderclass-annotation", "spc_reload"),
    ("secretproviderclass-auto-annotation", "spc_auto"),
    ("secretproviderclass-exclude-annotation", "spc_exclude"),
)
#: Reloader v2's plain string flags (besides the annotation flags) and their defaults
V2_STRING_FLAGS = (
    ("alert-webhook-url", ""),
    ("alert-sink", ""),
    ("alert-proxy", ""),
    ("alert-additional-info", ""),
    ("leader-election-namespace", ""),
    ("health-addr", ":8080"),
)
SLICE_FLAGS = (
    "resources-to-ignore",
    "ignored-workload-types",
    "namespaces",
    "namespaces-to-ignore",
    "namespace-selector",
    "resource-label-selector",
)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


class FlagError(ValueError):
    """One line, naming the flag."""


class _Parser(argparse.ArgumentParser):
    """A usage error (an unknown flag, a value argparse refuses) is a `FlagError`: the
    program prints one line and exits 1, as Reloader (cobra) does, not argparse's 2."""

    def error(self, message: str) -> NoReturn:
        raise FlagError(message)


def _bool(flag: str) -> Callable[[str], bool]:
    def parse(value: str) -> bool:
        parsed = parse_bool(value)
        if parsed is None:
            raise argparse.ArgumentTypeError(f"--{flag}: {value!r} is not a boolean")
        return parsed

    return parse


def split_csv(value: str) -> list[str]:
    if value == "":
        return []
    try:
        return [v for row in csv.reader([value]) for v in row]
    except csv.Error as exc:  # e.g. a line break inside a quoted value
        raise FlagError(f"{value[:60]!r} is not a comma-separated list: {exc}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kube-reloader",
        description=(
            "Run the reload controller (Stakater Reloader v1 and v2 compatible flags). "
            "Other commands: `kube-reloader dev-cluster ...`, `kube-reloader run [flags]`."
        ),
        allow_abbrev=False,
    )
    parser.add_argument(
        "--compat", default="v1", metavar="v1|v2", help="Reloader v1.4's or v2's semantics"
    )
    for flag in BOOL_FLAGS:
        # ours: --reconcile-on-start (default true) applies changes made while no replica ran
        default = flag in TRUE_BY_DEFAULT
        parser.add_argument(f"--{flag}", type=_bool(flag), default=default, metavar="BOOL")
    for flag, field in ANNOTATION_FLAGS:
        parser.add_argument(f"--{flag}", default=getattr(Keys(), field))
    for flag, text in V2_STRING_FLAGS:
        parser.add_argument(f"--{flag}", default=text)
    parser.add_argument("--leader-election-id", default=None,
                        help="Lease name (default stakater-reloader-lock; "
                             "with --compat=v2 reloader-leader-election)")  # fmt: skip
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
        "--audit-interval", default="5m",
        help="time between two staleness audits by the leader (0 disables)",
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
    # ours: key-level reloads (kube-reloader.io/reload-scope's default) and TLS Secrets
    parser.add_argument("--reload-scope", default="object", metavar="object|keys")
    # ours: pod-level reloads for workloads without kube-reloader.io/strategy
    parser.add_argument("--default-strategy", default="patch", metavar="patch|evict")
    parser.add_argument("--workload-kind", action="append", default=[],
                        metavar="GROUP/VERSION/RESOURCE:PATH")  # fmt: skip
    fleet.add(parser)  # ours: fleet-safe rotations
    admission.add(parser)  # ours: one rollout per apply (the mutating admission webhook)
    return parser


def normalize_bools(argv: Sequence[str]) -> list[str]:
    """pflag: a bare boolean flag means `=true`."""
    bare = {f"--{f}" for f in (*BOOL_FLAGS, *fleet.BOOL_FLAGS)}
    return [f"{a}=true" if a in bare else a for a in argv]
