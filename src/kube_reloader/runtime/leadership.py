"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

The lock is Reloader's: v1's `stakater-reloader-lock`, or with `--compat=v2` v2's
`reloader-leader-election` (either renamed by `--leader-election-id`), in `POD_NAMESPACE` (or
`--leader-election-namespace`), so kube-reloader and Reloader replicas of the same major version
never lead at the same time during a migration. The identity is `POD_NAME`, or with
`--compat=v2` `<hostname>_<uuid>` as Reloader v2 (through controller-runtime) campaigns; no
elector compares identities other than its own, so the two share one Lease. The record is
client-go's (`holderIdentity`, `leaseDurationSeconds` truncated to whole seconds,
`acquireTime`, `renewTime`, `leaseTransitions`, MicroTime stamps), and so is a release (empty
holder, 1 s duration, acquire and renew time now).

Two rules keep two replicas from leading at once, whatever their clocks say:

* **Expiry is judged by local observation.** A replica remembers the record it last read and
  the local monotonic time at which it saw that record change. Another holder's lease expires,
  for this replica, only once it has seen no change for `leaseDurationSeconds` of its own time.
  The `renewTime` written by another machine is never compared with the local clock, so a
  skewed clock cannot make a live lease look expired (as in client-go's leaderelection).
* **A leader holds its lease only for the renew deadline.** Every renew attempt runs under a
  timeout that ends at `last successful renew + renew deadline`, so a hung connection cannot
  outlive it; when that instant passes without a renew, the leader stops writing in that same
  step (`on_stopped_leading`, before anything else) and sets `lost`. The deadline is counted
  from the start of the last successful renew: the standby observed that renew no earlier, and
  the lease duration is longer than the renew deadline, so the leader has stopped before any
  standby can see the lease expire. (client-go counts it from the start of each renew round, up
  to a retry period later; this is stricter.)

On shutdown the leader releases the lease, so a standby takes over at its next retry instead of
waiting for the lease to expire (`--leader-election-release-on-cancel=false`: it only stops
writing, and the lease expires).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from collections.abc import Awaitable, Callable
from enum import StrEnum
from typing import Protocol

import msgspec

from kube_reloader.kube import errors
from kube_reloader.kube.leases import LeaseRecord

log = logging.getLogger(__name__)
LOCK_NAME = "stakater-reloader-lock"
#: Reloader v2's default `--leader-election-id`
V2_LOCK_NAME = "reloader-leader-election"
JITTER = 1.2


class Timing(msgspec.Struct, frozen=True):
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problems(self) -> list[str]:
        """client-go's validation rules, as messages naming the flags."""
        out = []
        if self.lease_duration <= 0 or self.renew_deadline <= 0 or self.retry_period <= 0:
            out.append("leader election durations must be positive")
        # the Lease records whole seconds (client-go truncates): that is what others wait for
        if int(self.lease_duration) <= self.renew_deadline:
            out.append(
                "--leader-election-lease-duration must be greater than "
                "--leader-election-renew-deadline"
            )
        if self.renew_deadline <= JITTER * self.retry_period:
            out.append(
                "--leader-election-renew-deadline must be greater than 1.2 x "
                "--leader-election-retry-period"
            )
        return out


class HASettings(msgspec.Struct, frozen=True):
    """`--enable-ha`: who this replica is (`POD_NAME`), where the lock lives
    (`--leader-election-namespace`, else `POD_NAMESPACE`; `--leader-election-id`), the
    election's timing, and whether the lease is given up on shutdown."""

    identity: str
    namespace: str
    timing: Timing
    lock_name: str = LOCK_NAME
    release_on_cancel: bool = True


class LeaseStore(Protocol):
    """Where the record lives (`kube.leases.LeaseLock` against the API server)."""

    async def get(self) -> LeaseRecord | None: ...

    async def create(self, record: LeaseRecord) -> LeaseRecord: ...

    async def update(self, record: LeaseRecord) -> LeaseRecord: ...


# ---------------------------------------------------------------------- pure decisions


class Observation(msgspec.Struct, frozen=True):
    """The record this replica last read, and the local time at which it saw it change."""

    record: LeaseRecord
    at: float


def observe(previous: Observation | None, record: LeaseRecord, now: float) -> Observation:
    """Remember `record`; its observation time moves only when the record changed."""
    if previous is not None and previous.record.same_record(record):
        return Observation(record, previous.at)
    return Observation(record, now)


def expired(observation: Observation, now: float) -> bool:
    """True once the record has stayed unchanged for its lease duration of local time."""
    return observation.at + observation.record.duration_seconds < now


class Verdict(StrEnum):
    RENEW = "renew"  # the record names us
    TAKE = "take"  # free (released) or expired by our own observation
    WAIT = "wait"  # another holder, still valid as far as we have seen


def judge(observation: Observation, identity: str, now: float) -> Verdict:
    holder = observation.record.holder
    if holder == identity:
        return Verdict.RENEW
    if not holder or expired(observation, now):
        return Verdict.TAKE
    return Verdict.WAIT


def claim(
    current: LeaseRecord | None, identity: str, duration: int, when: dt.datetime
) -> LeaseRecord:
    """The record to write to acquire or renew `current` (None: the Lease does not exist)."""
    if current is None:
        return LeaseRecord(identity, duration, when, when, 0)
    mine = current.holder == identity
    return LeaseRecord(
        holder=identity,
        duration_seconds=duration,
        acquire_time=current.acquire_time if mine else when,
        renew_time=when,
        transitions=current.transitions if mine else current.transitions + 1,
        resource_version=current.resource_version,
    )


class Outcome(StrEnum):
    HELD = "held"  # we hold the lease now
    BUSY = "busy"  # another replica holds it, or it changed under us
    DEPOSED = "deposed"  # we led, and the record names another holder (or none)


# ---------------------------------------------------------------------- the elector


def _ignore() -> None:
    return None


class LeaderElector:
    """Acquires the lease, then renews it until it is lost (sets `lost`) or cancelled.

    `clock` is a local monotonic clock (seconds) and judges expiry and deadlines, `sleep` waits
    on it; `wall_clock` only stamps the acquire and renew times written into the Lease.
    `on_started_leading` / `on_stopped_leading` run synchronously, in the very step the
    elector decides, so whoever writes can start or stop with no await in between.
    """

    def __init__(
        self,
        store: LeaseStore,
        *,
        identity: str,
        clock: Callable[[], float],
        wall_clock: Callable[[], dt.datetime],
        timing: Timing | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        on_started_leading: Callable[[], None] = _ignore,
        on_stopped_leading: Callable[[], None] = _ignore,
        release_on_cancel: bool = True,
    ) -> None:
        self.store = store
        self.release_on_cancel = release_on_cancel
        self.identity = identity
        self.timing = timing or Timing()
        self.clock = clock
        self.wall_clock = wall_clock
        self.sleep = sleep
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self.observed: Observation | None = None
        #: local time at which the last successful acquire or renew started
        self.renewed_at = 0.0
        #: a write of the lease was sent and its answer never read (cancelled or timed out):
        #: the server may have made us the holder without our knowing it
        self.unanswered_write = False

    @property
    def duration(self) -> int:
        """`leaseDurationSeconds` as client-go writes it: whole seconds, truncated."""
        return max(1, int(self.timing.lease_duration))

    async def try_acquire_or_renew(self) -> Outcome:
        """One attempt, as client-go's tryAcquireOrRenew: read, judge, write if ours to take."""
        current = await self.store.get()
        if current is None:
            if self.leading.is_set():
                self.observed = None  # deleted under us: a standby may create it right away
                return Outcome.DEPOSED
            record = claim(None, self.identity, self.duration, self.wall_clock())
            self.unanswered_write = True
            try:
                written = await self.store.create(record)
            except (errors.AlreadyExists, errors.Conflict):
                self.unanswered_write = False
                return Outcome.BUSY
            self.unanswered_write = False
            self.observed = Observation(written, self.clock())
            return Outcome.HELD
        self.observed = observe(self.observed, current, self.clock())
        verdict = judge(self.observed, self.identity, self.clock())
        if self.leading.is_set() and verdict is not Verdict.RENEW:
            return Outcome.DEPOSED
        if verdict is Verdict.WAIT:
            return Outcome.BUSY
        record = claim(current, self.identity, self.duration, self.wall_clock())
        self.unanswered_write = True
        try:
            written = await self.store.update(record)
        except errors.Conflict:
            self.unanswered_write = False
            return Outcome.BUSY
        self.unanswered_write = False
        self.observed = Observation(written, self.clock())
        return Outcome.HELD

    async def _attempt(self, budget: float) -> tuple[Outcome, str]:
        """One attempt, abandoned after `budget` seconds (a hung connection included); the
        text says why an attempt failed, empty when it did not fail."""
        try:
            async with asyncio.timeout(budget):
                return await self.try_acquire_or_renew(), ""
        except TimeoutError:
            return Outcome.BUSY, f"no answer within {budget:.1f}s"
        except errors.KubeError as exc:
            return Outcome.BUSY, str(exc)

    async def run(self) -> None:
        """Acquire, then renew until the lease is lost (sets `lost`) or the task is cancelled."""
        await self._acquire()
        await self._renew()

    async def _acquire(self) -> None:
        t = self.timing
        while True:
            started = self.clock()
            outcome, failure = await self._attempt(t.renew_deadline)
            if outcome is Outcome.HELD:
                self.renewed_at = started
                self.leading.set()
                self.on_started_leading()
                log.info("became leader", extra={"identity": self.identity})
                return
            if failure:
                log.warning("leader election attempt failed", extra={"error": failure})
            await self.sleep(t.retry_period * random.uniform(1.0, JITTER))  # noqa: S311

    async def _renew(self) -> None:
        """Renew every retry period; retry failed renews until the renew deadline."""
        t = self.timing
        while True:
            await self.sleep(t.retry_period)
            while True:
                started = self.clock()
                remaining = self.renewed_at + t.renew_deadline - started
                if remaining <= 0:
                    self._step_down("no successful renew within the renew deadline")
                    return
                outcome, failure = await self._attempt(remaining)
                if outcome is Outcome.HELD:
                    self.renewed_at = started
                    break
                if outcome is Outcome.DEPOSED:
                    holder = self.observed.record.holder if self.observed else ""
                    self._step_down(f"the lease now names {holder!r}")
                    return
                log.warning("could not renew the lease", extra={"error": failure or "conflict"})
                remaining = self.renewed_at + t.renew_deadline - self.clock()
                await self.sleep(max(0.0, min(t.retry_period, remaining)))

    def _step_down(self, reason: str) -> None:
        """Stop writing first, then say so."""
        self.leading.clear()
        self.on_stopped_leading()
        log.error("lost leadership", extra={"identity": self.identity, "reason": reason})
        self.lost.set()

    async def release(self) -> None:
        """Stop writing, then give the lease up (if still ours) so a standby takes over at once;
        without `release_on_cancel` only stop writing (the lease expires).

        A replica stopped while its acquiring write was unanswered (cancelled, or timed out)
        may hold the lease without knowing it: it reads the lease and frees it if it does."""
        was_leading = self.leading.is_set()
        if was_leading:
            self.leading.clear()
            self.on_stopped_leading()
        if not self.release_on_cancel:
            if was_leading:
                log.info(
                    "stopped leading; the lease is left to expire",
                    extra={"identity": self.identity},
                )
            return
        if not (was_leading or (self.unanswered_write and not self.lost.is_set())):
            return
        now = self.wall_clock()
        try:
            async with asyncio.timeout(self.timing.renew_deadline):
                current = await self.store.get()
                if current is None or current.holder != self.identity:
                    return
                freed = LeaseRecord(
                    holder="",
                    duration_seconds=1,
                    acquire_time=now,
                    renew_time=now,
                    transitions=current.transitions,
                    resource_version=current.resource_version,
                )
                await self.store.update(freed)
        except (errors.KubeError, TimeoutError) as exc:
            log.warning("could not release the lease", extra={"error": str(exc) or "timeout"})
            return
        log.info("released leadership", extra={"identity": self.identity})
