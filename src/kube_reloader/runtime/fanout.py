"""From a change to the workloads it reloads: one decision per candidate (a failure costs that
workload a Warning, nothing else), then the reloads go to the coalescer. In webhook mode
nothing is reloaded: every change of a watched ConfigMap, Secret or CSI pod status is one
notification (Reloader v1's POST), whatever the workloads and annotations say; with
`--compat=v2`, as Reloader v2, only a change some workload matches is, naming those
workloads."""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
from dataclasses import dataclass, field

from kube_reloader.core import alerting, planning, strategies
from kube_reloader.core.annotations import shadowed_template_keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.parsing import quote
from kube_reloader.core.planning import Change, Outcome
from kube_reloader.edges.alerts import WebhookNotifier
from kube_reloader.runtime.clock import Clock, Pacer
from kube_reloader.runtime.coalescing import Coalescer
from kube_reloader.runtime.counting import ChangeReports, QueueReports, WebhookReports
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reloadreports import ReloadReports
from kube_reloader.runtime.reporting import ProblemReports
from kube_reloader.runtime.stores import Listing, Stores

#: seconds of decisions a fan-out makes before it lets other tasks run
FAN_OUT_SLICE = 0.005
#: the kinds Reloader v1 lists on each change (its `workloads_scanned_total` series)
V1_LISTED = frozenset(
    {
        WorkloadKind.DEPLOYMENT,
        WorkloadKind.CRONJOB,
        WorkloadKind.JOB,
        WorkloadKind.DAEMONSET,
        WorkloadKind.STATEFULSET,
    }
)
#: the kinds Reloader v2 lists on each change, when watched (never a `--workload-kind`)
V2_LISTED = V1_LISTED | {WorkloadKind.ROLLOUT, WorkloadKind.DEPLOYMENTCONFIG}
#: changes remembered for an optional kind still listing (the oldest are dropped past it)
MAX_REPLAY = 10_000

#: a queued notification: the change and the body to POST for it
Webhook = WebhookNotifier[tuple[Change, bytes]]


@dataclass
class Remembered:
    """A change fanned out while an optional kind was still listing: when it was observed,
    and the optional reflectors whose workloads have been given it (listed by then)."""

    change: Change
    observed: float
    given: frozenset[Listing]


@dataclass(eq=False, repr=False)  # state, not a value: compared by identity
class FanOut:
    options: Options
    clock: Clock
    stores: Stores
    coalescer: Coalescer
    fence: Fence
    changes: ChangeReports
    queue: QueueReports
    reloads: ReloadReports
    webhook_reports: WebhookReports
    problems: ProblemReports
    #: webhook mode (`--webhook-url`): every change is one notification, nothing is decided
    webhook: Webhook | None
    #: changes fanned out while an optional kind was still listing (see `replay`)
    _replay: dict[tuple[str, ResourceType, str], Remembered] = field(
        default_factory=dict, init=False
    )

    @functools.cached_property
    def _v1_listed(self) -> tuple[str, ...]:
        """The kinds Reloader v1 lists for each change, of those watched (Rollouts with
        `--is-Argo-Rollouts`; never a `--workload-kind` of ours)."""
        o = self.options
        kinds = [k for k in o.workload_kinds if k in V1_LISTED]
        return (*kinds, *((WorkloadKind.ROLLOUT,) if o.argo_rollouts else ()))

    async def fan_out(self, change: Change, observed: float) -> None:
        """Decide for every candidate workload and queue the reloads (the change is then
        processed); in webhook mode, queue its notification (the leader's only). Under v2
        this is a reconcile of the change (its send's, in webhook mode)."""
        started, matched, result = self.clock.monotonic(), 0, "error"
        try:
            if self.options.plan.compat is strategies.Compat.V2:
                listed = self.stores.index.kinds_in(change.namespace)
                self.reloads.listed_v2({k: n for k, n in listed.items() if k in V2_LISTED})
            if self.webhook is not None:
                matched, queued = self._notify(change)
                result = "" if queued else "success"  # a queued one: counted at its send
            else:
                self._remember_for_optional(change, observed)
                self.reloads.listed(self._v1_listed)
                matched = await self._decide_all(change, observed)
                self.changes.processed(change, "success")
                result = "success"
        except asyncio.CancelledError:
            result = ""  # stopped, not failed
            raise
        finally:
            if result:
                seconds = self.clock.monotonic() - started
                crashed = result == "error"
                self.changes.fanned_out(
                    change, seconds, matched=matched, result=result, crashed=crashed
                )

    def _notify(self, change: Change) -> tuple[int, bool]:
        """Webhook mode: queue `change`'s notification; how many workloads it names (1 for
        v1's body, which names none), and whether it was queued."""
        assert self.webhook is not None
        body = alerting.WEBHOOK_BODY
        if self.options.plan.compat is strategies.Compat.V2:
            body = self._v2_body(change)  # v2: only when some workload matches, naming them
        queued = bool(body) and self.fence.may_write()
        if queued:
            dropped = self.webhook.enqueue((change, body))
            if dropped is not None:
                self.webhook_reports.webhook_dropped(dropped[0])
        return (1 if body else 0), queued

    async def _decide_all(
        self, change: Change, observed: float, only: frozenset[Listing] | None = None
    ) -> int:
        """The loop yields to the other tasks every few milliseconds, so a change with
        thousands of candidates (or a tenant's many distinct named lists to compile) slows
        its own fan-out, not the probes, watches and writes of everyone else. With `only`,
        just the workloads of those (kind, namespace or None for all) are decided. Returns
        how many Reloader v2 would decide on (`ReloadReports.decided`)."""
        now, decided = int(self.clock.wall()), 0
        matched: list[tuple[ObjectKey, float]] = []
        pacer = Pacer(self.clock, FAN_OUT_SLICE)
        for candidate in self.stores.index.candidates(change.namespace, change.rtype, change.name):
            await pacer.step()
            if (
                only is not None
                and not {(candidate.kind, None), (candidate.kind, candidate.namespace)} & only
            ):
                continue
            try:
                window, v2_decision = self._decide(change, candidate, now)
                decided += v2_decision
                if window is not None:
                    matched.append((candidate.key, window))
            except Exception as exc:  # noqa: BLE001 - one decision never stops the others
                self.problems.object_failed("decision", candidate.key, exc)
                self.problems.warn_once(
                    candidate,
                    (f"kube-reloader could not decide on this workload: {type(exc).__name__}",),
                    "ReloadError",
                )
        for key, window in matched:
            if self.coalescer.add(key, change, observed, window):
                self.queue.coalesced()
        return decided

    def _decide(
        self, change: Change, candidate: planning.Workload, now: int
    ) -> tuple[float | None, bool]:
        """Plan `change` for one workload: how long its reload waits for more, or None when
        it does not reload; and whether Reloader v2 would count it matched."""
        workload = self.stores.resolve(candidate)
        opts = self.options
        p = planning.plan(change=change, workload=workload, config=opts.plan, now=now)
        self.problems.warn_once(workload, p.decision.warnings)
        v2_decision = self.reloads.decided(workload, change, p)
        if p.outcome is not Outcome.RELOAD:
            return None, v2_decision
        # with the admission webhook on, where it would have written this very hash: the
        # grace in which an apply's own write of the workload (one rollout) lands first
        if opts.admission_grace and _webhook_would_write(p, workload, opts):
            return max(opts.coalesce_window, opts.admission_grace), v2_decision
        return opts.coalesce_window, v2_decision

    def _remember_for_optional(self, change: Change, observed: float) -> None:
        """While an optional kind has not finished its list, keep the changes fanned out
        (the latest per resource, bounded) to replay them to its workloads."""
        if self.stores.optional_synced():
            return
        key = (change.namespace, change.rtype, change.name)
        earlier = self._replay.pop(key, None)
        if earlier is not None:  # seen from before the first, observed at the first
            change, observed = change.since(earlier.change), earlier.observed
        self._replay[key] = Remembered(change, observed, self.stores.optional_listed())
        if len(self._replay) > MAX_REPLAY:
            del self._replay[next(iter(self._replay))]

    async def replay(self) -> None:
        """An optional kind finished its list: give its workloads the changes fanned out
        before they were indexed. Only the workloads of the reflectors that have listed since
        a change was fanned out (or last replayed) are decided for it, so every other
        workload's decision is made (and counted) once per change; re-planning is
        level-based, so a workload that already carries a change is not reloaded twice."""
        listed = self.stores.optional_listed()
        if self.stores.optional_synced():
            replay, self._replay = self._replay, {}
        else:
            replay = dict(self._replay)
        for r in replay.values():  # nothing is kept in webhook mode
            only, r.given = listed - r.given, listed
            if only:
                await self._decide_all(r.change, r.observed, only)

    def _v2_body(self, change: Change) -> bytes:
        """Reloader v2's webhook body naming the workloads `change` matches; b"" when none
        does (v2 then sends nothing)."""
        now = int(self.clock.wall())
        found: list[tuple[str, str, str]] = []
        for candidate in self.stores.index.candidates(change.namespace, change.rtype, change.name):
            workload = self.stores.resolve(candidate)
            p = planning.plan(change=change, workload=workload, config=self.options.plan, now=now)
            matched = p.outcome in (Outcome.RELOAD, Outcome.UP_TO_DATE)
            if matched:
                self.reloads.matched(str(workload.kind))
                found.append((workload.kind, workload.name, workload.namespace))
        if not found:
            return b""
        stamp = dt.datetime.fromtimestamp(self.clock.wall(), dt.UTC).isoformat()
        return alerting.webhook_body_v2(
            rtype=change.rtype.value,
            namespace=change.namespace,
            name=change.name,
            hash=change.hash,
            timestamp=stamp.replace("+00:00", "Z"),
            workloads=found,
        )

    async def send_webhooks(self) -> None:
        """Webhook mode: one POST per queued change, in order (the queue is bounded: a
        hanging endpoint costs dropped notifications, counted, never memory)."""
        assert self.webhook is not None
        while True:
            change, body = await self.webhook.next()
            started = last = self.clock.monotonic()

            def retrying(error: str, change: Change = change) -> None:
                nonlocal last
                now = self.clock.monotonic()
                self.webhook_reports.webhook_retrying(change, error, now - last)
                last = now

            try:
                delivered = await self.webhook.notify(retrying, body)
                seconds = self.clock.monotonic() - started
                if delivered:
                    self.webhook_reports.webhook_sent(change, seconds)
                else:
                    self.webhook_reports.webhook_failed(change, seconds)
            except Exception as exc:  # noqa: BLE001 - one notification never stops the sender
                self.problems.object_failed("webhook", change, exc)

    def warn_shadowed(self, workload: planning.Workload) -> None:
        """One Warning per workload whose pod-template reload annotations can never be used."""
        shadowed = shadowed_template_keys(
            workload.annotations, workload.template.annotations, self.options.plan.match.keys
        )
        if shadowed:
            listed = ", ".join(f"{k}={quote(v)}" for k, v in sorted(shadowed.items()))
            self.problems.warn_once(
                workload,
                (
                    f"pod-template annotations {listed} are never used: the workload's own "
                    "metadata has a reload annotation for the same type; move them to the "
                    "workload's metadata",
                ),
            )


def _webhook_would_write(p: planning.Plan, workload: planning.Workload, opts: Options) -> bool:
    """`admitting.would_write`: its rules are imported only where the webhook is on."""
    from kube_reloader.core import admitting

    return admitting.would_write(p, workload, opts.plan, keys=opts.admission_keys)
