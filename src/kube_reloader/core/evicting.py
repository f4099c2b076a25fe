"""Pod-level reloads (`kube-reloader.io/strategy: evict`), as values: the annotations' parsers,
which pods a rotation replaces, and what it does next.

A rotation replaces, through the Eviction API, the pods that were running when a config
changed, instead of writing the workload's pod template. Its *targets* are fixed when it
starts (the UIDs of the pods created before the change) and are meant to be stored before the
first eviction, so that after a restart or a leader change the same decision follows from the
cluster alone: each target is evicted once, and a pod started after the change never.

`next_step` is the whole policy, one call per observation of the workload's pods:

* a pod is *available* once Ready for `min_ready_seconds` and not terminating; the workload
  is short of `replicas - available` pods;
* a target that is not Ready (crash-looping on the old content, say) serves nothing, so
  evicting it costs nothing: it is evicted at once;
* other targets are evicted while the workload is short of fewer than `max_unavailable`
  pods, the oldest first; ordered workloads (StatefulSets) evict one pod at a time, the
  highest ordinal first (a not-Ready one before any other), a Ready one only when none is
  short;
* done when no target is left and nothing this rotation evicted is still missing; failed
  when something is still short `deadline` seconds after the last eviction (a replacement
  never became available) or after the start (what is short never comes back, so nothing
  may be evicted).

Pure: no I/O and no clock; times are epoch seconds passed in.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from enum import StrEnum

from kube_reloader.core import inplace, kindtraits
from kube_reloader.core.annotations import MAX_UNAVAILABLE, POD_SELECTOR, POD_STRATEGY, SIGNAL
from kube_reloader.core.parsing import quote
from kube_reloader.core.records import record
from kube_reloader.core.selectors import SelectorError, validate

STRATEGY = POD_STRATEGY
#: the StatefulSet controller's pod label carrying the ordinal (Kubernetes 1.28+)
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
#: digits accepted in a max-unavailable count (a count above any real workload's size)
_MAX_DIGITS = 6
#: characters accepted in a pod-selector annotation
MAX_SELECTOR_TEXT = 1024
#: the built-in kinds whose pods a rotation can replace (their controllers re-create evicted
#: pods)
EVICTABLE_KINDS = kindtraits.EVICTABLE
#: a rotation looks at its pods every POLL_SECONDS while it makes progress, every
#: SLOW_POLL_SECONDS once nothing has moved for SLOW_AFTER seconds (a replacement that does
#: not start, a budget that refuses): a stuck rotation costs a LIST every few seconds
POLL_SECONDS, SLOW_POLL_SECONDS, SLOW_AFTER = 1.0, 5.0, 30.0


def poll_seconds(idle: float) -> float:
    """Seconds until a rotation's next look, `idle` seconds after its last progress."""
    return POLL_SECONDS if idle < SLOW_AFTER else SLOW_POLL_SECONDS


class EvictError(ValueError):
    """A one-line reason an annotation value is refused."""


class PodStrategy(StrEnum):
    """How a workload is reloaded: its pod template written, its pods evicted, or its pods
    reloaded in place (core/inplace.py)."""

    PATCH = "patch"
    EVICT = "evict"
    RESTART_IN_PLACE = "restart-in-place"
    SIGNAL = "signal"

    @property
    def pod_level(self) -> bool:
        """Whether the workload's pods are acted on instead of its template written."""
        return self is not PodStrategy.PATCH


def parse_strategy(text: str) -> PodStrategy:
    """One of `PodStrategy`, exactly (no case folding, no blanks: a typo must not pass)."""
    try:
        return PodStrategy(text)
    except ValueError:
        want = ", ".join(repr(s.value) for s in PodStrategy)
        raise EvictError(f"invalid {STRATEGY} {quote(text)}: want one of {want}") from None


@record
class MaxUnavailable:
    """A pod count (`2`) or a percentage of the replicas (`25%`)."""

    value: int
    percent: bool = False

    def resolve(self, replicas: int) -> int:
        """Pods that may be unavailable at once for `replicas`: a percentage rounds down, as
        a Deployment's `maxUnavailable` does, but never below 1 (a rotation must progress)."""
        if not self.percent:
            return self.value
        return max(1, replicas * self.value // 100)

    def __str__(self) -> str:
        return f"{self.value}%" if self.percent else str(self.value)


DEFAULT_MAX_UNAVAILABLE = MaxUnavailable(1)


def parse_max_unavailable(text: str) -> MaxUnavailable:
    """`N` (1 or more) or `P%` (1 to 100), digits only."""
    digits, percent = (text[:-1], True) if text.endswith("%") else (text, False)
    if not digits or len(digits) > _MAX_DIGITS or not digits.isascii() or not digits.isdigit():
        raise EvictError(f"invalid {MAX_UNAVAILABLE} {quote(text)}: want a count or a percentage")
    value = int(digits)
    if value < 1 or (percent and value > 100):
        raise EvictError(
            f"invalid {MAX_UNAVAILABLE} {quote(text)}: "
            + ("want 1% to 100%" if percent else "want at least 1")
        )
    return MaxUnavailable(value, percent)


@record
class PodPolicy:
    """How a workload is reloaded, read from its annotations."""

    strategy: PodStrategy = PodStrategy.PATCH
    max_unavailable: MaxUnavailable = DEFAULT_MAX_UNAVAILABLE
    #: `pod-selector`: the pods to replace, instead of the workload's own selector
    pod_selector: str | None = None
    #: the signal the `signal` strategy's agent sends
    signal: str = inplace.DEFAULT_SIGNAL


@record
class Mode:
    """How a workload is reloaded (`planning.mode_of`): its policy, or None when its
    annotations cannot be read (it is then not reloaded at all), and the warnings they
    earn."""

    policy: PodPolicy | None = PodPolicy()
    warnings: tuple[str, ...] = ()

    @property
    def pod_level(self) -> bool:
        """Its pods are acted on (evict, restart-in-place, signal): its template is not
        written."""
        return self.policy is not None and self.policy.strategy.pod_level


def policy_of(
    kind: str,
    annotations: Mapping[str, str],
    default: PodStrategy = PodStrategy.PATCH,
    *,
    evictable: bool | None = None,
) -> tuple[PodPolicy | None, tuple[str, ...]]:
    """The workload's policy and the warnings its annotations earn. None: do not reload at
    all — a value that cannot be read must not fall back to writing a template the user
    asked us not to write. A cluster-wide `evict` default leaves kinds whose pods cannot be
    replaced (Jobs, CronJobs, Argo Rollouts) on the template. `evictable`: whether the
    kind's pods can be replaced (default: the built-in kinds that can; the registry says so
    for `--workload-kind` ones)."""
    if evictable is None:
        evictable = kind in EVICTABLE_KINDS
    text = annotations.get(STRATEGY)
    if text is None:
        strategy = (
            PodStrategy.EVICT if default is PodStrategy.EVICT and evictable else (PodStrategy.PATCH)
        )
    else:
        try:
            strategy = parse_strategy(text)
        except EvictError as err:
            return None, (str(err),)
    if strategy is PodStrategy.PATCH:
        return PodPolicy(), ()
    if not evictable:
        return None, (f"{STRATEGY}: {strategy} is not supported for {kind}; not reloaded",)
    warnings: list[str] = []
    limit = DEFAULT_MAX_UNAVAILABLE
    if MAX_UNAVAILABLE in annotations:
        try:
            limit = parse_max_unavailable(annotations[MAX_UNAVAILABLE])
        except EvictError as err:
            warnings.append(f"{err}; using 1")
    selector = annotations.get(POD_SELECTOR)
    if selector is not None:
        try:
            if len(selector) > MAX_SELECTOR_TEXT or not selector.strip():
                raise SelectorError(f"want 1 to {MAX_SELECTOR_TEXT} characters")
            validate(selector)
        except SelectorError as err:
            return None, (f"invalid {POD_SELECTOR} {quote(selector)}: {err}",)
    sig = inplace.DEFAULT_SIGNAL
    if strategy is PodStrategy.SIGNAL and SIGNAL in annotations:
        try:
            sig = inplace.parse_signal(annotations[SIGNAL])
        except ValueError as err:
            return None, (str(err),)
    return PodPolicy(strategy, limit, selector, sig), tuple(warnings)


def ordinal_of(name: str, labels: dict[str, str] | None = None) -> int | None:
    """A StatefulSet pod's ordinal: its `pod-index` label, else its name's `-N` suffix."""
    text = (labels or {}).get(POD_INDEX_LABEL) or name.rpartition("-")[2]
    if not text or len(text) > 9 or not text.isascii() or not text.isdigit():
        return None
    return int(text)


@record
class Pod:
    """What a rotation needs of a pod."""

    uid: str
    name: str
    #: creationTimestamp, epoch seconds (the API gives whole seconds)
    created: float
    ready: bool = False
    #: when its Ready condition last turned True (epoch seconds), if known
    ready_since: float | None = None
    #: it has a deletionTimestamp (evicted, deleted, or being replaced)
    terminating: bool = False
    ordinal: int | None = None

    def available(self, now: float, min_ready_seconds: float) -> bool:
        if self.terminating or not self.ready:
            return False
        if min_ready_seconds <= 0:
            return True
        return self.ready_since is not None and now - self.ready_since >= min_ready_seconds


def targets(pods: Iterable[Pod], changed_at: float) -> frozenset[str]:
    """The UIDs a rotation for a change at `changed_at` replaces: the live pods created before
    it. Creation times have whole seconds, so a pod created in the change's own second counts
    as older: at worst one eviction too many, never a pod left on the old content."""
    cutoff = math.floor(changed_at) + 1
    return frozenset(p.uid for p in pods if not p.terminating and p.created < cutoff)


@record
class Rotation:
    """How one workload's pods may be replaced."""

    #: pods the workload should have (`spec.replicas`, a DaemonSet's desired number)
    replicas: int
    #: pods that may be short at once, already resolved (`MaxUnavailable.resolve`)
    max_unavailable: int = 1
    min_ready_seconds: float = 0.0
    #: one pod at a time, the highest ordinal first (StatefulSets)
    ordered: bool = False
    #: seconds after the last eviction by which nothing may be short any more
    deadline: float = 600.0


class Phase(StrEnum):
    EVICT = "evict"
    WAIT = "wait"
    DONE = "done"
    FAILED = "failed"


@record
class Step:
    phase: Phase
    #: pods to evict now, in this order
    evict: tuple[Pod, ...] = ()
    #: targets not evicted yet (these included)
    remaining: int = 0
    #: why it waits or failed, for an Event or a log line
    reason: str = ""


def next_step(
    pods: Iterable[Pod],
    target_uids: frozenset[str],
    rotation: Rotation,
    now: float,
    *,
    last_eviction: float | None = None,
    started: float | None = None,
    evicting: frozenset[str] = frozenset(),
) -> Step:
    """What to do now. `last_eviction`: when this rotation last evicted (None: not yet);
    `started`: when it began — the deadline runs from the later of the two; `evicting`: UIDs
    whose eviction was accepted but whose pod is not seen terminating yet (they count as
    gone)."""
    live = [p for p in pods if not p.terminating and p.uid not in evicting]
    remaining = [p for p in live if p.uid in target_uids]
    available = [p for p in live if p.available(now, rotation.min_ready_seconds)]
    short = max(0, rotation.replicas - len(available))
    marks = [t for t in (last_eviction, started) if t is not None]
    if short and marks and now - max(marks) > rotation.deadline:
        since = "the last eviction" if last_eviction is not None else "the rotation began"
        after = f"{rotation.deadline:g}s after {since}"
        reason = f"{short} of {rotation.replicas} pods not available {after}"
        return Step(Phase.FAILED, remaining=len(remaining), reason=reason)
    if not remaining:
        if short and last_eviction is not None:  # our replacements are not all there yet
            return Step(Phase.WAIT, reason=_short(short, rotation.replicas))
        return Step(Phase.DONE)  # nothing of ours is short: what is short is not our doing
    free = sorted((p for p in remaining if not p.ready), key=_by_ordinal)  # serves nothing
    if rotation.ordered:
        if free:  # a pod that is down anyway goes first, still one at a time
            return Step(Phase.EVICT, (free[0],), remaining=len(remaining))
        if short:
            reason = _short(short, rotation.replicas)
            return Step(Phase.WAIT, remaining=len(remaining), reason=reason)
        return Step(Phase.EVICT, (min(remaining, key=_by_ordinal),), remaining=len(remaining))
    serving = sorted((p for p in remaining if p.ready), key=lambda p: (p.created, p.name))
    budget = max(0, rotation.max_unavailable - short)
    chosen = tuple(sorted(free, key=lambda p: p.name)) + tuple(serving[:budget])
    if not chosen:
        return Step(Phase.WAIT, remaining=len(remaining), reason=_short(short, rotation.replicas))
    return Step(Phase.EVICT, chosen, remaining=len(remaining))


def _by_ordinal(p: Pod) -> tuple[int, str]:
    """The highest ordinal first (pods without one last), then by name."""
    return (1 if p.ordinal is None else -p.ordinal, p.name)


def _short(short: int, replicas: int) -> str:
    return f"waiting for {short} of {replicas} pods to be available"
