"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

The lock is Reloader's (`stakater-reloader-lock` in `POD_NAMESPACE`, identity `POD_NAME`), so
kube-reloader and Reloader replicas never lead at the same time during a migration. A
replica acquires the lease when it is free, expired or already its own, renews it every
retry period, and considers itself deposed when it could not renew within the renew
deadline. On shutdown the leader releases the lease (empty holder, 1 s duration), so a
standby takes over at its next retry instead of waiting for the lease to expire.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass

from kube_reloader.kube import errors, leases
from kube_reloader.kube.client import Client

log = logging.getLogger(__name__)
LOCK_NAME = "stakater-reloader-lock"
JITTER = 1.2


@dataclass(frozen=True, slots=True)
class Timing:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def problems(self) -> list[str]:
        """client-go's validation rules, as messages naming the flags."""
        out = []
        if self.lease_duration <= 0 or self.renew_deadline <= 0 or self.retry_period <= 0:
            out.append("leader election durations must be positive")
        if self.lease_duration <= self.renew_deadline:
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


class LeaderElector:
    def __init__(
        self,
        client: Client,
        *,
        namespace: str,
        identity: str,
        name: str = LOCK_NAME,
        timing: Timing | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.client = client
        self.namespace = namespace
        self.identity = identity
        self.name = name
        self.timing = timing or Timing()
        self.clock = clock
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self._record: leases.LeaseRecord | None = None

    async def _try(self) -> bool:
        """One acquire-or-renew attempt. True when we hold the lease afterwards."""
        now = self.clock()
        duration = max(1, round(self.timing.lease_duration))
        try:
            current = await leases.get(self.client, self.namespace, self.name)
        except errors.NotFound:
            body = leases.body(
                namespace=self.namespace, name=self.name, holder=self.identity,
                duration=duration, acquire=now, renew=now, transitions=0,
            )  # fmt: skip
            try:
                self._record = await leases.create(self.client, body)
            except (errors.AlreadyExists, errors.Conflict):
                return False
            return True
        mine = current.holder == self.identity
        if not mine and not current.expired(now):
            return False
        body = leases.body(
            namespace=self.namespace, name=self.name, holder=self.identity, duration=duration,
            acquire=current.acquire_time if mine else now, renew=now,
            transitions=current.transitions if mine else current.transitions + 1,
            resource_version=current.resource_version,
        )  # fmt: skip
        try:
            self._record = await leases.update(self.client, body)
        except errors.Conflict:
            return False
        return True

    async def run(self) -> None:
        """Acquire, then renew until the lease is lost (sets `lost`) or the task is cancelled."""
        t = self.timing
        while not self.leading.is_set():
            try:
                if await self._try():
                    self.leading.set()
                    log.info("became leader", extra={"identity": self.identity, "lease": self.name})
                    break
            except errors.KubeError as exc:
                log.warning("leader election attempt failed", extra={"error": str(exc)})
            await asyncio.sleep(t.retry_period * random.uniform(1.0, JITTER))  # noqa: S311
        last_renew = asyncio.get_running_loop().time()
        while True:
            await asyncio.sleep(t.retry_period)
            try:
                if await self._try():
                    last_renew = asyncio.get_running_loop().time()
                    continue
                reason = "another replica holds the lease"
            except errors.KubeError as exc:
                reason = str(exc)
            if asyncio.get_running_loop().time() - last_renew > t.renew_deadline:
                log.error("lost leadership", extra={"identity": self.identity, "reason": reason})
                self.leading.clear()
                self.lost.set()
                return

    async def release(self) -> None:
        """Give the lease up (if ours) so a standby takes over at once."""
        if not self.leading.is_set():
            return
        try:
            current = await leases.get(self.client, self.namespace, self.name)
            if current.holder != self.identity:
                return
            now = self.clock()
            await leases.update(
                self.client,
                leases.body(
                    namespace=self.namespace,
                    name=self.name,
                    holder="",
                    duration=1,
                    acquire=None,
                    renew=now,
                    transitions=current.transitions,
                    resource_version=current.resource_version,
                ),
            )
            log.info("released leadership", extra={"identity": self.identity})
        except errors.KubeError as exc:
            log.warning("could not release the lease", extra={"error": str(exc)})
        finally:
            self.leading.clear()
