"""`kube-reloader lint`'s rules for the named reload lists (`configmap.reloader.stakater.com/
reload: a,b-.*`): a list or an entry RE2 refuses (KR007), a name marked ignored (KR012), a name
missing from the input, with kustomize's hash suffix in mind (KR005), a name the pod template
does not use (KR006). Pure: the issues as (rule, path, message, fix); `core.linting` makes them
findings."""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

from kube_reloader.core import regexes
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType

#: an entry with any of these is a pattern, not a name: it is not looked up
REGEX_META = re.compile(r"[.*+?\[\](){}|^$\\]")

Path = tuple[str | int, ...]
Issue = tuple[str, Path, str, str]


def named_lists(
    src: Mapping[str, str],
    base: Path,
    ref: str,
    ns: str,
    keys: Keys,
    references: Iterable[tuple[ResourceType, str]],
    present: set[tuple[str, str, str]],
    ignored: Mapping[tuple[str, str, str], str],
) -> list[Issue]:
    """Issues of the named lists in annotations `src` (at `base`) of workload `ref` in `ns`."""
    refs = list(references)
    out: list[Issue] = []
    for rtype in (ResourceType.CONFIGMAP, ResourceType.SECRET):
        key = keys.named(rtype)
        if key not in src:
            continue
        at = (*base, key)
        refused = regexes.compile_list(src[key]).refused
        if refused is not None:
            fix = "split the workload's list or name fewer resources"
            out.append(("KR007", at, f"{ref}: {key}: {refused}", fix))
            continue
        used = {n for t, n in refs if t is rtype}
        for entry in (e.strip() for e in src[key].split(",")):
            where = (rtype, ns, entry)
            out += _entry(where, key, at, ref, keys, used, present, ignored)
    return out


def _entry(
    where: tuple[ResourceType, str, str],
    key: str,
    at: Path,
    ref: str,
    keys: Keys,
    used: set[str],
    present: set[tuple[str, str, str]],
    ignored: Mapping[tuple[str, str, str], str],
) -> list[Issue]:
    rtype, ns, entry = where
    compiled = regexes.compile_entry(entry)
    if compiled.error:
        fix = "fix the expression (entries are anchored as ^entry$)"
        return [("KR007", at, f"{ref}: {compiled.error}; the entry is skipped", fix)]
    if not entry or REGEX_META.search(entry):
        return []
    out: list[Issue] = []
    if (rtype.value, ns, entry) in ignored:
        text = (
            f"{ref}: {key} names {rtype.kind} {entry!r}, which is marked "
            f'{keys.ignore}="true": changes to it never reload anything'
        )
        out.append(("KR012", at, text, f"remove {keys.ignore} from {entry}"))
    if (rtype.value, ns, entry) not in present:
        same_ns = sorted(n for t, s, n in present if t == rtype.value and s == ns)
        text = (
            f"{ref}: {key} names {rtype.kind} {entry!r}, which is not in the input"
            f"{_missing_hint(entry, same_ns)}"
        )
        fix = "fix the name, or ignore this if the resource is created elsewhere"
        out.append(("KR005", at, text, fix))
    elif entry not in used:
        text = (
            f"{ref}: {key} names {rtype.kind} {entry!r}, which the pod template does not use; "
            "a change to it still restarts the pods, but it may be a typo"
        )
        out.append(("KR006", at, text, "check the name"))
    return out


def _missing_hint(entry: str, same_ns: list[str]) -> str:
    """A kustomize-suffixed name that exists (`entry-<hash>`), else the closest name."""
    suffixed = [n for n in same_ns if n.startswith(entry + "-")]
    if suffixed:
        return (
            f"; {suffixed[0]!r} exists: kustomize adds a hash suffix to generated "
            "resources but does not rewrite annotations, so name it in full or use "
            f"{entry + '-.*'!r}"
        )
    close = difflib.get_close_matches(entry, same_ns, n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
