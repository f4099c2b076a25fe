"""Should this workload reload for this resource change? Reloader v1's rules (compat-spec §1.2),
or v2's under `--compat=v2` (`MatchConfig.v2`), as one pure function returning a `Decision`
that says why.

Order: workload-type ignore, resource `ignore`, exclude, named list, search + match, auto /
typed auto / `--auto-reload-all`. The trigger keys are read from the workload's own metadata,
unless none of them is present there, in which case they are read from the pod template (the
fallback both versions apply by key presence, not value). Where the versions differ:

| | v1 | v2 |
|---|---|---|
| auto, typed auto | Go's ParseBool (`True`, `1`, `t` count) | exactly `"true"` |
| `--auto-reload-all` opt-out | any non-empty auto value | exactly `"false"` |
| exclude lists | the workload's metadata only | the annotation set chosen above |
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from kube_reloader.core import regexes
from kube_reloader.core.annotations import IGNORE_TLS, Keys, list_members, parse_bool
from kube_reloader.core.objects import ResourceType, WorkloadKind
from kube_reloader.core.parsing import quote
from kube_reloader.core.records import record

VALID_IGNORED_WORKLOAD_TYPES = ("jobs", "cronjobs")
#: `--reload-tls-secrets`: a Secret of this type, or carrying this annotation, is a TLS Secret
TLS_SECRET_TYPE = "kubernetes.io/tls"
CERT_MANAGER_CERTIFICATE = "cert-manager.io/certificate-name"

_IGNORED_TYPE_TOKENS: dict[str, str] = {WorkloadKind.JOB: "jobs", WorkloadKind.CRONJOB: "cronjobs"}


class Reason(StrEnum):
    """Closed set of decision outcomes (a metric label and part of every log line)."""

    WORKLOAD_TYPE_IGNORED = "workload_type_ignored"
    RESOURCE_IGNORED = "resource_ignored"
    EXCLUDED = "excluded"
    NAMED = "named"
    SEARCH = "search"
    AUTO = "auto"
    AUTO_RELOAD_ALL = "auto_reload_all"
    TLS_SECRET = "tls_secret"
    NO_MATCH = "no_match"


class Source(StrEnum):
    WORKLOAD = "workload metadata"
    POD_TEMPLATE = "pod template"


@record
class MatchConfig:
    keys: Keys = field(default_factory=Keys)
    auto_reload_all: bool = False
    ignored_workload_types: tuple[str, ...] = ()
    #: `--reload-tls-secrets`: TLS Secrets reload the workloads that use them, annotation or not
    reload_tls_secrets: bool = False
    #: Reloader v2's rules (`--compat=v2`; the module docstring's table)
    v2: bool = False

    def auto_on(self, value: str) -> bool:
        """Does this auto (or typed auto) value turn auto on?"""
        return value == "true" if self.v2 else parse_bool(value) is True

    def opts_out_of_all(self, value: str) -> bool:
        """Does this auto value opt the workload out of `--auto-reload-all`? v1: any non-empty
        value that does not turn auto on; v2: exactly "false"."""
        return value == "false" if self.v2 else value != "" and not self.auto_on(value)

    def opts_out_of_tls(self, value: str) -> bool:
        """Does this auto value opt the workload out of `--reload-tls-secrets`: a false value
        (Go's ParseBool; exactly "false" under v2)."""
        return value == "false" if self.v2 else parse_bool(value) is False

    def unread(self, value: str) -> str | None:
        """Why an auto value is not read as written (a warning), or None."""
        read = value in ("true", "false") if self.v2 else parse_bool(value) is not None
        if not value or read:
            return None
        if self.v2:  # not true, and no opt-out of --auto-reload-all either
            return 'is neither true nor false: not true, and only "false" opts out'
        return "is not a boolean (true/false); treated as false"


@record
class Decision:
    reload: bool
    reason: Reason
    message: str
    #: True when the match needs the resource to be referenced (search, auto)
    auto: bool = False
    source: Source = Source.WORKLOAD
    #: problems found on the way that did not stop the decision (e.g. invalid regexes)
    warnings: tuple[str, ...] = ()


def is_tls_secret(secret_type: str, annotations: Mapping[str, str]) -> bool:
    """A Secret `--reload-tls-secrets` covers: type kubernetes.io/tls, or one cert-manager
    issued (its certificate-name annotation; e.g. an Opaque Secret of a keystore)."""
    return secret_type == TLS_SECRET_TYPE or CERT_MANAGER_CERTIFICATE in annotations


def ignored_workload_types_valid(values: Sequence[str]) -> bool:
    """v1 disables the whole filter when any entry is not exactly `jobs` or `cronjobs`."""
    return all(v in VALID_IGNORED_WORKLOAD_TYPES for v in values)


def ignored_workload_type_token(kind: str) -> str | None:
    """The `--ignored-workload-types` token that names this kind (`jobs`, `cronjobs`), if any:
    only those two built-in kinds can be ignored by type."""
    return _IGNORED_TYPE_TOKENS.get(kind)


def carries_named_list(
    keys: Keys,
    rtype: ResourceType,
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
) -> bool:
    """Does the workload name resources of this type in a list (`keys.named(rtype)`, on its own
    metadata or on its pod template)? Then every resource of the type in its namespace is a
    candidate, referenced or not: the list may match names (or regexes) it never mounts."""
    key = keys.named(rtype)
    return key in workload_annotations or key in template_annotations


def annotation_source(
    keys: Keys,
    rtype: ResourceType,
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
) -> tuple[Mapping[str, str], Source]:
    """The annotation set the trigger keys are read from: the workload's own metadata when it
    carries any of them, else its pod template when that does (the fallback by key presence),
    else the metadata (where v2 then reads an exclude list)."""
    triggers = keys.trigger_keys(rtype)
    if any(k in workload_annotations for k in triggers) or not any(
        k in template_annotations for k in triggers
    ):
        return workload_annotations, Source.WORKLOAD
    return template_annotations, Source.POD_TEMPLATE


def named_list(
    keys: Keys,
    rtype: ResourceType,
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
) -> str:
    """The named list `decide` reads for this type ("" when none): the only way a resource
    the workload does not reference can reload it."""
    src, _ = annotation_source(keys, rtype, workload_annotations, template_annotations)
    return src.get(keys.named(rtype), "")


def decide(
    *,
    rtype: ResourceType,
    name: str,
    resource_annotations: Mapping[str, str],
    kind: str,
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
    config: MatchConfig,
    resource_tls: bool = False,
) -> Decision:
    """The steps in v1's order (the module docstring); the first that decides wins."""
    keys = config.keys
    what = f"{rtype.kind} {name!r}"
    if (ignored := _ignored(keys, what, kind, resource_annotations, config)) is not None:
        return ignored
    r = _read(config, rtype, name, workload_annotations, template_annotations)
    return (
        _excluded(r, r.src if config.v2 else workload_annotations)
        or _named(r)
        or _searched_or_auto(r, resource_annotations, config)
        or _tls(r, config, resource_tls, workload_annotations, template_annotations)
        or Decision(
            False,
            Reason.NO_MATCH,
            _no_match(r, config),
            source=r.source,
            warnings=tuple(r.warnings),
        )
    )


@dataclass(slots=True)
class _Read:
    """What `decide` reads from the annotation set it chose (steps 3 and 4)."""

    keys: Keys
    rtype: ResourceType
    name: str
    what: str
    src: Mapping[str, str]
    source: Source
    named: str
    search: str
    auto: str
    typed_auto: str
    #: problems found on the way, in order; each Decision carries those found before it
    warnings: list[str]

    def decision(self, reload: bool, reason: Reason, message: str, *, auto: bool) -> Decision:
        return Decision(
            reload, reason, message, auto=auto, source=self.source, warnings=tuple(self.warnings)
        )


def _ignored(
    keys: Keys,
    what: str,
    kind: str,
    resource_annotations: Mapping[str, str],
    config: MatchConfig,
) -> Decision | None:
    """1. workload-type ignore; 2. resource ignore."""
    types = config.ignored_workload_types
    if types and ignored_workload_types_valid(types):
        token = ignored_workload_type_token(kind)
        if token is not None and token in types:
            return Decision(
                False,
                Reason.WORKLOAD_TYPE_IGNORED,
                f"{kind}s are ignored (--ignored-workload-types)",
            )
    if resource_annotations.get(keys.ignore) == "true":
        return Decision(False, Reason.RESOURCE_IGNORED, f'{what} carries {keys.ignore}="true"')
    return None


def _read(
    config: MatchConfig,
    rtype: ResourceType,
    name: str,
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
) -> _Read:
    """3./4. the annotation set (workload metadata, or the pod template as a fallback)."""
    keys = config.keys
    src, source = annotation_source(keys, rtype, workload_annotations, template_annotations)
    auto, typed_auto = src.get(keys.auto, ""), src.get(keys.typed_auto(rtype), "")
    warnings: list[str] = []
    for key, value in ((keys.auto, auto), (keys.typed_auto(rtype), typed_auto)):
        problem = config.unread(value)
        if problem is not None:
            warnings.append(f"{key}={quote(value)} on the {source} {problem}")
    return _Read(
        keys,
        rtype,
        name,
        f"{rtype.kind} {name!r}",
        src,
        source,
        src.get(keys.named(rtype), ""),
        src.get(keys.search, ""),
        auto,
        typed_auto,
        warnings,
    )


def _excluded(r: _Read, annotations: Mapping[str, str]) -> Decision | None:
    """5. exclude: v1 reads it from the workload's metadata only, v2 from the chosen set."""
    exclude_key = r.keys.exclude(r.rtype)
    if exclude_key in annotations and r.name in list_members(annotations[exclude_key]):
        where = r.source if annotations is r.src else Source.WORKLOAD
        return Decision(
            False,
            Reason.EXCLUDED,
            f"{r.what} is listed in {exclude_key} on the {where}",
            source=where,
            warnings=tuple(r.warnings),
        )
    return None


def _named(r: _Read) -> Decision | None:
    """6. the named list (its entries' problems become warnings)."""
    if not r.named:
        return None
    key = r.keys.named(r.rtype)
    compiled = regexes.compile_list(r.named)
    r.warnings.extend(
        f"{key} on the {r.source}: {problem}; entry skipped" for problem in compiled.problems
    )
    if compiled.refused is not None:
        r.warnings.append(f"{key} on the {r.source}: {compiled.refused}")
        return r.decision(
            False,
            Reason.NO_MATCH,
            f"{key} on the {r.source} is refused: {compiled.refused}",
            auto=False,
        )
    entry = compiled.first_match(r.name)
    if entry is None:
        return None
    return r.decision(
        True,
        Reason.NAMED,
        f"{r.what} matches {quote(entry)} in {key} on the {r.source}",
        auto=False,
    )


def _searched_or_auto(
    r: _Read, resource_annotations: Mapping[str, str], config: MatchConfig
) -> Decision | None:
    """7. search + match; 8. auto, typed auto, --auto-reload-all."""
    keys = r.keys
    if r.search == "true" and resource_annotations.get(keys.match) == "true":
        return r.decision(
            True,
            Reason.SEARCH,
            f'{keys.search}="true" on the {r.source} and {r.what} carries {keys.match}="true"',
            auto=True,
        )
    if config.auto_on(r.auto) or config.auto_on(r.typed_auto):
        key = keys.auto if config.auto_on(r.auto) else keys.typed_auto(r.rtype)
        return r.decision(True, Reason.AUTO, f"{key}={r.src[key]!r} on the {r.source}", auto=True)
    opted_out = config.opts_out_of_all(r.auto) or config.opts_out_of_all(r.typed_auto)
    if config.auto_reload_all and not opted_out:
        return r.decision(
            True,
            Reason.AUTO_RELOAD_ALL,
            "--auto-reload-all and no auto annotation opts out",
            auto=True,
        )
    return None


def _tls(
    r: _Read,
    config: MatchConfig,
    resource_tls: bool,
    workload_annotations: Mapping[str, str],
    template_annotations: Mapping[str, str],
) -> Decision | None:
    """9. ours: --reload-tls-secrets, unless the workload opts out."""
    if not (config.reload_tls_secrets and resource_tls and r.rtype is ResourceType.SECRET):
        return None
    opted_out = _tls_opt_out(r, config, workload_annotations, template_annotations)
    if opted_out is None:
        return r.decision(
            True,
            Reason.TLS_SECRET,
            f"{r.what} is a TLS Secret and --reload-tls-secrets is on",
            auto=True,
        )
    return r.decision(
        False,
        Reason.NO_MATCH,
        f"{r.what} is a TLS Secret, but {opted_out} opts out of --reload-tls-secrets",
        auto=False,
    )


def _no_match(r: _Read, config: MatchConfig) -> str:
    """10. why nothing matched."""
    keys = r.keys
    if r.auto or r.typed_auto:
        msg = f"auto annotation value {quote(r.auto or r.typed_auto)} is not true"
        if config.auto_reload_all:
            msg += (
                ' ("false" opts out of --auto-reload-all)'
                if config.v2
                else " (a non-empty value also opts out of --auto-reload-all)"
            )
        return msg
    if r.named:
        return f"{r.what} matches no entry of {keys.named(r.rtype)} on the {r.source}"
    if r.search == "true":
        return f'{keys.search} is set but {r.what} does not carry {keys.match}="true"'
    return f"no reload annotation for {r.rtype.kind}s on the workload or its pod template"


def _tls_opt_out(
    r: _Read, config: MatchConfig, workload: Mapping[str, str], template: Mapping[str, str]
) -> str | None:
    """The annotation by which a workload opts out of `--reload-tls-secrets`, if any."""
    if config.opts_out_of_tls(r.auto):
        return f"auto={quote(r.auto)}"
    if config.opts_out_of_tls(r.typed_auto):
        return f"secret auto={quote(r.typed_auto)}"
    for where, found in (("workload", workload), ("pod template", template)):
        if found.get(IGNORE_TLS, "").strip() == "true":
            return f'{IGNORE_TLS}="true" on the {where}'
    return None
