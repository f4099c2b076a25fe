"""Leader election logic, on a fake clock and a fake lease store: expiry is judged by the local
observation of a change (never by another machine's renewTime), and a leader that cannot renew
within the renew deadline stops writing before it says it lost the lease."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from kube_reloader.kube import errors
from kube_reloader.kube.leases import LeaseRecord
from kube_reloader.runtime.leadership import (
    LeaderElector,
    Observation,
    Outcome,
    Timing,
    Verdict,
    claim,
    expired,
    judge,
    observe,
)

T0 = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)
TIMING = Timing(lease_duration=4, renew_deadline=3, retry_period=0.5)


def rec(holder: str = "other", renew_offset: float = 0.0, rv: str = "1", **kw: Any) -> LeaseRecord:
    fields: dict[str, Any] = {
        "holder": holder,
        "duration_seconds": 4,
        "acquire_time": T0,
        "renew_time": T0 + dt.timedelta(seconds=renew_offset),
        "transitions": 3,
        "resource_version": rv,
    }
    fields.update(kw)
    return LeaseRecord(**fields)


class FakeClock:
    """Local monotonic time that moves only when the code under test sleeps or a store call
    says it took time."""

    def __init__(self) -> None:
        self.now = 100.0
        self.alarms: list[tuple[float, asyncio.Event]] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        for at, alarm in self.alarms:
            if at <= self.now:
                alarm.set()
        await asyncio.sleep(0)

    async def reached(self, at: float) -> None:
        alarm = asyncio.Event()
        self.alarms.append((at, alarm))
        await asyncio.wait_for(alarm.wait(), 5)


class FakeStore:
    """One Lease in memory with optimistic concurrency; `script` can make calls fail or hang."""

    def __init__(self, clock: FakeClock, record: LeaseRecord | None = None) -> None:
        self.clock = clock
        self.record = record
        self.version = 1
        self.latency = 0.125  # a power of two: the fake times below add up exactly
        #: called before each call with its name; may raise, or return an awaitable to wait on
        self.script: Callable[[str], Any] = lambda call: None
        self.calls: list[tuple[float, str]] = []

    async def _enter(self, call: str) -> None:
        self.calls.append((self.clock.now, call))
        self.clock.now += self.latency
        hang = self.script(call)
        if hang is not None:
            await hang

    def _stored(self, record: LeaseRecord) -> LeaseRecord:
        self.version += 1
        self.record = msgspec.structs.replace(record, resource_version=str(self.version))
        return self.record

    async def get(self) -> LeaseRecord | None:
        await self._enter("get")
        return self.record

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        await self._enter("create")
        if self.record is not None:
            raise errors.AlreadyExists(409, "exists", reason="AlreadyExists")
        return self._stored(record)

    async def update(self, record: LeaseRecord) -> LeaseRecord:
        await self._enter("update")
        assert self.record is not None
        if record.resource_version != self.record.resource_version:
            raise errors.Conflict(409, "changed", reason="Conflict")
        return self._stored(record)

    def renew_by(self, holder: str, renew_offset: float) -> None:
        """Another replica renews: same holder, a new renewTime (from its own clock)."""
        assert self.record is not None
        self._stored(rec(holder, renew_offset))


def elector(store: FakeStore, clock: FakeClock, identity: str = "me", wall_skew: float = 0.0,
            **kw: Any) -> LeaderElector:  # fmt: skip
    wall = lambda: T0 + dt.timedelta(seconds=clock.now - 100.0 + wall_skew)  # noqa: E731
    return LeaderElector(store, identity=identity, clock=clock, wall_clock=wall, timing=TIMING,
                         sleep=clock.sleep, **kw)  # fmt: skip


# ---------------------------------------------------------------------- pure decisions


@pytest.mark.parametrize(
    ("before", "after", "moves"),
    [
        (None, rec(), True),
        (rec(), rec(rv="2"), False),  # a new resourceVersion alone is no renew
        (rec(), rec(renew_offset=2), True),
        (rec(), rec(holder="third"), True),
        (rec(), rec(transitions=4), True),
        (rec(), rec(duration_seconds=15), True),
    ],
    ids=["first-sight", "same-record", "renewed", "new-holder", "transition", "duration"],
)
def test_the_observation_time_moves_only_when_the_record_changes(
    before: LeaseRecord | None, after: LeaseRecord, moves: bool
) -> None:
    previous = None if before is None else Observation(before, 10.0)
    seen = observe(previous, after, 17.0)
    assert seen.record == after
    assert seen.at == (17.0 if moves else 10.0)


@pytest.mark.parametrize(
    ("record", "observed_at", "now", "verdict"),
    [
        (rec(holder="me"), 0.0, 100.0, Verdict.RENEW),
        (rec(holder=""), 10.0, 10.0, Verdict.TAKE),
        (rec(), 10.0, 13.0, Verdict.WAIT),
        (rec(), 10.0, 14.0, Verdict.WAIT),  # expired only strictly after the duration
        (rec(), 10.0, 14.1, Verdict.TAKE),
        # the remote renewTime says nothing: an hour old, seen just now, is live
        (rec(renew_offset=-3600), 10.0, 11.0, Verdict.WAIT),
        # an hour in the future, but unchanged for longer than the duration, is expired
        (rec(renew_offset=3600), 10.0, 15.0, Verdict.TAKE),
        (rec(duration_seconds=15), 10.0, 20.0, Verdict.WAIT),  # the record's own duration
    ],
    ids=["mine", "released", "live", "boundary", "expired", "old-renew-time",
         "future-renew-time", "record-duration"],
)  # fmt: skip
def test_a_lease_is_judged_by_the_local_time_since_its_last_observed_change(
    record: LeaseRecord, observed_at: float, now: float, verdict: Verdict
) -> None:
    assert judge(Observation(record, observed_at), "me", now) is verdict


@pytest.mark.parametrize(("observed_at", "duration", "now", "gone"),
                         [(10.0, 4, 14.0, False), (10.0, 4, 14.001, True), (10.0, 0, 10.001, True)])  # fmt: skip
def test_expiry_counts_the_records_duration_from_the_local_observation(
    observed_at: float, duration: int, now: float, gone: bool
) -> None:
    seen = Observation(rec(renew_offset=-86400, duration_seconds=duration), observed_at)
    assert expired(seen, now) is gone


def test_a_claim_keeps_the_acquire_time_and_transitions_of_our_own_lease_only() -> None:
    later = T0 + dt.timedelta(seconds=9)
    assert claim(None, "me", 4, later) == LeaseRecord("me", 4, later, later, 0, "")
    renewed = claim(rec(holder="me"), "me", 4, later)
    assert (renewed.acquire_time, renewed.renew_time, renewed.transitions) == (T0, later, 3)
    assert renewed.resource_version == "1", "the update is conditional on the read"
    taken = claim(rec(holder="other"), "me", 4, later)
    assert (taken.holder, taken.acquire_time, taken.transitions) == ("me", later, 4)


# ---------------------------------------------------------------------- acquiring


async def polls_until_held(e: LeaderElector, clock: FakeClock, every: float, until: float,
                           between: Callable[[], None] = lambda: None) -> float | None:  # fmt: skip
    """Call one acquire attempt every `every` seconds; the local time of the first success."""
    while clock.now < until:
        if await e.try_acquire_or_renew() is Outcome.HELD:
            return clock.now
        between()
        await clock.sleep(every)
    return None


@pytest.mark.parametrize("remote_skew", [-3600.0, -30.0, 0.0, 30.0, 3600.0])
@pytest.mark.parametrize("local_skew", [-30.0, 0.0, 30.0])
async def test_a_standby_takes_a_silent_lease_only_after_its_own_lease_duration(
    remote_skew: float, local_skew: float
) -> None:
    clock = FakeClock()
    store = FakeStore(clock, rec(renew_offset=remote_skew))
    e = elector(store, clock, wall_skew=local_skew)
    first_seen = clock.now + store.latency
    held_at = await polls_until_held(e, clock, every=0.5, until=clock.now + 30)
    assert held_at is not None
    assert first_seen + 4 < held_at <= first_seen + 4 + 0.5 + 2 * store.latency
    assert store.record is not None
    assert (store.record.holder, store.record.transitions) == ("me", 4)
    written_at = held_at - store.latency  # the renewTime is stamped before the update call
    assert store.record.renew_time == T0 + dt.timedelta(seconds=written_at - 100 + local_skew)


@pytest.mark.parametrize("remote_skew", [-3600.0, -30.0, 30.0])
@pytest.mark.parametrize("local_skew", [-30.0, 30.0])
async def test_a_standby_never_takes_a_lease_that_keeps_being_renewed(
    remote_skew: float, local_skew: float
) -> None:
    clock = FakeClock()
    store = FakeStore(clock, rec(renew_offset=remote_skew))
    e = elector(store, clock, wall_skew=local_skew)
    ticks = iter(range(1000))

    def leader_renews_every_two_polls() -> None:
        if next(ticks) % 2:
            store.renew_by("other", remote_skew + clock.now - 100)

    held = await polls_until_held(e, clock, 1.0, clock.now + 60, leader_renews_every_two_polls)
    assert held is None
    assert store.record is not None
    assert store.record.holder == "other"


async def test_a_released_or_missing_lease_is_taken_at_once() -> None:
    clock = FakeClock()
    store = FakeStore(clock, rec(holder="", duration_seconds=1))
    assert await elector(store, clock).try_acquire_or_renew() is Outcome.HELD
    missing = FakeStore(clock, None)
    assert await elector(missing, clock).try_acquire_or_renew() is Outcome.HELD
    assert missing.record is not None
    assert missing.record.transitions == 0
    assert await elector(missing, clock, "late").try_acquire_or_renew() is Outcome.BUSY


# ---------------------------------------------------------------------- renewing


class Lead:
    """An elector leading on a fake store, with the order of its steps recorded."""

    def __init__(self) -> None:
        self.clock = FakeClock()
        self.store = FakeStore(self.clock, None)
        self.steps: list[tuple[str, float]] = []
        self.elector = elector(
            self.store, self.clock,
            on_started_leading=lambda: self.steps.append(("started", self.clock.now)),
            on_stopped_leading=self.stopped,
        )  # fmt: skip

    def stopped(self) -> None:
        assert not self.elector.leading.is_set(), "the elector's own flag is down first"
        assert not self.elector.lost.is_set(), "writes stop before `lost` is announced"
        self.steps.append(("stopped", self.clock.now))

    async def run(self) -> None:
        await asyncio.wait_for(self.elector.run(), timeout=10)


def fail_updates_after(lead: Lead, n: int, fault: Callable[[], Any]) -> None:
    count = iter(range(10_000))
    lead.store.script = lambda call: fault() if call == "update" and next(count) >= n else None


def connection_refused() -> None:
    raise errors.ConnectionFailed("PUT lease: cannot reach the API server")


def conflict() -> None:
    raise errors.Conflict(409, "the object has been modified", reason="Conflict")


@pytest.mark.parametrize("fault", [connection_refused, conflict], ids=["unreachable", "conflict"])
async def test_a_leader_that_cannot_renew_steps_down_exactly_at_the_renew_deadline(
    fault: Callable[[], Any],
) -> None:
    lead = Lead()
    fail_updates_after(lead, 3, fault)  # acquire (create) + 3 renews succeed
    await lead.run()
    started_renew = [t for t, call in lead.store.calls if call == "get"][3]
    assert lead.steps[0] == ("started", 100.25)
    name, stopped_at = lead.steps[1]
    assert name == "stopped"
    assert stopped_at == started_renew + TIMING.renew_deadline
    assert lead.elector.lost.is_set()
    assert not lead.elector.leading.is_set()
    retries = [t for t, call in lead.store.calls if call == "update"][3:]
    assert len(retries) >= 3, "it retried within the deadline before giving up"


async def test_slow_but_successful_renews_keep_the_lease() -> None:
    lead = Lead()
    lead.store.latency = 1.2  # each call; a renew (get + update) takes 2.4 s < 3 s
    task = asyncio.create_task(lead.elector.run())
    await lead.clock.reached(200)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert lead.elector.leading.is_set()
    assert not lead.elector.lost.is_set()
    assert [name for name, _ in lead.steps] == ["started"]


@pytest.mark.parametrize(
    "change",
    [lambda s: s.renew_by("thief", 0), lambda s: setattr(s, "record", None)],
    ids=["another-holder", "deleted"],
)
async def test_a_leader_that_sees_another_holder_steps_down_at_once(
    change: Callable[[FakeStore], None],
) -> None:
    lead = Lead()
    counter = iter(range(100))

    def script(call: str) -> None:
        if call == "get" and next(counter) == 3:
            change(lead.store)

    lead.store.script = script
    await lead.run()
    gets = [t for t, call in lead.store.calls if call == "get"]
    assert len(gets) == 4
    assert lead.steps[1] == ("stopped", gets[3] + lead.store.latency)
    assert lead.elector.lost.is_set()


async def test_a_hung_renew_is_abandoned_at_the_renew_deadline() -> None:
    """Real (short) time: an API call that never answers cannot outlive the deadline."""
    timing = Timing(lease_duration=0.4, renew_deadline=0.3, retry_period=0.05)
    clock = FakeClock()
    store = FakeStore(clock, None)
    store.latency = 0.0
    hang = asyncio.Event()
    renews = iter(range(100))
    store.script = lambda call: hang.wait() if call == "get" and next(renews) == 3 else None
    stopped: list[float] = []
    e = LeaderElector(
        store, identity="me", clock=time.monotonic, wall_clock=lambda: T0, timing=timing,
        on_stopped_leading=lambda: stopped.append(time.monotonic()),
    )  # fmt: skip
    await asyncio.wait_for(e.run(), timeout=5)
    assert len(stopped) == 1
    assert stopped[0] - e.renewed_at == pytest.approx(timing.renew_deadline, abs=0.05)
    assert e.lost.is_set()


# ---------------------------------------------------------------------- releasing


async def led_then_stopped(lead: Lead) -> None:
    """Run `lead`'s elector until it leads, then stop the loop (the Lease is still held)."""
    task = asyncio.create_task(lead.elector.run())
    await asyncio.wait_for(lead.elector.leading.wait(), 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_release_stops_writing_before_it_frees_the_lease() -> None:
    lead = Lead()
    await led_then_stopped(lead)
    leading_when_written: list[bool] = []
    lead.store.script = lambda call: leading_when_written.append(lead.elector.leading.is_set())
    await lead.elector.release()
    assert leading_when_written
    assert not any(leading_when_written)
    assert lead.store.record is not None
    assert (lead.store.record.holder, lead.store.record.duration_seconds) == ("", 1)
    assert [name for name, _ in lead.steps] == ["started", "stopped"]
    follower = elector(lead.store, lead.clock, "next")
    assert await follower.try_acquire_or_renew() is Outcome.HELD


async def test_a_replica_that_lost_the_lease_does_not_release_it() -> None:
    lead = Lead()
    fail_updates_after(lead, 1, connection_refused)
    await lead.run()
    calls = len(lead.store.calls)
    await lead.elector.release()
    assert len(lead.store.calls) == calls


async def test_a_release_writes_client_gos_released_record() -> None:
    lead = Lead()
    await led_then_stopped(lead)
    transitions = lead.store.record.transitions if lead.store.record else None
    await lead.elector.release()
    freed = lead.store.record
    assert freed is not None
    now = T0 + dt.timedelta(seconds=lead.clock.now - 100.0)
    # client-go's release: no holder, 1 s, acquire and renew time the moment of the release
    assert (freed.holder, freed.duration_seconds, freed.transitions) == ("", 1, transitions)
    assert freed.acquire_time == freed.renew_time
    assert freed.renew_time is not None
    assert abs((freed.renew_time - now).total_seconds()) <= 2 * lead.store.latency


class UnansweredCreate(FakeStore):
    """The server applies the create; its answer never arrives."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock, None)
        self.applied = asyncio.Event()

    async def create(self, record: LeaseRecord) -> LeaseRecord:
        stored = await super().create(record)
        self.applied.set()
        await asyncio.Event().wait()
        return stored


async def test_a_replica_stopped_before_its_applied_create_was_answered_frees_the_lease() -> None:
    clock = FakeClock()
    store = UnansweredCreate(clock)
    steps: list[str] = []
    e = elector(store, clock, on_started_leading=lambda: steps.append("started"),
                on_stopped_leading=lambda: steps.append("stopped"))  # fmt: skip
    task = asyncio.create_task(e.run())
    await asyncio.wait_for(store.applied.wait(), 5)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert store.record is not None
    assert store.record.holder == "me", "the server made it the holder; it never learnt so"
    await e.release()
    assert (store.record.holder, store.record.duration_seconds) == ("", 1)
    assert steps == [], "it never led, so it never started or stopped leading"
    assert await elector(store, clock, "next").try_acquire_or_renew() is Outcome.HELD


async def test_a_standby_that_never_wrote_neither_reads_nor_writes_at_release() -> None:
    clock = FakeClock()
    store = FakeStore(clock, rec("other"))
    e = elector(store, clock)
    for _ in range(3):
        assert await e.try_acquire_or_renew() is Outcome.BUSY
    calls = len(store.calls)
    await e.release()
    assert len(store.calls) == calls
    assert store.record is not None
    assert store.record.holder == "other"


async def test_without_release_on_cancel_a_leader_stops_writing_and_leaves_the_lease() -> None:
    lead = Lead()
    lead.elector.release_on_cancel = False
    await led_then_stopped(lead)
    held, calls = lead.store.record, len(lead.store.calls)
    await lead.elector.release()
    assert len(lead.store.calls) == calls, "no read, no write"
    assert lead.store.record == held
    assert held is not None
    assert held.holder == "me"
    assert not lead.elector.leading.is_set()
    assert [name for name, _ in lead.steps] == ["started", "stopped"]


@pytest.mark.parametrize(("seconds", "written"), [(15, 15), (4.9, 4), (2.5, 2), (0.5, 1)])
async def test_the_lease_duration_is_written_in_whole_seconds_truncated_as_client_go_does(
    seconds: float, written: int
) -> None:
    clock = FakeClock()
    store = FakeStore(clock, None)
    timing = Timing(lease_duration=seconds, renew_deadline=0.4, retry_period=0.1)
    e = LeaderElector(store, identity="me", clock=clock, wall_clock=lambda: T0, timing=timing,
                      sleep=clock.sleep)  # fmt: skip
    assert await e.try_acquire_or_renew() is Outcome.HELD
    assert store.record is not None
    assert store.record.duration_seconds == written
