"""The controller's command line as argparse sees it: Reloader v1's flags (compat-spec §6.1),
Reloader v2's (v2-spec §1.2) and ours, with pflag's conventions (`flags.parse` turns the result
into `Options`; `compat` adds Reloader v2's semantics under `--compat=v2`)."""

from __future__ import annotations

import argparse
import csv
import re
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, Protocol

from kube_reloader.cli import admissionflags, fleet
from kube_reloader.cli.flaghelp import COMMANDS, HELP, OverviewFormatter
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
#: the value each plain string flag takes, as `--help` shows it
METAVARS = {
    "alert-webhook-url": "URL",
    "alert-sink": "SINK",
    "alert-proxy": "URL",
    "alert-additional-info": "TEXT",
    "leader-election-namespace": "NAMESPACE",
    "health-addr": "HOST:PORT",
    "log-format": "json|text",
    "log-level": "LEVEL",
    "webhook-url": "URL",
}
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


class _Group(Protocol):
    """A parser or an argument group: where flags are added."""

    def add_argument(self, *names: str, **kwargs: Any) -> argparse.Action: ...


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
    """The controller's parser: `kube-reloader [run] [flags]`."""
    parser = _Parser(
        prog="kube-reloader",
        usage="kube-reloader [run] [FLAG ...]\n       kube-reloader COMMAND [ARG ...]",
        description=overview(),
        epilog="A mistyped flag stops the controller with exit 1, as Reloader does.",
        formatter_class=OverviewFormatter,
        allow_abbrev=False,
    )
    add_flags(parser)
    return parser


def overview() -> str:
    """The description of `kube-reloader --help`: what it is, then every command."""
    width = max(len(name) for name in COMMANDS)
    lines = [f"  {name:<{width}}  {text}" for name, text in COMMANDS.items()]
    return (
        "Reload workloads when their ConfigMaps and Secrets change: a drop-in replacement\n"
        "for Stakater Reloader, taking its v1.4 and v2 flags. With no command, or `run`,\n"
        "it runs the controller with the flags below.\n\ncommands:\n"
        + "\n".join(lines)
        + "\n\n`kube-reloader COMMAND --help` (or `kube-reloader help COMMAND`) describes one."
    )


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Every controller flag, with its default and help, in groups (`explain` and `impact`
    take them too, from here)."""
    group = parser.add_argument_group("Reloader's flags (v1.4 and v2)")
    _reloader_flags(group)
    keys = parser.add_argument_group("annotation names (Reloader's)")
    for flag, field in ANNOTATION_FLAGS:
        keys.add_argument(
            f"--{flag}", default=getattr(Keys(), field), metavar="KEY", help=HELP[flag]
        )
    ours = parser.add_argument_group("kube-reloader's own flags")
    _own_flags(ours)
    fleet.add(parser.add_argument_group("fleet-safe rotations (kube-reloader's own)"))
    admissionflags.add(parser.add_argument_group("admission webhook (kube-reloader's own)"))


def _reloader_flags(group: _Group) -> None:
    own = ("reconcile-on-start", "reload-tls-secrets")
    for flag in BOOL_FLAGS:
        if flag not in own:
            _add_bool(group, flag)
    for flag, text in V2_STRING_FLAGS:
        group.add_argument(f"--{flag}", default=text, metavar=METAVARS[flag], help=HELP[flag])
    group.add_argument(
        "--leader-election-id", default=None, metavar="NAME", help=HELP["leader-election-id"]
    )
    for flag in SLICE_FLAGS:
        group.add_argument(
            f"--{flag}", action="append", default=[], metavar="LIST", help=HELP[flag]
        )
    for flag, default in (("log-format", ""), ("log-level", "info"), ("webhook-url", "")):
        group.add_argument(f"--{flag}", default=default, metavar=METAVARS[flag], help=HELP[flag])
    group.add_argument(
        "--is-Argo-Rollouts",
        "--is-argo-rollouts",
        dest="is_argo_rollouts",
        default="false",
        metavar="true|false",
        help=HELP["is-Argo-Rollouts"],
    )
    group.add_argument(
        "--reload-strategy",
        default="env-vars",
        metavar="env-vars|annotations",
        help=HELP["reload-strategy"],
    )
    for flag in ("reload-on-create", "reload-on-delete"):
        group.add_argument(f"--{flag}", default="false", metavar="true|false", help=HELP[flag])
    group.add_argument(
        "--pprof-addr", default=":6060", metavar="HOST:PORT", help=HELP["pprof-addr"]
    )
    group.add_argument(
        "--is-openshift", default="", metavar="auto|true|false", help=HELP["is-openshift"]
    )
    group.add_argument(
        "--metrics-addr", default=":9090", metavar="HOST:PORT", help=HELP["metrics-addr"]
    )
    for flag, default in (
        ("lease-duration", "15s"),
        ("renew-deadline", "10s"),
        ("retry-period", "2s"),
    ):
        name = f"leader-election-{flag}"
        group.add_argument(f"--{name}", default=default, metavar="DURATION", help=HELP[name])


def _own_flags(group: _Group) -> None:
    group.add_argument("--compat", default="v1", metavar="v1|v2", help=HELP["compat"])
    for flag in ("reconcile-on-start", "reload-tls-secrets"):
        _add_bool(group, flag)
    group.add_argument("--kubeconfig", default=None, metavar="FILE", help=HELP["kubeconfig"])
    group.add_argument("--context", default=None, metavar="NAME", help=HELP["context"])
    group.add_argument("--workers", type=int, default=4, metavar="N", help=HELP["workers"])
    durations = (
        ("reload-coalesce-window", "300ms"),
        ("reload-min-interval", "5s"),
        ("audit-interval", "5m"),
    )
    for flag, default in durations:
        group.add_argument(f"--{flag}", default=default, metavar="DURATION", help=HELP[flag])
    for flag, number in (("reload-rate", 50.0), ("reload-burst", 200.0)):
        group.add_argument(f"--{flag}", type=float, default=number, metavar="N", help=HELP[flag])
    # keyed content hashes (not Reloader-identical) for clusters where the unsalted SHA-1 of
    # a short Secret must not be readable from env vars and annotations
    choices = (
        ("hash-algorithm", "sha1", "sha1|hmac-sha256"),
        ("hash-key-secret", "kube-reloader-hash-key", "NAME"),
        ("reload-scope", "object", "object|keys"),
        ("default-strategy", "patch", "patch|evict"),
        ("event-loop", "auto", "auto|asyncio|uvloop"),
    )
    for flag, default, metavar in choices:
        group.add_argument(f"--{flag}", default=default, metavar=metavar, help=HELP[flag])
    group.add_argument(
        "--workload-kind",
        action="append",
        default=[],
        metavar="GROUP/VERSION/RESOURCE:PATH",
        help=HELP["workload-kind"],
    )


def _add_bool(group: _Group, flag: str) -> None:
    group.add_argument(
        f"--{flag}",
        type=_bool(flag),
        default=flag in TRUE_BY_DEFAULT,
        metavar="BOOL",
        help=HELP[flag],
    )


def normalize_bools(argv: Sequence[str]) -> list[str]:
    """pflag: a bare boolean flag means `=true`."""
    bare = {f"--{f}" for f in (*BOOL_FLAGS, *fleet.BOOL_FLAGS)}
    return [f"{a}=true" if a in bare else a for a in argv]
