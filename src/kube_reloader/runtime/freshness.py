"""The catch-up's look at the pods, before it rolls on time alone.

A workload that carries no hash for a resource is caught up when the resource's content was
written after the workload's pod template (`planning.missed_while_away`). That is not proof
that its pods run old content: the workload may have been annotated for reload after the
resource last changed, or its pods re-created since (a drain, a delete, another controller's
restart). When time is the only evidence, this room reads the workload once (its selector)
and lists its pods by it (one targeted LIST, never a pod cache). When every pod started after
the change, nothing runs old content: the hash is recorded here as current and nothing rolls.
Anything it cannot tell (no live pod to look at, a kind whose pods it cannot find, a selector
it cannot read, a refused or failed list) rolls, as before: a missed reload is worse than one
rollout too many (and a workload scaled to zero restarts no pod when it rolls).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

from kube_reloader.core import evicting, planning, selectors
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Change
from kube_reloader.kube import errors
from kube_reloader.kube.pods import OWNED_KINDS, owned, view
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.reporting import Reporter, log
from kube_reloader.runtime.supervisor import Supervisor
from kube_reloader.runtime.writing import Writer

#: workloads whose pods are looked at at once (each costs one GET and one LIST)
MAX_ACTIVE = 8
#: (workload, resource) pairs remembered as current, least recently checked dropped first
MAX_REMEMBERED = 100_000

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
        self, writer: Writer, fence: Fence, reporter: Reporter, supervisor: Supervisor,
        queue: Callable[[ObjectKey, Change], None],
    ) -> None:  # fmt: skip
        self.writer = writer
        self.fence = fence
        self.reporter = reporter
        self.supervisor = supervisor
        #: catch the change up (the coalescer, after its window)
        self.queue = queue
        self._current: OrderedDict[Pair, str] = OrderedDict()
        self._checking: set[ObjectKey] = set()
        self._active = asyncio.Semaphore(MAX_ACTIVE)

    def current(self, key: ObjectKey, change: Change) -> bool:
        """Whether this workload's pods were found to run `change`'s content already."""
        return self._current.get((key, change.rtype, change.name)) == change.hash

    def check(self, workload: planning.Workload, suspects: list[Suspect]) -> bool:
        """Look at `workload`'s pods before catching `suspects` up; False when nothing is
        left to look at (each was found current before, or a look is already under way)."""
        left = [s for s in suspects if not self.current(workload.key, s.change)]
        if not left or workload.key in self._checking:
            return False
        self._checking.add(workload.key)
        self.supervisor.oneshot(f"freshness/{workload.key}", self._run(workload, left))
        return True

    async def _run(self, workload: planning.Workload, suspects: list[Suspect]) -> None:
        key = workload.key
        try:
            async with self._active:
                pods = await self._pods(workload)
            if not self.fence.may_write():
                return  # the next leader's catch-up looks again
            for s in suspects:
                if pods is not None and not evicting.targets(pods, s.changed_at):
                    self._remember((key, s.change.rtype, s.change.name), s.change.hash)
                    self.reporter.log_change(
                        "its pods already run this content; nothing to roll", s.change,
                        workload=str(key), pods=len(pods),
                    )  # fmt: skip
                    continue
                self.reporter.log_change(
                    "reloading a change missed while not watching", s.change,
                    workload=str(key), reason=s.why,
                )  # fmt: skip
                self.queue(key, s.change)
        finally:
            self._checking.discard(key)

    async def _pods(self, workload: planning.Workload) -> tuple[evicting.Pod, ...] | None:
        """The workload's live pods, or None when they cannot be told (so it rolls)."""
        if workload.kind not in OWNED_KINDS:
            return None
        try:
            obj = await self.writer.read(workload.key)
            spec = obj.get("spec")
            spec = spec if isinstance(spec, dict) else {}
            selector = selectors.from_label_selector(spec.get("selector"))
            listed = await self.writer.pods(workload.namespace, selector)
        except errors.NotFound:
            return None
        except (errors.KubeError, selectors.SelectorError) as exc:
            log.warning(
                "cannot list the workload's pods; catching up without looking",
                extra={"workload": str(workload.key), "error": str(exc)[:200]},
            )  # fmt: skip
            return None
        uid = str((obj.get("metadata") or {}).get("uid") or workload.uid)
        mine = tuple(view(p) for p in listed if owned(p, workload.kind, workload.name, uid, None))
        if not any(not p.terminating for p in mine):
            return None  # no live pod: not evidence of anything
        return mine

    def _remember(self, pair: Pair, content: str) -> None:
        self._current[pair] = content
        self._current.move_to_end(pair)
        while len(self._current) > MAX_REMEMBERED:
            self._current.popitem(last=False)
