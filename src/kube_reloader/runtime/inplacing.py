"""In-place rotations (`restart-in-place`, `signal`): the pods are annotated one at a time and
the agent sidecar does the rest (core/inplace.py). Run by `Rotations` for workloads whose
policy names one of them; the pod listing, the fence, the pacing and the reports are the
rotation's.

* `restart-in-place` writes a restart token on the next pod whose containers started before
  the change, then waits until they started again and the pod is Ready;
* `signal` computes, once per change (and again when its content changes), the digest of the
  files each affected ConfigMap volume will hold (the ConfigMaps read by LIST by name and
  dropped at once); a volume holding a Secret is named `inplace.CHANGED` and no Secret is read.
  It writes the request on the next pod that lacks it, and waits until the pod is Ready and
  `inplace.SIGNAL_SETTLE` has passed.

The template is never written and no pod is replaced: no new ReplicaSet, same pod UIDs.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kube_reloader.core import evicting, inplace, planning, rollouts
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.kube import errors
from kube_reloader.kube.pods import PodObject, owned
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.podviews import in_place_view
from kube_reloader.runtime.reporting import log
from kube_reloader.runtime.rolloutreports import RolloutReports
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.writing import Writer


class Rotation(Protocol):
    """What an in-place rotation reads of `rotations.Rotation`."""

    workload: planning.Workload
    policy: evicting.PodPolicy
    changed_at: float
    plans: list[planning.Plan]
    started: float
    gone: bool


class Rotations(Protocol):
    """What it uses of `rotations.Rotations` (its pod listing, pacing and reports)."""

    clock: Clock
    writer: Writer
    fence: Fence
    rollouts: RolloutReports
    supervisor: Supervisor

    @property
    def lookup(self) -> Callable[[ObjectKey], planning.Workload | None]: ...

    async def list_pods(self, namespace: str, selector: str) -> list[PodObject]: ...

    async def pause(self, seconds: float) -> None: ...


POLL_SECONDS = 1.0
#: seconds past the change's whole second before the first restart (as `rotations`)
CLOCK_MARGIN = 1.0
#: this process's key for signal requests' change identifiers (`inplace.change_id`)
CHANGE_KEY = secrets.token_bytes(32)


@dataclass
class _Progress:
    """What an in-place rotation remembers between two looks at its pods."""

    mode: inplace.Mode
    #: the pod annotation it writes
    annotation: str
    started: float
    progress_at: float
    #: the change (time, contents) `want` was computed for, and the value to write
    want_for: object = None
    want: str = ""
    #: the pods this rotation wrote to (the Event's count)
    asked: set[str] = field(default_factory=set)
    #: asked to restart: their restarts when asked
    pending: dict[str, int] = field(default_factory=dict)
    #: restarted since asked, for the current change
    restarted: set[str] = field(default_factory=set)
    last_action: float | None = None
    #: pods left to reload at the last look
    left: int | None = None


async def rotate(
    rs: Rotations, rotation: Rotation, selector: str, uid: str, obj: Mapping[str, Any]
) -> bool | None:
    """Reload the pods in place; True when each is current, False when it failed, None when
    it stopped (lost lease, workload gone)."""
    w = rotation.workload
    mode = inplace.Mode(rotation.policy.strategy.value)
    annotation = inplace.RESTART if mode is inplace.Mode.RESTART else inplace.SIGNAL_REQUEST
    st = _Progress(mode, annotation, rs.clock.wall(), rs.clock.wall())
    while not rotation.gone:
        if not rs.fence.may_write():
            return None
        w = rs.lookup(w.key) or w
        wanted = await _want(rs, rotation, st, w, obj)
        if wanted is not None:
            if wanted:
                continue  # read again at the next look
            return False
        # a container restarted in the change's own second would look older than it (whole
        # seconds): nothing is asked before that second has passed, with a clock margin
        cutoff = math.floor(rotation.changed_at) + 1 + CLOCK_MARGIN
        if mode is inplace.Mode.RESTART and rs.clock.wall() < cutoff:
            await rs.pause(cutoff - rs.clock.wall())
            continue
        done = await _look_and_act(rs, rotation, st, w, selector, uid)
        if done is not None:
            return done
    return None


async def _want(
    rs: Rotations,
    rotation: Rotation,
    st: _Progress,
    w: planning.Workload,
    obj: Mapping[str, Any],
) -> bool | None:
    """Compute what to write when the change (or its content) is new; None: ready, True: a
    config could not be read (look again), False: the request cannot be written (failed)."""
    # a newer change, or newer content of one (same second, another write), takes over
    key = (
        rotation.changed_at,
        sorted((p.change.rtype, p.change.name, p.change.hash) for p in rotation.plans),
    )
    if st.want_for == key:
        return None
    st.want_for = key
    st.restarted.clear()
    if st.mode is inplace.Mode.RESTART:
        st.want = inplace.restart_token(rotation.changed_at)
        return None
    try:
        digests = await volume_digests(rs, w.namespace, obj, rotation)
    except errors.Transient as exc:
        st.want_for = None
        log.warning(
            "in-place: reading a config failed, will retry",
            extra={"workload": str(w.key), "error": str(exc)},
        )
        await rs.pause(POLL_SECONDS)
        return True
    change = inplace.change_id(key[0], ((str(t), n, h) for t, n, h in key[1]), CHANGE_KEY)
    st.want = inplace.signal_request(rotation.policy.signal, digests, change)
    if len(st.want) > inplace.MAX_REQUEST_TEXT:
        rs.rollouts.rotation_failed(
            w, "too many volumes to name in one signal request", 0, how=st.mode.value
        )
        return False
    return None


async def _look_and_act(
    rs: Rotations,
    rotation: Rotation,
    st: _Progress,
    w: planning.Workload,
    selector: str,
    uid: str,
) -> bool | None:
    """One look at the pods and what it calls for: True (each is current) or False (failed)
    to end the rotation, None to look again."""
    listed = await rs.list_pods(w.namespace, selector)
    pick = rotation.policy.pod_selector
    mine = [in_place_view(p, st.annotation) for p in listed if owned(p, w.kind, w.name, uid, pick)]
    for p in mine:  # asked, and restarted since: current, whatever its start time says
        fresh = inplace.current(p, st.mode, st.want, rotation.changed_at, frozenset())
        if p.uid in st.pending and (p.restarts > st.pending[p.uid] or fresh):
            del st.pending[p.uid]
            st.restarted.add(p.uid)
    for gone in set(st.pending) - {p.uid for p in mine}:
        del st.pending[gone]
    now = rs.clock.wall()
    step = _next_step(rotation, st, w, mine, now)
    if step.phase is inplace.Phase.DONE:
        if st.asked:
            elapsed = rs.clock.monotonic() - rotation.started
            rs.rollouts.rotation_done(w, rotation.plans, len(st.asked), elapsed, how=st.mode.value)
        return True
    if st.left is None or step.remaining < st.left:  # a pod became current: progress
        st.progress_at = now
    st.left = step.remaining
    deadline = rollouts.held_deadline(w.status)  # a tenant's own: capped
    if now - st.progress_at > deadline:  # no pod became current for that long
        reason = step.reason or f"{step.remaining} pods not reloaded"
        why = f"{reason} for {deadline:g}s"
        rs.rollouts.rotation_failed(w, why, len(st.asked), how=st.mode.value)
        return False
    if step.phase is inplace.Phase.WAIT:
        await rs.pause(evicting.poll_seconds(now - st.progress_at))
        return None
    assert step.pod is not None
    if not await _annotate(rs, rotation, step.pod.name, step.pod.uid, st.annotation, step.value):
        return None  # leadership lost: the rotation's next turn stops it
    if st.mode is inplace.Mode.RESTART:
        st.pending[step.pod.uid] = step.pod.restarts
    st.asked.add(step.pod.uid)
    st.last_action = rs.clock.wall()
    log.info(
        "in-place reload requested",
        extra={
            "workload": str(w.key),
            "pod": step.pod.name,
            "strategy": st.mode.value,
            "value": step.value[:80],
            "remaining": step.remaining,
        },
    )
    await rs.pause(POLL_SECONDS)
    return None


def _next_step(
    rotation: Rotation, st: _Progress, w: planning.Workload, mine: list[inplace.Pod], now: float
) -> inplace.Step:
    """The rotation's next step among `mine`, the pods of `w` it looked at."""
    replicas = w.status.replicas if w.status is not None else len(mine)
    return inplace.next_step(
        mine,
        st.mode,
        st.want,
        rotation.changed_at,
        now,
        replicas=replicas,
        started=st.started,
        ordered=traits(w.kind).ordered,
        last_action=st.last_action,
        pending=frozenset(st.pending),
        restarted=frozenset(st.restarted),
    )


async def _annotate(
    rs: Rotations, rotation: Rotation, pod: str, uid: str, key: str, value: str
) -> bool:
    """Write the request on the pod; False only when leadership was lost. A pod gone or
    re-created under its name (the UID in the patch no longer matches), or a write the API
    refused for now, is left to the next look."""
    w = rotation.workload
    write = rs.supervisor.task(
        f"annotate/{w.namespace}/{pod}", rs.writer.annotate_pod(w.namespace, pod, uid, key, value)
    )
    try:
        return await rs.fence.guarded(write)
    except (errors.NotFound, errors.Conflict, errors.Invalid):
        return True
    except errors.Transient as exc:
        log.warning(
            "in-place: writing a pod's request failed, will retry",
            extra={"workload": str(w.key), "pod": pod, "error": str(exc)},
        )
        return True


async def volume_digests(
    rs: Rotations, namespace: str, obj: Mapping[str, Any], rotation: Rotation
) -> dict[str, str]:
    """For every volume that mounts one of the rotation's changed configs, the digest of
    its files, or `inplace.CHANGED` when it holds a Secret (no digest of Secret content is
    published). A config that does not exist (an optional one) adds no file."""
    changed = {(p.change.rtype, p.change.name) for p in rotation.plans}
    out: dict[str, str] = {}
    for volume in _volumes(obj):
        sources = list(volume_sources(volume))
        if not any(s[:2] in changed for s in sources):
            continue
        name = str(volume.get("name"))
        if any(rtype is ResourceType.SECRET for rtype, _, _ in sources):
            out[name] = inplace.CHANGED
            continue
        contents: list[bytes] = []
        for rtype, config, keys in sources:
            try:
                files = await rs.writer.config_files(rtype, namespace, config)
            except errors.NotFound:
                continue
            contents += [v for k, v in sorted(files.items()) if keys is None or k in keys]
            del files
        out[name] = inplace.files_digest(contents)
    return out


def _volumes(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [v for v in spec.get("volumes") or () if isinstance(v, dict)]


def volume_sources(
    volume: Mapping[str, Any],
) -> list[tuple[ResourceType, str, frozenset[str] | None]]:
    """(type, name, keys its items select or None) of each ConfigMap or Secret a volume
    projects (a plain configMap/secret volume, or a projected one's sources)."""
    out: list[tuple[ResourceType, str, frozenset[str] | None]] = []
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for kind in ("configMap", "secret"):
        if isinstance(volume.get(kind), dict):
            entries.append((kind, volume[kind]))
    for source in (volume.get("projected") or {}).get("sources") or ():
        for kind in ("configMap", "secret"):
            if isinstance(source, dict) and isinstance(source.get(kind), dict):
                entries.append((kind, source[kind]))
    for kind, src in entries:
        name = src.get("name") if kind == "configMap" else src.get("secretName", src.get("name"))
        if not isinstance(name, str):
            continue
        items = src.get("items")
        keys = (
            frozenset(str(i.get("key")) for i in items if isinstance(i, dict))
            if isinstance(items, list) and items
            else None
        )
        rtype = ResourceType.CONFIGMAP if kind == "configMap" else ResourceType.SECRET
        out.append((rtype, name, keys))
    return out
