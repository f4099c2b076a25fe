"""The edit of a pod template that records one resource's content, under either strategy: its
env var on the target container (`env-vars`) or its entry in the record annotation
(`annotations`), with Reloader v2's last-reloaded-from under `--compat=v2`.

`planning.plan` decides whether a workload reloads and for which container; `edit` says what
it writes, or that the template already records the content (the edit's `body` is then None).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any, NamedTuple

from kube_reloader.core import hashing, strategies
from kube_reloader.core.annotations import LAST_RELOADED_FROM
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.records import record
from kube_reloader.core.references import PodTemplate


@record
class Content:
    """One resource's content, as a workload records it."""

    rtype: ResourceType
    namespace: str
    name: str
    #: the hash the workload records (`Plan.written`: the content's, or its consumed keys')
    hash: str
    #: the resource went away
    deleted: bool = False


class Edit(NamedTuple):
    """The patch that records a resource's content in a pod template, or None when the template
    already records it, with the sentence for either case."""

    patch_type: strategies.PatchType
    body: Any
    #: what the template already says (when `body` is None)
    done: str
    #: what `body` does
    todo: str


def edit(
    tmpl: PodTemplate,
    strategy: strategies.Strategy,
    container: str,
    content: Content,
    env_name: str,
    *,
    v2: bool,
    now: float,
) -> Edit:
    """The edit that records `content` for `container` under `strategy`; `env_name` is the
    resource's env var (`strategies.env_var_name`), `now` Unix seconds."""
    if strategy is strategies.Strategy.ENV_VARS:
        return _env_edit(tmpl, container, content, env_name, v2=v2, now=now)
    return _record_edit(tmpl, container, content, v2=v2, now=now)


def _env_edit(
    tmpl: PodTemplate, container: str, content: Content, env_name: str, *, v2: bool, now: float
) -> Edit:
    """The env var set to the content's hash on the container, or removed on a delete."""
    if content.deleted:
        ops = strategies.env_remove_patch(tmpl, container, env_name)
        if v2 and ops is not None:  # v2 records the delete too: last-reloaded-from, hash ""
            value = _v2_value(dataclasses.replace(content, hash=""), container, now)
            op = strategies.annotation_op(tmpl, LAST_RELOADED_FROM, value)
            ops.extend([op] if op is not None else [])
        return Edit(
            strategies.PatchType.JSON,
            ops,
            done=f"{env_name} is not set on container {container!r}",
            todo=f"remove {env_name} from container {container!r}",
        )
    written = content.hash
    body = strategies.env_patch(tmpl, container, env_name, written)
    if v2 and body is not None:  # v2 also writes last-reloaded-from in this mode
        body = strategies.merge_strategic([body, _v2_source(content, container, now)])
    return Edit(
        strategies.PatchType.STRATEGIC,
        body,
        done=f"container {container!r} already has {env_name}={written}",
        todo=f"set {env_name}={written} on container {container!r}",
    )


def _record_edit(
    tmpl: PodTemplate, container: str, content: Content, *, v2: bool, now: float
) -> Edit:
    """The content's hash (the delete marker on a delete) in the record annotation, with the
    last-reloaded-from annotation (v1's shape, or v2's under `--compat=v2`)."""
    recorded = hashing.DELETE_MARKER_HASH if content.deleted else content.hash
    record = strategies.records(tmpl)  # ours, with Reloader's last-reloaded-from over it
    body: Any = None
    if record.get(strategies.record_key(content.rtype, content.name)) != recorded:
        record[strategies.record_key(content.rtype, content.name)] = recorded
        value = strategies.annotation_value(
            rtype=content.rtype,
            name=content.name,
            namespace=content.namespace,
            hash=recorded,
            container=container,
            observed_at=int(now),
        )
        if v2:
            v2_content = "" if content.deleted else content.hash
            value = _v2_value(dataclasses.replace(content, hash=v2_content), container, now)
        body = strategies.annotation_patch(value, record)
    what = f"{content.rtype.value} {content.name} {recorded}"
    return Edit(
        strategies.PatchType.STRATEGIC,
        body,
        done=f"the pod template already records {what}",
        todo=f"record {what} in the pod template",
    )


def rfc3339_nano(wall: float) -> str:
    """Go's `time.RFC3339Nano` of a UTC time (its JSON form): the fraction without trailing
    zeros, none for whole seconds; to the microsecond (a float's precision)."""
    micros = round(wall * 1_000_000)
    seconds, fraction = divmod(micros, 1_000_000)
    whole = dt.datetime.fromtimestamp(seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{whole}.{fraction:06d}".rstrip("0").rstrip(".") + "Z"


def _v2_value(content: Content, container: str, now: float) -> str:
    at = rfc3339_nano(now)
    return strategies.annotation_value_v2(
        rtype=content.rtype,
        name=content.name,
        namespace=content.namespace,
        hash=content.hash,
        container=container,
        at=at,
    )


def _v2_source(content: Content, container: str, now: float) -> dict[str, Any]:
    """Reloader v2's last-reloaded-from, as a strategic-merge body of its own."""
    return strategies.annotation_patch(_v2_value(content, container, now))
