"""When a planned reload may be written: the fleet-safety rules, as pure decisions with reasons.

A reload that `planning` says must be written still waits when, in this order:

1. its namespace is frozen (`kube-reloader.io/freeze: "true"` on the namespace, or `--freeze`);
2. it is outside its maintenance window (`kube-reloader.io/reload-window` on the workload, else
   on its namespace), unless a changed ConfigMap/Secret says `kube-reloader.io/reload-urgent`;
3. the circuit breaker holds one of its resources: `--halt-after-failures` workloads failed
   their rollout with the very content it would write;
4. it is a Job with running pods and `kube-reloader.io/job-policy: after-completion`;
5. a workload it must follow (`kube-reloader.io/reload-after: KIND/NAME,...`) has not finished
   its rollout for the same change;
6. `--max-concurrent-rollouts` rollouts are in flight (it waits for a slot, in turn), or its
   namespace holds its share of the slots and only the reserve is left (`core.fairness`:
   alone, three quarters of them; an equal part while other namespaces hold or wait for
   some), so another namespace always finds one at once.

The controller, `kube-reloader impact` and the tests all call `decide`; every input is a
value, so the same facts give the same verdict.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping
from enum import StrEnum

from kube_reloader.core import annotations as a
from kube_reloader.core import fairness, windows
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey, WorkloadKind
from kube_reloader.core.records import record

#: at most this many workloads in one `reload-after` list
MAX_AFTER = 16
_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")
_KINDS = {k.value.lower(): k.value for k in WorkloadKind}


class Hold(StrEnum):
    """Why a reload waits (the `reason` label of `kube_reloader_deferred_total`)."""

    FROZEN = "frozen"
    WINDOW = "window"
    HALTED = "halted"
    JOB_RUNNING = "job-running"
    ORDER = "order"
    SLOTS = "slots"


class JobPolicy(StrEnum):
    RECREATE = "recreate"
    AFTER_COMPLETION = "after-completion"
    NEVER = "never"


@record
class Rules:
    """A workload's fleet-safety annotations (and its namespace's), parsed."""

    window: windows.Window | None = None
    #: where the window comes from: "workload", or "namespace"
    window_from: str = ""
    after: tuple[ObjectKey, ...] = ()
    job_policy: JobPolicy = JobPolicy.RECREATE
    #: why the workload is frozen ("--freeze", "namespace NAME"), or "" when it is not
    frozen: str = ""


def job_policy(annotations: Mapping[str, str]) -> tuple[JobPolicy, str | None]:
    """`kube-reloader.io/job-policy` (absent: recreate); an unreadable value: recreate, and
    a one-line warning."""
    raw = annotations.get(a.JOB_POLICY)
    if raw is None:
        return JobPolicy.RECREATE, None
    value = raw.strip().lower()
    for policy in JobPolicy:
        if value == policy.value:
            return policy, None
    return JobPolicy.RECREATE, (
        f"{a.JOB_POLICY}: {raw[:64]!r} is not recreate, after-completion or never; using recreate"
    )


@functools.lru_cache(maxsize=8192)
def parse_after(value: str, namespace: str, own: ObjectKey) -> tuple[tuple[ObjectKey, ...], str]:
    """`KIND/NAME[,KIND/NAME...]` (same namespace): the workloads to follow, or "" and a
    one-line error (an unreadable list follows nothing)."""
    if len(value) > 4096:
        return (), f"{a.RELOAD_AFTER} is {len(value)} characters long (at most 4096)"
    out: list[ObjectKey] = []
    for part in (p.strip() for p in value.split(",")):
        if not part:
            continue
        kind, sep, name = part.partition("/")
        canonical = _KINDS.get(kind.strip().lower())
        name = name.strip()
        if not sep or canonical is None:
            return (), f"{a.RELOAD_AFTER}: {part[:80]!r} is not KIND/NAME of a workload kind"
        if not _NAME.fullmatch(name):
            return (), f"{a.RELOAD_AFTER}: {name[:80]!r} is not an object name"
        key = ObjectKey(canonical, namespace, name)
        if key == own:
            return (), f"{a.RELOAD_AFTER}: a workload cannot follow itself"
        if key not in out:
            out.append(key)
    if len(out) > MAX_AFTER:
        return (), f"{a.RELOAD_AFTER} names {len(out)} workloads (at most {MAX_AFTER})"
    return tuple(out), ""


def says_true(raw: str | None) -> bool:
    return raw is not None and a.parse_bool(raw.strip()) is True


def rules_of(
    own: ObjectKey,
    workload_annotations: Mapping[str, str],
    namespace_annotations: Mapping[str, str],
    *,
    freeze: bool = False,
) -> tuple[Rules, list[str]]:
    """The rules in effect for one workload, and a warning per unreadable annotation (an
    unreadable one is ignored: a window that cannot be read never holds a reload forever)."""
    warnings: list[str] = []
    frozen = "--freeze" if freeze else ""
    if not frozen and says_true(namespace_annotations.get(a.FREEZE)):
        frozen = f"namespace {own.namespace}"
    window: windows.Window | None = None
    window_from = ""
    for source, values in (
        ("workload", workload_annotations),
        ("namespace", namespace_annotations),
    ):
        raw = values.get(a.RELOAD_WINDOW)
        if raw is None:
            continue
        parsed, error = windows.parse_window(raw)
        if parsed is None:
            warnings.append(f"{a.RELOAD_WINDOW} on the {source}: {error}; no window applies")
            break
        window, window_from = parsed, source
        break
    after: tuple[ObjectKey, ...] = ()
    raw_after = workload_annotations.get(a.RELOAD_AFTER)
    if raw_after is not None:
        after, error = parse_after(raw_after, own.namespace, own)
        if error:
            warnings.append(f"{error}; it follows no workload")
    policy = JobPolicy.RECREATE
    if traits(own.kind).job:
        policy, warning = job_policy(workload_annotations)
        if warning is not None:
            warnings.append(warning)
    return Rules(window, window_from, after, policy, frozen), warnings


def follows(
    start: ObjectKey, me: ObjectKey, annotations_of: Callable[[ObjectKey], Mapping[str, str] | None]
) -> bool:
    """Does `start` follow `me`, directly or through others (a cycle: that order is ignored)?
    `annotations_of` gives a workload's annotations, None when it does not exist; at most 256
    workloads are looked at."""
    seen: set[ObjectKey] = set()
    todo = [start]
    while todo and len(seen) < 256:
        k = todo.pop()
        if k in seen:
            continue
        seen.add(k)
        annotations = annotations_of(k)
        if annotations is None:
            continue
        after = rules_of(k, annotations, {})[0].after
        if me in after:
            return True
        todo.extend(after)
    return False


@record
class Facts:
    """What the controller knows when it decides (or what `impact` read from the cluster)."""

    now: float
    #: a changed resource says `kube-reloader.io/reload-urgent: "true"`
    urgent: bool = False
    #: resources whose content to write the circuit breaker holds ("Secret ns/name")
    halted: tuple[str, ...] = ()
    #: a Job's running pods
    job_active: int = 0
    #: the workloads to follow that have not finished their rollout for these changes
    waiting_on: tuple[ObjectKey, ...] = ()
    #: `--max-concurrent-rollouts` (0: no cap) and the rollouts in flight without this one
    cap: int = 0
    in_flight: int = 0
    #: workloads already waiting for a slot ahead of this one
    ahead: int = 0
    #: of `in_flight`, the rollouts of this workload's namespace
    namespace_in_flight: int = 0
    #: the slots its namespace may hold now (`core.fairness.share`; 0: no share rule)
    namespace_share: int = 0
    #: other namespaces holding or waiting for a slot
    other_namespaces: int = 0


@record
class Verdict:
    write: bool
    message: str
    hold: Hold | None = None
    #: epoch seconds when the hold ends by itself (a window opening); None: on an event
    until: float | None = None
    #: 1-based place in the slot queue (hold SLOTS)
    position: int = 0


@record
class Slots:
    """The slot facts of one workload (see `slots`)."""

    in_flight: int = 0
    namespace_in_flight: int = 0
    ahead: int = 0
    share: int = 0
    others: int = 0


def slots(
    key: ObjectKey,
    cap: int,
    in_flight: Iterable[ObjectKey],
    line: Iterable[ObjectKey],
    called: Collection[ObjectKey] = (),
) -> Slots:
    """The slot facts of `key`: rollouts in flight without it, how many of them are of its
    namespace, its namespace's share (`core.fairness`), and how many in `line` (first
    come, first served) are ahead of it: those of its namespace, and those of others that
    may take a slot (a namespace at its share may not). `called`: released from the line,
    about to take a slot (`key` among them is next)."""
    if cap <= 0:
        return Slots()  # no cap: nothing to count (every rollout in flight would be walked)
    line = list(line)
    holding = Counter(k.namespace for k in (*in_flight, *called) if k != key)
    wanting = {ns for ns, n in holding.items() if n} | {k.namespace for k in line}
    wanting.add(key.namespace)
    total = sum(holding.values())

    def may(namespace: str) -> bool:
        others = len(wanting) - (namespace in wanting)
        return fairness.may_take(cap, holding[namespace], total, others)

    ahead = 0
    if key not in called:
        for k in line:
            if k == key:
                break
            if k.namespace == key.namespace or may(k.namespace):
                ahead += 1
    others = len(wanting) - 1
    return Slots(total, holding[key.namespace], ahead, fairness.share(cap, others), others)


def next_in_line(
    cap: int, holding: Mapping[str, int], line: Iterable[ObjectKey]
) -> ObjectKey | None:
    """Whom a free slot goes to: of those in line whose namespace may take one
    (`core.fairness.may_take`), the first of the namespace holding the fewest; None: nobody
    may."""
    line = list(line)
    wanting = {ns for ns, n in holding.items() if n} | {k.namespace for k in line}
    total = sum(holding.values())
    best: ObjectKey | None = None
    for key in line:
        n = holding.get(key.namespace, 0)
        others = len(wanting) - (key.namespace in wanting)
        if not fairness.may_take(cap, n, total, others):
            continue
        if best is None or n < holding.get(best.namespace, 0):
            best = key
        if n == 0:
            break
    return best


def decide(rules: Rules, facts: Facts) -> Verdict:
    """Write now, or wait (and why, and until when)."""
    if rules.frozen:
        why = f"frozen ({rules.frozen}); applied once the freeze is lifted"
        return Verdict(False, why, Hold.FROZEN)
    w = rules.window
    if w is not None and not facts.urgent and not w.is_open(facts.now):
        opens = w.next_open(facts.now)
        when = "never (the schedule has no future time)" if opens is None else _utc(opens)
        why = (
            f"outside the maintenance window {w.source!r} of the {rules.window_from}; "
            f"applied when it opens: {when}"
        )
        return Verdict(False, why, Hold.WINDOW, opens)
    if facts.halted:
        why = (
            f"halted by the circuit breaker: {', '.join(facts.halted)} broke rollouts; "
            "the next change of its content resumes"
        )
        return Verdict(False, why, Hold.HALTED)
    if rules.job_policy is JobPolicy.AFTER_COMPLETION and facts.job_active > 0:
        why = (
            f"the Job has {facts.job_active} running pod(s) ({a.JOB_POLICY}: "
            "after-completion); re-created once it finishes"
        )
        return Verdict(False, why, Hold.JOB_RUNNING)
    if facts.waiting_on:
        names = ", ".join(f"{k.kind}/{k.name}" for k in facts.waiting_on)
        why = f"waiting for {names} to finish rolling out this change"
        return Verdict(False, why, Hold.ORDER)
    share = facts.namespace_share > 0 and not fairness.may_take(
        facts.cap, facts.namespace_in_flight, facts.in_flight, facts.other_namespaces
    )
    if facts.cap > 0 and (facts.ahead > 0 or facts.in_flight >= facts.cap or share):
        position = facts.ahead + 1
        if share and facts.in_flight < facts.cap:
            why = (
                f"its namespace holds {facts.namespace_in_flight} of the {facts.cap} rollout "
                f"slots, its share while {facts.other_namespaces} other namespace(s) hold or "
                "wait for some (--max-concurrent-rollouts)"
            )
        else:
            why = f"{facts.in_flight} of {facts.cap} rollouts in flight (--max-concurrent-rollouts)"
        in_line = f"{why}; number {position} in line for a slot"
        return Verdict(False, in_line, Hold.SLOTS, position=position)
    urgent = " (urgent: the maintenance window is bypassed)" if facts.urgent and w else ""
    return Verdict(True, f"written now{urgent}")


def _utc(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def urgent(resource_annotations: Mapping[str, str]) -> bool:
    return says_true(resource_annotations.get(a.RELOAD_URGENT))
