"""The staleness audit: workloads whose running pods started before the last content change
of a ConfigMap or Secret they consume, and that no rule will reload (`core.staleness`).

`audit` is one pass, shared by `kube-reloader audit` and the controller's room: the rules
first (no API call), then, one namespace at a time and only for namespaces with a workload
that no rule reloads for some changed resource, one paged LIST of its pods reduced to start
times (never a pod cache, never a watch), then one LIST by name per stale Secret to tell a
TLS one and read its certificate's validity (cached by resourceVersion; the data is
dropped). Only LIST is used (by name: `fieldSelector=metadata.name=`), never GET: the
chart's RBAC grants list and watch on ConfigMaps and Secrets. The planning pass lets other
tasks run every `clock.STEP_SECONDS` (`clock.Pacer`), however many references a tenant's
workloads carry.

`Auditing` is the controller's room (`--audit-interval`, 0: off): every interval, while this
replica leads (standbys keep no series), it audits what the controller watches and sets
`kube_reloader_stale_workloads{namespace,kind,name,resource}` to 1 per stale pair (pairs no
longer stale are removed), with a Warning Event `StaleCertificate` per workload and rotation
when the stale resource is a TLS Secret. A resource the controller does not watch (an
ignored type, one outside `--resource-label-selector`) is read by one LIST by name when a
workload references it; workloads in namespaces it does not watch are not seen (the CLI
audits them). Those reads are the tenant's to multiply (a workload may reference thousands
of optional ConfigMaps), so each round reads each resource once however many workloads
reference it, and each namespace at most `READS_PER_NAMESPACE` times (its references past
that are not judged in that round, and the round's report says how many).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field

import msgspec

from kube_reloader.core import planning, staleness, x509
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.staleness import Candidate, Consumed, Finding, Reason, Unwatched
from kube_reloader.core.x509 import iso
from kube_reloader.kube import errors, podstarts, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime.auditreports import AuditReports, StaleCertificate
from kube_reloader.runtime.clock import Clock, Pacer, SystemClock, sleep
from kube_reloader.runtime.fencing import Fence
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import log
from kube_reloader.runtime.stores import Stores

#: certificates remembered (one per stale TLS Secret), the oldest dropped first
MAX_CERTIFICATES = 10_000
#: reads of unwatched resources per namespace and audit round (each resource read once)
READS_PER_NAMESPACE = 100

Lookup = Callable[[ResourceType, str, str], Awaitable[Consumed | None]]


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    workloads: int = 0
    #: namespaces whose pods were listed
    namespaces_read: int = 0
    errors: list[str] = field(default_factory=list)
    #: namespaces whose pods could not be listed (their workloads were not judged)
    unread: set[str] = field(default_factory=set)


class Certificate(msgspec.Struct, frozen=True):
    """Whether a Secret is a TLS one and, if so, its certificate's validity."""

    resource_version: str
    tls: bool
    parsed: x509.Parsed | None


def validity(read: podstarts.SecretCertificate) -> Certificate:
    """The certificate read, reduced to its validity (its bytes are not kept)."""
    if not read.tls:
        return Certificate(read.resource_version, False, None)
    if read.pem is None:
        return Certificate(
            read.resource_version, True, x509.Parsed(error=read.error or "no tls.crt")
        )
    return Certificate(read.resource_version, True, x509.validity_of_pem(read.pem))


class Certificates:
    """TLS-ness and validity of Secrets, by (namespace, name), re-read when changed."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self._known: dict[tuple[str, str], Certificate] = {}
        self.reads = 0

    async def get(self, namespace: str, name: str, resource_version: str) -> Certificate:
        known = self._known.get((namespace, name))
        if known is not None and resource_version and known.resource_version == resource_version:
            return known
        self.reads += 1
        cert = validity(await podstarts.certificate(self.client, namespace, name, staleness.is_tls))
        self._known.pop((namespace, name), None)
        self._known[(namespace, name)] = cert
        while len(self._known) > MAX_CERTIFICATES:
            del self._known[next(iter(self._known))]
        return cert


async def audit(
    client: Client,
    workloads: Iterable[planning.Workload],
    lookup: Lookup,
    config: planning.Config,
    now: int,
    certificates: Certificates,
    *,
    versions: Callable[[str, str], str] | None = None,
    clock: Clock | None = None,
) -> Report:
    """One audit pass. `lookup` gives a consumed resource as it is now (None: absent);
    `versions` a Secret's resourceVersion (the certificate cache's key), when known. The
    certificate of each stale TLS Secret is read (one LIST by name, unless its version is
    cached)."""
    report = Report()
    by_ns: dict[str, list[tuple[planning.Workload, list[Candidate]]]] = defaultdict(list)
    pacer = Pacer(clock or SystemClock())  # a large round never holds the loop
    for w in workloads:
        if not traits(w.kind).long_running:  # a Job's, a CronJob's pods start current
            continue
        report.workloads += 1
        consumed = []
        for rtype, name in staleness.consumed_names(w):
            await pacer.step()
            found = await lookup(rtype, w.namespace, name)
            if found is not None:
                consumed.append(found)
        candidates = staleness.unreloaded(workload=w, consumed=consumed, config=config, now=now)
        if candidates:
            by_ns[w.namespace].append((w, candidates))
    for ns in sorted(by_ns):  # one namespace at a time: one LIST of its pods, reduced
        try:
            starts = await podstarts.pod_starts(client, ns)
        except errors.KubeError as exc:
            report.errors.append(f"namespace {ns}: cannot list pods: {str(exc)[:200]}")
            report.unread.add(ns)
            continue
        report.namespaces_read += 1
        for w, candidates in by_ns[ns]:
            await pacer.step()
            stale = staleness.judge(w, candidates, starts.get((w.kind, w.name), []))
            report.findings += [
                await _certificate(f, certificates, versions, report) for f in stale
            ]
        del starts
    return report


async def _certificate(
    f: Finding,
    certificates: Certificates,
    versions: Callable[[str, str], str] | None,
    report: Report,
) -> Finding:
    if not f.tls:
        return f
    ns = f.workload.namespace
    try:
        cert = await certificates.get(ns, f.name, versions(ns, f.name) if versions else "")
    except errors.KubeError as exc:
        report.errors.append(f"Secret {ns}/{f.name}: cannot read: {str(exc)[:200]}")
        return f
    if cert.parsed is not None and cert.parsed.error is not None:
        report.errors.append(f"Secret {ns}/{f.name}: tls.crt: {cert.parsed.error}")
    validity = cert.parsed.validity if cert.parsed is not None else None
    return dataclasses.replace(f, tls=True, validity=validity)


def stale_certificate_text(f: Finding) -> str:
    cert = ""
    if f.validity is not None:
        v = f.validity.to_dict()
        cert = f" (its certificate is now valid from {v['notBefore']} to {v['notAfter']})"
    return (
        f"{f.pods_before} of {f.pods} pod(s) started before Secret {f.name} was rotated at "
        f"{iso(f.changed_at)}{cert}, and no rule reloads them: {f.message}"
    )


def series(f: Finding) -> tuple[str, str, str, str]:
    w = f.workload
    return (w.namespace, w.kind, w.name, f"{f.rtype.kind}/{f.name}")


class Auditing:
    """The controller's periodic audit (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        options: Options,
        clock: Clock,
        stores: Stores,
        fence: Fence,
        audit: AuditReports,
        ready: asyncio.Event,
    ) -> None:
        self.client = client
        self.options = options
        self.clock = clock
        self.stores = stores
        self.fence = fence
        self.audit = audit
        self.ready = ready
        self.certificates = Certificates(client)
        self.last: Report | None = None
        #: the series set by the last round (kept for namespaces the next one cannot read)
        self.series: set[tuple[str, str, str, str]] = set()
        #: the failed reads of unwatched resources in this round (reported with the round's)
        self.lookup_errors: list[str] = []
        #: this round's reads of unwatched resources, each made once, and per namespace
        self._read: dict[tuple[ResourceType, str, str], Consumed | None] = {}
        self._reads: Counter[str] = Counter()
        self._unread: Counter[str] = Counter()

    async def loop(self) -> None:
        await self.ready.wait()
        while True:
            await sleep(self.clock, self.options.audit_interval)
            await self.round()

    async def round(self) -> None:
        """One round: the audit when this replica may write, else its series dropped."""
        if not self.fence.may_write():
            await self._drop()
            return
        await self.once()

    async def once(self) -> Report:
        stores = self.stores
        workloads = [stores.resolve(w) for w in list(stores.index.workloads.values())]
        self.lookup_errors = []
        self._read, self._reads, self._unread = {}, Counter(), Counter()
        report = await audit(
            self.client,
            workloads,
            self._lookup,
            self.options.plan,
            int(self.clock.wall()),
            self.certificates,
            versions=self._version,
            clock=self.clock,
        )
        report.errors[:0] = self.lookup_errors + [
            f"namespace {ns}: {n} references of unwatched resources not read this round (at "
            f"most {READS_PER_NAMESPACE} reads per namespace and round)"
            for ns, n in sorted(self._unread.items())
        ]
        self._read = {}
        if not self.fence.may_write():
            await self._drop()
            return report
        kept = {s for s in self.series if s[0] in report.unread}  # a failed read: as before
        self.series = {series(f) for f in report.findings} | kept
        await self.audit.stale(self.series, Pacer(self.clock))
        certs = []
        for f in report.findings:
            workload = stores.workload(f.workload) if f.tls else None
            if workload is not None:
                certs.append(
                    StaleCertificate(workload, f.name, f.changed_at, stale_certificate_text(f))
                )
        self.audit.stale_certificates(certs)
        for problem in report.errors[:5]:
            log.warning("staleness audit: a read failed", extra={"problem": problem})
        log.info(
            "staleness audit",
            extra={
                "workloads": report.workloads,
                "stale": len(report.findings),
                "namespaces_read": report.namespaces_read,
                "errors": len(report.errors),
            },
        )
        self.last = report
        return report

    async def _drop(self) -> None:
        """Not leading: no series."""
        self.series = set()
        await self.audit.stale(set(), Pacer(self.clock))

    def _version(self, namespace: str, name: str) -> str:
        entry = self.stores.config(ResourceType.SECRET, namespace, name)
        return entry.metadata.resourceVersion if entry is not None else ""

    async def _lookup(self, rtype: ResourceType, namespace: str, name: str) -> Consumed | None:
        entry = self.stores.config(rtype, namespace, name)
        if entry is not None:
            return Consumed(
                rtype, name, entry.changed_at, entry.metadata.annotations, tls=entry.tls
            )
        opts = self.options
        selector = opts.resource_label_selector
        if rtype in opts.resources and not selector:
            return None  # watched, and absent: nothing runs its content
        key = (rtype, namespace, name)
        if key in self._read:
            return self._read[key]
        if self._reads[namespace] >= READS_PER_NAMESPACE:
            self._unread[namespace] += 1
            return None
        self._reads[namespace] += 1
        self._read[key] = found = await self._read_unwatched(rtype, namespace, name)
        return found

    async def _read_unwatched(
        self, rtype: ResourceType, namespace: str, name: str
    ) -> Consumed | None:
        opts = self.options
        selector = opts.resource_label_selector
        res = resources.CONFIGMAPS if rtype is ResourceType.CONFIGMAP else resources.SECRETS
        try:  # not watched: one LIST by name tells whether it exists and when it changed
            listed = await self.client.list(
                res,
                namespace=namespace,
                field_selector=f"metadata.name={name}",
                type=podstarts.ConfigMeta,
            )
        except errors.KubeError as exc:
            self.lookup_errors.append(
                f"{rtype.kind} {namespace}/{name}: cannot list: {str(exc)[:200]}"
            )
            return None
        if not listed.items:
            return None
        obj = listed.items[0]
        meta: ObjectMeta = obj.metadata
        outside = Unwatched(
            Reason.EXCLUDED, f"the {rtype.kind} does not match --resource-label-selector={selector}"
        )
        unwatched = staleness.unwatched(
            namespace=namespace,
            rtype=rtype,
            namespaces=opts.namespaces,
            namespaces_to_ignore=opts.namespaces_to_ignore,
            resources=opts.resources,
        )
        scope = unwatched or outside
        tls = staleness.is_tls(obj.type, meta.annotations)
        return Consumed(
            rtype, name, podstarts.changed_at(meta), meta.annotations, tls=tls, unwatched=scope
        )
