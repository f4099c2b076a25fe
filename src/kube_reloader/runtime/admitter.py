"""The admission room: answer the API server's AdmissionReviews (`--admission-addr`).

For a workload being created, or updated with a new pod template, it reads the referenced
ConfigMaps straight from the API server (a quorum read: when the ConfigMap is written before
the Deployment, its new content is already stored when the Deployment is admitted, while the
controller's watch may not have it yet) and writes their current hashes as the controller
would (`core.admitting`). When the controller's watch event then arrives, the workload already
carries the hash: one apply, one rollout.

Admission never refuses a write: every answer is `allowed`; a review that cannot be read, a
lookup that fails or runs past the review's budget (the API server's deadline for the call,
`admitserving.remaining`), anything unexpected, is admitted unchanged with the reason logged
(the controller then reloads as it would without a webhook). At most `MAX_IN_FLIGHT` reviews
look anything up at once; the next ones wait for their turn within their budget.

Who may ask (issue 29). API servers do not authenticate to webhooks by default, so without
`--admission-client-ca` anyone who reaches the port may send a review, naming any namespace
and any object, and read the answer. So the webhook answers only what the controller would
write into a pod template anyway, and only where it would write it: never for Secrets (left
to the controller); only for a namespace the controller watches and that exists (the
`--namespaces` list, else one LIST by name, remembered for a minute); only for an object of
the namespace the request names; only for ConfigMaps the object's pod template references by
a valid name; and never key-level hashes (`reload-scope: keys`: the hash of the keys a
workload consumes can be one key's value, an offline oracle for it): such a workload is
admitted unchanged, left to the controller. What a forged review can still learn is the
object-level hash of a ConfigMap it names in a namespace the controller watches, the value
the controller writes into that namespace's pod templates (a SHA-1 of all its data, or with
`--hash-algorithm=hmac-sha256` a keyed one), and whether that ConfigMap exists (docs/limits.md,
"Admission webhook"). With `--admission-client-ca` the TLS handshake requires the API
server's client certificate (the API server presents one when its AdmissionConfiguration
names a kubeconfig for the webhook), a caller without one never gets to send a review, and
key-level hashes are written too.

Under `--reload-strategy=annotations` and `--compat=v2` the value written carries the time
of the reload, which the controller's own later write would not repeat: the webhook then
admits everything unchanged.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import msgspec

from kube_reloader.core import admitting, planning, podtemplates, strategies
from kube_reloader.core.planning import Change, Event
from kube_reloader.edges import admitserving
from kube_reloader.kube import contents, errors, projections, resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime.cache import configmap_entry
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import log

#: reviews whose lookups run at once; more wait for their turn within their budget
MAX_IN_FLIGHT = 8
#: a review's workload, the ConfigMaps it references, whether it is reloaded key by key
_Planned = tuple[planning.Workload, list[admitting.Reference], bool]
#: the flag that makes the webhook require the API server's client certificate
CLIENT_CA_FLAG = "--admission-client-ca"
NO_KEYS = f"key-level hashes are written only for an authenticated API server ({CLIENT_CA_FLAG})"


class _Request(msgspec.Struct):
    uid: Any = None
    operation: Any = None
    namespace: Any = None
    object: Any = None
    oldObject: Any = None
    dryRun: Any = None


class _Review(msgspec.Struct):
    """The fields of an AdmissionReview read; every other field is skipped unbuilt."""

    apiVersion: Any = None
    kind: Any = None
    request: _Request | None = None


_DECODER = msgspec.json.Decoder(_Review)


def decode_review(body: bytes) -> admitting.ParsedReview:
    """`admitting.parse_review`, decoded by msgspec (C speed; unknown fields skipped;
    nesting bounded by the interpreter's recursion limit): total, a review or a reason."""
    if len(body) > admitting.MAX_REVIEW_BYTES:
        return admitting.ParsedReview(error=f"review of {len(body)} bytes is over the cap")
    try:
        doc = _DECODER.decode(body)
    except (msgspec.DecodeError, RecursionError, MemoryError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return admitting.ParsedReview(error=f"review: not valid JSON: {first[:200]}")
    req = doc.request
    request: dict[str, Any] | None = None
    if req is not None:
        request = {
            "uid": req.uid,
            "operation": req.operation,
            "namespace": req.namespace,
            "object": req.object,
            "oldObject": req.oldObject,
            "dryRun": req.dryRun,
        }
    return admitting.review_of({"apiVersion": doc.apiVersion, "kind": doc.kind, "request": request})


class KnownNamespaces:
    """Whether a namespace exists, from one LIST by name, remembered (`TTL` seconds when
    found, `MISS_TTL` when not) for at most `SIZE` names: a flood of forged reviews costs
    the API server at most one LIST per name and per `MISS_TTL`."""

    TTL = 60.0
    MISS_TTL = 5.0
    SIZE = 4096

    def __init__(self, client: Client, clock: Clock) -> None:
        self.client, self.clock = client, clock
        self.seen: OrderedDict[str, tuple[bool, float]] = OrderedDict()

    async def exists(self, namespace: str) -> bool:
        now = self.clock.monotonic()
        hit = self.seen.get(namespace)
        if hit is not None and now < hit[1]:
            return hit[0]
        listed = await self.client.list(
            resources.NAMESPACES,
            field_selector=f"metadata.name={namespace}",
            type=projections.Object,
        )
        found = bool(listed.items)
        self.seen[namespace] = (found, now + (self.TTL if found else self.MISS_TTL))
        self.seen.move_to_end(namespace)
        while len(self.seen) > self.SIZE:
            self.seen.popitem(last=False)
        return found


class Admitter:
    """One AdmissionReview in, one answer out; `answer` never raises."""

    def __init__(
        self,
        client: Client,
        options: Options,
        clock: Clock,
        deadline: float,
        namespace_wanted: Callable[[str], bool] | None = None,
        *,
        authenticated: bool = False,
    ) -> None:
        self.client = client
        self.options = options
        self.clock = clock
        #: seconds for the lookups of a review answered outside the edge (no known budget)
        self.deadline = deadline
        #: the controller's own namespace filter (`Intake.namespace_wanted`: --namespaces,
        #: --namespaces-to-ignore, --namespace-selector); None: the flags alone decide
        self.namespace_wanted = namespace_wanted
        #: the caller proved to be the API server (`--admission-client-ca`)
        self.authenticated = authenticated
        self.namespaces = KnownNamespaces(client, clock)
        self.slots = asyncio.Semaphore(MAX_IN_FLIGHT)
        self.reviews = 0
        self.mutated = 0
        self.in_flight = 0

    async def answer(self, body: bytes) -> bytes:
        return await self.respond(self.parse(body))

    def parse(self, body: bytes) -> admitting.ParsedReview:
        self.reviews += 1
        return decode_review(body)

    async def respond(self, parsed: admitting.ParsedReview) -> bytes:
        if parsed.review is None:
            log.info("admitted unchanged", extra={"reason": parsed.error, "uid": parsed.uid})
            return _encode(admitting.response(parsed.uid))
        review = parsed.review
        try:
            ops, what = await self._decide(review)
        except Exception as exc:  # noqa: BLE001 - admission never fails the write
            ops, what = [], f"{type(exc).__name__}: {str(exc)[:200]}"
        name = str(podtemplates.mapping(review.obj.get("metadata")).get("name") or "")
        where = {
            "workload": f"{review.obj.get('kind')} {review.namespace}/{name}",
            "operation": review.operation,
            "uid": review.uid,
        }
        if ops:
            self.mutated += 1
            log.info("admission wrote current hashes", extra={**where, "reason": what})
        else:
            log.info("admitted unchanged", extra={**where, "reason": what})
        return _encode(admitting.response(review.uid, ops))

    def _screen(self, review: admitting.Review) -> str | None:
        """Why the review is left alone before anything is looked up, if it is."""
        opts = self.options
        if opts.namespaces and review.namespace not in opts.namespaces:
            return "namespace not watched"
        if review.namespace in opts.namespaces_to_ignore:
            return "namespace ignored (--namespaces-to-ignore)"
        if self.namespace_wanted is not None and not self.namespace_wanted(review.namespace):
            return "namespace not watched (--namespace-selector)"
        if opts.plan.strategy is not strategies.Strategy.ENV_VARS:
            return "the annotations strategy writes the reload's time; left to the controller"
        if opts.plan.compat is strategies.Compat.V2:
            return "--compat=v2 writes the reload's time; left to the controller"
        return None

    def _plan(self, review: admitting.Review) -> tuple[_Planned | None, str]:
        """(the workload, its ConfigMap references, whether key-level) or None, and why."""
        rolls, why = admitting.rolls_anyway(review)
        if not rolls:
            return None, why
        workload = admitting.workload_of(review)
        if isinstance(workload, str):
            return None, workload
        opts = self.options
        if workload.kind not in opts.workload_kinds:
            return None, f"kind {workload.kind} is not reloaded"
        refs = [r for r in admitting.references(workload) if r[0] in opts.resources]
        if not refs:
            return None, "references no ConfigMap (Secrets are left to the controller)"
        if len(refs) > admitting.MAX_REFERENCES:
            return None, f"{len(refs)} references, over {admitting.MAX_REFERENCES}; left alone"
        keys = admitting.key_scoped(workload, opts.plan)
        if keys and not self.authenticated:
            return None, NO_KEYS
        return (workload, refs, keys), why

    async def _decide(self, review: admitting.Review) -> tuple[list[dict[str, Any]], str]:
        why = self._screen(review)
        if why is not None:
            return [], why
        planned, why = self._plan(review)
        if planned is None:
            return [], why
        workload, refs, keys = planned
        budget = admitserving.remaining()
        budget = self.deadline if budget is None else budget
        try:
            async with asyncio.timeout(budget):
                found = await self._look_up(review.namespace, refs, keys=keys)
        except TimeoutError:
            return [], f"lookups did not finish within {budget:.2g}s; left to the controller"
        except errors.Forbidden as exc:
            return [], f"lookup forbidden ({exc}); left to the controller"
        except errors.KubeError as exc:
            return [], f"lookup failed ({exc}); left to the controller"
        if isinstance(found, str):
            return [], found
        opts = self.options
        result = admitting.admit(
            workload=workload,
            obj=review.obj,
            changes=found,
            config=opts.plan,
            now=int(self.clock.wall()),
        )
        log.debug("admission plans", extra={"reasons": result.reasons, "uid": review.uid})
        names = ", ".join(f"{rt.kind} {n}" for rt, n in sorted(found))
        if result.ops:
            return result.ops, f"{len(result.ops)} operation(s) for {names}"
        return [], f"already current or not reloaded for {names or 'no found reference'}"

    async def _look_up(
        self, namespace: str, refs: list[admitting.Reference], *, keys: bool
    ) -> dict[admitting.Reference, Change] | str:
        """The referenced ConfigMaps' current content (those that exist), or why none is
        looked up: waits for one of `MAX_IN_FLIGHT` turns; unauthenticated, the namespace
        must exist (outside an explicit `--namespaces` list)."""
        async with self.slots:
            self.in_flight += 1
            try:
                proven = self.authenticated or bool(self.options.namespaces)
                if not proven and not await self.namespaces.exists(namespace):
                    return f"namespace {namespace} does not exist"
                found = await asyncio.gather(*(self._content(namespace, r, keys) for r in refs))
            finally:
                self.in_flight -= 1
        return {r: c for r, c in zip(refs, found, strict=True) if c is not None}

    async def _content(self, namespace: str, ref: admitting.Reference, keys: bool) -> Change | None:
        """The ConfigMap's current content as the controller's cache describes it (a quorum
        LIST by name, with the controller's label selector; per-key digests only for a
        key-level workload), or None when it does not exist or is not watched."""
        _, name = ref
        by_name, labels = f"metadata.name={name}", self.options.resource_label_selector or None
        configmaps = await self.client.list(
            resources.CONFIGMAPS,
            namespace=namespace,
            field_selector=by_name,
            label_selector=labels,
            type=contents.ConfigMapContent,
        )
        if not configmaps.items:
            return None
        opts = self.options
        entry = configmap_entry(
            configmaps.items[0], opts.plan.match.keys, opts.hash_key, per_key=keys
        )
        return entry.change(Event.UPDATED)


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
