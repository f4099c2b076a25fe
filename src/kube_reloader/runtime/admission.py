"""The admission room: answer the API server's AdmissionReviews (`--admission-addr`).

For a workload being created, or updated with a new pod template, it reads the referenced
ConfigMaps straight from the API server (a quorum read: when the ConfigMap is written before
the Deployment, its new content is already stored when the Deployment is admitted, while the
controller's watch may not have it yet) and writes their current hashes as the controller
would (`core.admitting`). When the controller's watch event then arrives, the workload already
carries the hash: one apply, one rollout.

Admission never refuses a write: every answer is `allowed`; a review that cannot be read, a
lookup that fails or runs past its deadline, anything unexpected, is admitted unchanged with
the reason logged (the controller then reloads as it would without a webhook).

The listener cannot tell the API server from anyone else who reaches its port (API servers do
not authenticate to webhooks by default), and its answer carries the hashes it writes. So it
never looks at Secrets (left to the controller), answers only for a namespace the controller
watches and for an object in the namespace the request names, and at most `MAX_IN_FLIGHT`
reviews look anything up at once (a flood of forged reviews costs the API server a bounded
number of LISTs; the rest are admitted unchanged). Under `--reload-strategy=annotations` and
`--compat=v2` the value written carries the time of the reload, which the controller's own
later write would not repeat: the webhook then admits everything unchanged.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import msgspec

from kube_reloader.core import admitting, podtemplates, strategies
from kube_reloader.core.planning import Change, Event
from kube_reloader.kube import errors, projections, resources
from kube_reloader.kube.client import Client
from kube_reloader.runtime.cache import configmap_entry
from kube_reloader.runtime.clock import Clock
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.reporting import log

#: reviews whose lookups run at once; more are admitted unchanged at once
MAX_IN_FLIGHT = 8


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
    request = None if req is None else {
        "uid": req.uid, "operation": req.operation, "namespace": req.namespace,
        "object": req.object, "oldObject": req.oldObject, "dryRun": req.dryRun,
    }  # fmt: skip
    return admitting.review_of({"apiVersion": doc.apiVersion, "kind": doc.kind,
                                "request": request})  # fmt: skip


@dataclass(frozen=True)
class AdmissionSettings:
    """`--admission-*`: where the webhook serves, and its certificates."""

    addr: str
    #: where the CA Secret lives (the controller's namespace)
    namespace: str
    ca_secret: str = "kube-reloader-admission-ca"
    #: the MutatingWebhookConfiguration whose caBundle this process keeps current
    webhook_config: str = "kube-reloader"
    #: names the serving certificate is valid for (the Service's DNS names, 127.0.0.1)
    hosts: tuple[str, ...] = ("127.0.0.1", "localhost")
    #: seconds a serving certificate is valid; renewed after two thirds of it
    cert_validity: float = 24 * 3600.0
    #: seconds the CA is valid; renewed (with an overlapping bundle) with a third left
    ca_validity: float = 365 * 24 * 3600.0
    #: seconds for the lookups of one review (the webhook's timeoutSeconds is at most 2)
    lookup_deadline: float = 1.0


class Admitter:
    """One AdmissionReview in, one answer out; `answer` never raises."""

    def __init__(
        self, client: Client, options: Options, clock: Clock, deadline: float,
        namespace_wanted: Callable[[str], bool] | None = None,
    ) -> None:  # fmt: skip
        self.client = client
        self.options = options
        self.clock = clock
        self.deadline = deadline
        #: the controller's own namespace filter (`Intake.namespace_wanted`: --namespaces,
        #: --namespaces-to-ignore, --namespace-selector); None: the flags alone decide
        self.namespace_wanted = namespace_wanted
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
        where = {"workload": f"{review.obj.get('kind')} {review.namespace}/{name}",
                 "operation": review.operation, "uid": review.uid}  # fmt: skip
        if ops:
            self.mutated += 1
            log.info("admission wrote current hashes", extra={**where, "reason": what})
        else:
            log.info("admitted unchanged", extra={**where, "reason": what})
        return _encode(admitting.response(review.uid, ops))

    async def _decide(self, review: admitting.Review) -> tuple[list[dict[str, Any]], str]:
        opts = self.options
        if opts.namespaces and review.namespace not in opts.namespaces:
            return [], "namespace not watched"
        if review.namespace in opts.namespaces_to_ignore:
            return [], "namespace ignored (--namespaces-to-ignore)"
        if self.namespace_wanted is not None and not self.namespace_wanted(review.namespace):
            return [], "namespace not watched (--namespace-selector)"
        if opts.plan.strategy is not strategies.Strategy.ENV_VARS:
            return [], "the annotations strategy writes the reload's time; left to the controller"
        if opts.plan.compat is strategies.Compat.V2:
            return [], "--compat=v2 writes the reload's time; left to the controller"
        rolls, why = admitting.rolls_anyway(review)
        if not rolls:
            return [], why
        workload = admitting.workload_of(review)
        if isinstance(workload, str):
            return [], workload
        if workload.kind not in opts.workload_kinds:
            return [], f"kind {workload.kind} is not reloaded"
        refs = [r for r in admitting.references(workload) if r[0] in opts.resources]
        if not refs:
            return [], "references no ConfigMap (Secrets are left to the controller)"
        if len(refs) > admitting.MAX_REFERENCES:
            return [], f"{len(refs)} references, over {admitting.MAX_REFERENCES}; left alone"
        if self.in_flight >= MAX_IN_FLIGHT:
            return [], f"{MAX_IN_FLIGHT} reviews already looking up; left to the controller"
        self.in_flight += 1
        try:
            async with asyncio.timeout(self.deadline):
                found = await asyncio.gather(*(self._content(review.namespace, r) for r in refs))
        except TimeoutError:
            return [], f"lookups took over {self.deadline}s; left to the controller"
        except errors.KubeError as exc:
            return [], f"lookup failed ({exc}); left to the controller"
        finally:
            self.in_flight -= 1
        changes = {r: c for r, c in zip(refs, found, strict=True) if c is not None}
        kind = opts.kinds.get(workload.kind)
        result = admitting.admit(
            workload=workload, obj=review.obj, changes=changes, config=opts.plan,
            now=int(self.clock.wall()), default_strategy=opts.default_strategy,
            evictable=None if kind is None else kind.evictable,
        )  # fmt: skip
        log.debug("admission plans", extra={"reasons": result.reasons, "uid": review.uid})
        names = ", ".join(f"{rt.kind} {n}" for rt, n in sorted(changes))
        if result.ops:
            return result.ops, f"{len(result.ops)} operation(s) for {names}"
        return [], f"already current or not reloaded for {names or 'no found reference'}"

    async def _content(self, namespace: str, ref: admitting.Reference) -> Change | None:
        """The ConfigMap's current content as the controller's cache describes it (a quorum
        LIST by name, with the controller's label selector), or None when it does not exist
        or is not watched."""
        _, name = ref
        keys, key = self.options.plan.match.keys, self.options.hash_key
        by_name, labels = f"metadata.name={name}", self.options.resource_label_selector or None
        configmaps = await self.client.list(
            resources.CONFIGMAPS,
            namespace=namespace,
            field_selector=by_name,
            label_selector=labels,
            type=projections.ConfigMapContent,
        )
        if not configmaps.items:
            return None
        return configmap_entry(configmaps.items[0], keys, key, per_key=True).change(Event.UPDATED)


def _encode(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
