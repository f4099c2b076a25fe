"""The catch-up's look at the pods, before it rolls on time alone.

A workload that carries no hash for a resource is caught up when the resource's content was
written after the workload's pod template (`catchup.missed_while_away`). That is not proof
that its pods run old content: the workload may have been annotated for reload after the
resource last changed, or its pods re-created since (a drain, a delete, another controller's
restart). When time is the only evidence, this room reads the workload once (its selector)
and lists its pods by it (one targeted LIST, never a pod cache). When every live pod started
`MARGIN` seconds or more after the change, nothing runs old content: the content is recorded
here as current and nothing rolls. Anything it cannot tell (no live pod to look at, a kind
whose pods it cannot find, a selector it cannot read, a refused list, an API that keeps
failing) rolls, as before: a missed reload is worse than one rollout too many (and a
workload scaled to zero restarts no pod when it rolls).

The looks are shared fairly: at most `MAX_ACTIVE` run at once, taken round-robin across
namespaces, so a namespace with thousands of such workloads does not hold up another's.
A refused pod LIST (RBAC without `pods: list`, as Reloader's chart grants) is remembered:
one warning, and every later look rolls without asking again.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable

from kube_reloader.core import evicting, planning, selectors
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change
from kube_reloader.kube import errors
from kube_reloader.kube.pods import PodObject, owned
from kube_reloader.runtime.clock import Clock, sleep
from kube_reloader.runtime.counting import ChangeReports
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.podviews import view
from kube_reloader.runtime.reporting import ProblemReports, log
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.writing import Writer

#: workloads whose pods are looked at at once (each costs one GET and one LIST)
MAX_ACTIVE = 8
#: (workload, resource) pairs remembered as current, least recently checked dropped first
MAX_REMEMBERED = 100_000
#: a pod created less than this long after the change may still have been given the old
#: content (admission, the kubelet's cache, clocks a little apart): it counts as old
MARGIN = 5.0
#: a look whose API calls keep failing transiently is retried after these pauses, then rolls
RETRY_SECONDS = (1.0, 2.0, 4.0)

#: (workload, resource type, resource name)
Pair = tuple[ObjectKey, ResourceType, str]


class Suspect:
    """A change whose only evidence of being missed is time."""

    __slots__ = ("change", "changed_at", "why")

    def __init__(self, change: Change, changed_at: float, why: str) -> None:
        self.change = change
        self.changed_at = changed_at
        self.why = why


class Freshness:
    def __init__(
        self,
        clock: Clock,
        writer: Writer,
        fence: Fence,
        changes: ChangeReports,
        problems: ProblemReports,
        supervisor: Supervisor,
        queue: Callable[[ObjectKey, Change], None],
    ) -> None:
        self.clock = clock
        self.writer = writer
        self.fence = fence
        self.changes = changes
        self.problems = problems
        self.supervisor = supervisor
        #: catch the change up (the coalescer, after its window)
        self.queue = queue
        #: content (hash, write time) found current, by pair
        self._current: OrderedDict[Pair, tuple[str, float]] = OrderedDict()
        self._waiting: dict[str, deque[tuple[planning.Workload, list[Suspect]]]] = {}
        self._turns: deque[str] = deque()  # namespaces with looks waiting, in turn
        self._checking: set[ObjectKey] = set()
        self._workers = 0
        self._forbidden = False

    def current(self, key: ObjectKey, change: Change, changed_at: float) -> bool:
        """Whether this workload's pods were found to run this write of `change`'s content."""
        return self._current.get((key, change.rtype, change.name)) == (change.hash, changed_at)

    def check(self, workload: planning.Workload, suspects: list[Suspect]) -> bool:
        """Look at `workload`'s pods before catching `suspects` up; False when nothing is
        left to look at (each was found current before, or a look is already under way)."""
        left = [s for s in suspects if not self.current(workload.key, s.change, s.changed_at)]
        if not left or workload.key in self._checking:
            return False
        self._checking.add(workload.key)
        ns = workload.namespace
        if ns not in self._waiting:
            self._waiting[ns] = deque()
            self._turns.append(ns)
        self._waiting[ns].append((workload, left))
        if self._workers < MAX_ACTIVE:
            self._workers += 1
            self.supervisor.oneshot(f"freshness@{self._workers}", self._worker())
        return True

    @property
    def waiting(self) -> int:
        return sum(len(q) for q in self._waiting.values())

    def _next(self) -> tuple[planning.Workload, list[Suspect]] | None:
        """The next look, one namespace's turn at a time."""
        while self._turns:
            ns = self._turns.popleft()
            queue = self._waiting[ns]
            item = queue.popleft()
            if queue:
                self._turns.append(ns)
            else:
                del self._waiting[ns]
            return item
        return None

    async def _worker(self) -> None:
        try:
            while (item := self._next()) is not None:
                workload, suspects = item
                try:
                    await self._look(workload, suspects)
                except Exception as exc:  # noqa: BLE001 - one workload never stops the others
                    self.problems.object_failed("freshness", workload.key, exc)
                    for s in suspects:  # what it cannot tell rolls
                        self.queue(workload.key, s.change)
                finally:
                    self._checking.discard(workload.key)
        finally:
            self._workers -= 1

    async def _look(self, workload: planning.Workload, suspects: list[Suspect]) -> None:
        if not self.fence.may_write():
            return  # the next leader's catch-up looks again
        pods = await self._pods(workload)
        if not self.fence.may_write():
            return
        key = workload.key
        for s in suspects:
            if pods is not None and not evicting.targets(pods, s.changed_at + MARGIN):
                self._remember((key, s.change.rtype, s.change.name), (s.change.hash, s.changed_at))
                self.changes.log_change(
                    "its pods already run this content; nothing to roll",
                    s.change,
                    workload=str(key),
                    pods=len(pods),
                )
                continue
            self.changes.log_change(
                "reloading a change missed while not watching",
                s.change,
                workload=str(key),
                reason=s.why,
            )
            self.queue(key, s.change)

    async def _pods(self, workload: planning.Workload) -> tuple[evicting.Pod, ...] | None:
        """The workload's live pods, or None when they cannot be told (so it rolls)."""
        if not traits(workload.kind).long_running or self._forbidden:
            return None
        for pause in (*RETRY_SECONDS, None):
            try:
                return await self._list(workload)
            except errors.Transient as exc:
                if pause is None or not self.fence.may_write():
                    log.warning(
                        "cannot list the workload's pods; catching up without looking",
                        extra={"workload": str(workload.key), "error": str(exc)[:200]},
                    )
                    return None
                await self._sleep(pause)
            except errors.Forbidden as exc:
                self._forbidden = True
                log.warning(
                    "pods cannot be listed (grant pods: list); workloads changed while no "
                    "replica ran are rolled without looking at their pods",
                    extra={"error": str(exc)[:200]},
                )
                return None
            except (errors.KubeError, selectors.SelectorError) as exc:
                log.warning(
                    "cannot list the workload's pods; catching up without looking",
                    extra={"workload": str(workload.key), "error": str(exc)[:200]},
                )
                return None
        return None

    async def _list(self, workload: planning.Workload) -> tuple[evicting.Pod, ...] | None:
        obj = await self.writer.read(workload.key)
        spec = obj.get("spec")
        selector = selectors.from_label_selector(
            spec.get("selector") if isinstance(spec, dict) else None
        )
        listed = await self.writer.pods(workload.namespace, selector)
        uid = str((obj.get("metadata") or {}).get("uid") or workload.uid)
        mine = tuple(
            view(p)
            for p in listed
            if _running(p) and owned(p, workload.kind, workload.name, uid, None)
        )
        if not any(not p.terminating for p in mine):
            return None  # no live pod: not evidence of anything
        return mine

    async def _sleep(self, seconds: float) -> None:
        await sleep(self.clock, seconds)

    def _remember(self, pair: Pair, content: tuple[str, float]) -> None:
        self._current[pair] = content
        self._current.move_to_end(pair)
        while len(self._current) > MAX_REMEMBERED:
            self._current.popitem(last=False)


def _running(pod: PodObject) -> bool:
    """A pod that has not ended (a Failed or Succeeded pod runs nothing: an evicted pod left
    behind until garbage collection is not a pod on old content)."""
    return pod.status.phase not in ("Failed", "Succeeded")
