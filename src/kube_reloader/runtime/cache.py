"""What the controller remembers between events: content hashes and a reverse index.

ConfigMaps and Secrets are reduced to `ConfigEntry` (name, namespace, the annotations that
matter, content hash) the moment they are decoded, so no Secret value outlives the event that
carried it. Workloads are reduced to the core's `Workload` value (their pod templates by
`templateviews`). `WorkloadIndex` maps each (namespace, type, name) to the workloads that
reference it, plus, per namespace, the workloads with a named reload list (which may match
resources they do not reference): a change costs work proportional to the workloads it can
affect, never a LIST.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Mapping

import msgspec

from kube_reloader.core import hashing, matching, rollouts, scoping
from kube_reloader.core.annotations import Keys
from kube_reloader.core.kindtraits import traits
from kube_reloader.core.objects import ObjectKey, ResourceType
from kube_reloader.core.planning import Before, Change, Event, Workload
from kube_reloader.kube import contents as c
from kube_reloader.kube import projections as p
from kube_reloader.kube.projections import ObjectMeta
from kube_reloader.runtime.templateviews import pod_template


class ConfigEntry(msgspec.Struct, frozen=True):
    """A ConfigMap or Secret as remembered: never its data, only its hash."""

    metadata: ObjectMeta
    rtype: ResourceType
    hash: str
    #: the resource a SecretProviderClassPodStatus reports on (its SecretProviderClass)
    resource: str = ""
    #: epoch seconds of the last write to the content (from managedFields), if known
    changed_at: float | None = None
    #: per-key digests (`core.scoping`), kept only while a `keys`-scope workload reads it
    digests: bytes | None = None
    #: a TLS Secret (type kubernetes.io/tls, or cert-manager's certificate-name annotation)
    tls: bool = False
    #: the digest of the content's bytes as read (`kube.contents.digest`; empty: unknown)
    content: bytes = b""

    def change(
        self,
        event: Event,
        annotations: Mapping[str, str] | None = None,
        hash: str | None = None,
        previous: Before | None = None,
    ) -> Change:
        """The change this entry's content makes, for `event` (`previous`: the content it
        replaced, if its per-key digests are known)."""
        return Change(
            self.rtype,
            self.metadata.namespace,
            self.name,
            self.hash if hash is None else hash,
            event,
            self.metadata.annotations if annotations is None else annotations,
            digests=self.digests,
            tls=self.tls,
            previous=previous,
        )

    @property
    def name(self) -> str:
        return self.resource or self.metadata.name

    @property
    def before(self) -> Before | None:
        """This content as the `previous` of the next change (None: digests unknown)."""
        return None if self.digests is None else Before(self.hash, self.digests)


class WorkloadEntry(msgspec.Struct, frozen=True):
    metadata: ObjectMeta
    workload: Workload


def _trim_meta(meta: ObjectMeta, keep: frozenset[str]) -> ObjectMeta:
    return ObjectMeta(
        name=meta.name,
        namespace=meta.namespace,
        uid=meta.uid,
        resourceVersion=meta.resourceVersion,
        generation=meta.generation,
        annotations={k: v for k, v in meta.annotations.items() if k in keep},
    )


_CONTENT_FIELDS = (b'"f:data"', b'"f:binaryData"', b'"f:stringData"')
_TEMPLATE_FIELDS = (b'"f:template"', b'"f:jobTemplate"')  # (a CronJob's: its jobTemplate's)


def configmap_entry(
    obj: c.ConfigMapContent,
    keys: Keys,
    hash_key: bytes | None = None,
    *,
    per_key: bool = False,
    content: bytes = b"",
) -> ConfigEntry:
    items = hashing.configmap_items(obj.strings(), obj.binary())
    return ConfigEntry(
        _trim_meta(obj.metadata, keys.resource_keys()),
        ResourceType.CONFIGMAP,
        hashing.items_hash(items, key=hash_key),
        changed_at=p.last_write(obj.metadata, *_CONTENT_FIELDS),
        digests=scoping.digests(items, secret_key=hash_key) if per_key else None,
        content=content,
    )


def secret_entry(
    obj: c.SecretContent,
    keys: Keys,
    hash_key: bytes | None = None,
    *,
    per_key: bool = False,
    content: bytes = b"",
) -> ConfigEntry:
    items = hashing.secret_items(dict(obj.values()))
    meta = obj.metadata
    return ConfigEntry(
        _trim_meta(meta, keys.resource_keys()),
        ResourceType.SECRET,
        hashing.items_hash(items, key=hash_key),
        changed_at=p.last_write(meta, *_CONTENT_FIELDS),
        digests=scoping.digests(items, secret_key=hash_key) if per_key else None,
        tls=matching.is_tls_secret(obj.type, meta.annotations),
        content=content,
    )


def content_kept(
    obj: c.ConfigMapContent | c.SecretContent,
    old: ConfigEntry,
    keys: Keys,
    *,
    per_key: bool,
    content: bytes,
) -> ConfigEntry | None:
    """`old` with `obj`'s metadata when `content`, the digest of `obj`'s content bytes, is
    `old`'s (a write to labels or annotations): hash, content time, per-key digests kept, not
    decoded or hashed again. None when it must be reduced in full: the content changed, the
    object was replaced, `old` lacks a digest, a content time or the per-key digests wanted."""
    meta = obj.metadata
    if (
        not content
        or content != old.content
        or meta.uid != old.metadata.uid
        or old.changed_at is None
        or (per_key and old.digests is None)
    ):
        return None
    tls = isinstance(obj, c.SecretContent) and matching.is_tls_secret(obj.type, meta.annotations)
    return ConfigEntry(
        _trim_meta(meta, keys.resource_keys()),
        old.rtype,
        old.hash,
        changed_at=old.changed_at,
        digests=old.digests if per_key else None,
        tls=tls,
        content=old.content,
    )


def _owner_kind(meta: ObjectMeta) -> str:
    return next((o.kind for o in meta.ownerReferences if o.controller), "")


def workload_entry(
    kind: str,
    obj: p.Workload | p.CronJob,
    keys: Keys,
    status: Callable[[p.Workload], rollouts.Status | None] | None = None,
) -> WorkloadEntry:
    """A workload reduced to what the rules read; `status` reads its rollout state (see
    `kinds`), when the kind has one."""
    keep = keys.workload_keys()
    meta = obj.metadata
    if isinstance(obj, p.CronJob):
        template = pod_template(obj.spec.jobTemplate.spec.template, keep)
        paused, ref = obj.spec.suspend, ""
    else:
        template = pod_template(obj.spec.template, keep)
        paused = obj.spec.paused
        ref = obj.spec.workloadRef.name if obj.spec.workloadRef else ""
    changed_at, manager = p.last_write_by(meta, *_TEMPLATE_FIELDS)
    workload = Workload(
        kind=kind,
        namespace=meta.namespace,
        name=meta.name,
        annotations={k: v for k, v in meta.annotations.items() if k in keep},
        template=template,
        uid=meta.uid,
        paused=paused,
        owner_kind=_owner_kind(meta),
        workload_ref=ref,
        template_changed_at=changed_at,
        template_manager=manager,
        status=None if isinstance(obj, p.CronJob) or status is None else status(obj),
        active=_job_running(obj) if traits(kind).job and isinstance(obj, p.Workload) else 0,
    )
    return WorkloadEntry(_trim_meta(meta, frozenset()), workload)


def status_entry(
    kind: str,
    obj: p.Workload | p.CronJob,
    old: WorkloadEntry,
    keys: Keys,
    status: Callable[[p.Workload], rollouts.Status | None] | None = None,
) -> WorkloadEntry | None:
    """`old` with `obj`'s rollout state, when `obj` is the same object at the same
    `metadata.generation` (its spec, pod template included, unchanged: a status update);
    None when it must be reduced in full (`workload_entry`). The metadata the rules read
    (annotations, owner, managedFields) is read again; the pod template is reused."""
    meta = obj.metadata
    if (
        isinstance(obj, p.CronJob)
        or not meta.generation
        or meta.generation != old.metadata.generation
        or meta.uid != old.metadata.uid
    ):
        return None
    keep, (changed_at, manager) = keys.workload_keys(), p.last_write_by(meta, *_TEMPLATE_FIELDS)
    workload = dataclasses.replace(
        old.workload,
        annotations={k: v for k, v in meta.annotations.items() if k in keep},
        owner_kind=_owner_kind(meta),
        template_changed_at=changed_at,
        template_manager=manager,
        status=None if status is None else status(obj),
        active=_job_running(obj) if traits(kind).job else 0,
    )
    return WorkloadEntry(_trim_meta(meta, frozenset()), workload)


def _job_running(obj: p.Workload) -> int:
    """A Job's running pods, or 1 while it is finishing: the Job controller records a success
    or failure target first and `Complete`/`Failed` a moment later; a Job re-created in
    between would never be marked complete (`kubectl wait --for=condition=complete` hangs)."""
    st = obj.status
    conditions = {c.type: c.status for c in st.conditions}
    if conditions.get("Complete") == "True" or conditions.get("Failed") == "True":
        return 0
    finishing = "True" in (conditions.get("SuccessCriteriaMet"), conditions.get("FailureTarget"))
    return max(st.active, 1 if finishing else 0)


def spc_status_entry(obj: p.SpcPodStatus, hash_key: bytes | None = None) -> ConfigEntry:
    """A SecretProviderClassPodStatus, reduced to the class it reports on and a hash.

    Like v1, a status with no objects yet hashes as "" so that its first population counts
    as a change."""
    status = obj.status
    if status.objects is None:
        digest = ""
    else:
        digest = hashing.spc_pod_status_hash(
            [(o.id, o.version) for o in status.objects],
            status.secretProviderClassName,
            key=hash_key,
        )
    return ConfigEntry(
        _trim_meta(obj.metadata, frozenset()),
        ResourceType.SECRETPROVIDERCLASS,
        digest,
        resource=status.secretProviderClassName,
    )


class WorkloadIndex:
    """All watched workloads, with reverse indexes from resources to workloads."""

    def __init__(self, keys: Keys, scope: scoping.Scope = scoping.Scope.OBJECT) -> None:
        self.keys = keys
        #: `--reload-scope`: the scope of workloads without kube-reloader.io/reload-scope
        self.scope = scope
        #: until every workload is listed, any config may turn out to be read by key
        self.warming = True
        #: (namespace, type, name) -> how many `keys`-scope workloads read some of its keys
        self._by_key: dict[tuple[str, ResourceType, str], int] = defaultdict(int)
        self.workloads: dict[ObjectKey, Workload] = {}
        self._refs: dict[tuple[str, ResourceType, str], set[ObjectKey]] = defaultdict(set)
        self._named: dict[tuple[str, ResourceType], set[ObjectKey]] = defaultdict(set)
        #: (namespace, Deployment name) -> Rollouts whose workloadRef points at it
        self._borrowers: dict[tuple[str, str], set[ObjectKey]] = defaultdict(set)
        self._indexed: dict[
            ObjectKey, tuple[list[tuple[str, ResourceType, str]], list[tuple[str, ResourceType]]]
        ] = {}
        self._keyed: dict[ObjectKey, list[tuple[str, ResourceType, str]]] = {}
        #: namespace -> kind -> how many workloads (what Reloader v2 lists for each change)
        self._kinds: dict[str, dict[str, int]] = {}

    def __len__(self) -> int:
        return len(self.workloads)

    def put(self, workload: Workload) -> None:
        key = workload.key
        old = self.workloads.get(key)
        if old is None:
            kinds = self._kinds.setdefault(workload.namespace, {})
            kinds[workload.kind] = kinds.get(workload.kind, 0) + 1
        if (
            old is not None
            and old.template == workload.template
            and old.annotations == workload.annotations
            and old.workload_ref == workload.workload_ref
        ):  # what the indexes are built from is unchanged (a status update): no re-indexing
            self.workloads[key] = workload
            return
        self._unindex(key)
        self.workloads[key] = workload
        refs = [(workload.namespace, rtype, name) for rtype, name in workload.template.references()]
        for r in refs:
            self._refs[r].add(key)
        named: list[tuple[str, ResourceType]] = []
        for rtype in ResourceType:
            if matching.carries_named_list(
                self.keys, rtype, workload.annotations, workload.template.annotations
            ):
                named.append((workload.namespace, rtype))
                self._named[(workload.namespace, rtype)].add(key)
        self._indexed[key] = (refs, named)
        self._put_keyed(workload, refs)
        if workload.workload_ref:
            self._borrowers[(workload.namespace, workload.workload_ref)].add(key)

    def remove(self, key: ObjectKey) -> None:
        if key in self.workloads:
            kinds = self._kinds[key.namespace]
            kinds[key.kind] -= 1
            if not kinds[key.kind]:
                del kinds[key.kind]
                if not kinds:
                    del self._kinds[key.namespace]
        self._unindex(key)

    def kinds_in(self, namespace: str) -> Mapping[str, int]:
        """How many workloads of each kind `namespace` has."""
        return self._kinds.get(namespace, {})

    def _unindex(self, key: ObjectKey) -> None:
        old = self.workloads.pop(key, None)
        if old is not None and old.workload_ref:
            borrowers = self._borrowers.get((old.namespace, old.workload_ref))
            if borrowers is not None:
                borrowers.discard(key)
                if not borrowers:
                    del self._borrowers[(old.namespace, old.workload_ref)]
        refs, named = self._indexed.pop(key, ([], []))
        for r in self._keyed.pop(key, []):
            self._by_key[r] -= 1
            if self._by_key[r] <= 0:
                del self._by_key[r]
        for r in refs:
            bucket = self._refs.get(r)
            if bucket is not None:
                bucket.discard(key)
                if not bucket:
                    del self._refs[r]
        for n in named:
            nbucket = self._named.get(n)
            if nbucket is not None:
                nbucket.discard(key)
                if not nbucket:
                    del self._named[n]

    def _put_keyed(self, workload: Workload, refs: list[tuple[str, ResourceType, str]]) -> None:
        tmpl = workload.template
        scope, _ = scoping.scope_of(workload.annotations, tmpl.annotations, self.scope)
        if scope is not scoping.Scope.KEYS:
            return
        consumed = scoping.consumption(tmpl)  # one pass, whatever the number of references
        keyed = [r for r in refs if consumed.get((r[1], r[2])) is not None]
        for r in keyed:
            self._by_key[r] += 1
        if keyed:
            self._keyed[workload.key] = keyed

    def wants_keys(self, namespace: str, rtype: ResourceType, name: str) -> bool:
        """Should this ConfigMap or Secret keep per-key digests (`core.scoping`)? Only
        while some `keys`-scope workload reads some, not all, of its keys."""
        return self.warming or (namespace, rtype, name) in self._by_key

    def candidates(self, namespace: str, rtype: ResourceType, name: str) -> list[Workload]:
        """Workloads that reference the resource or carry a named list for its type."""
        keys = set(self._refs.get((namespace, rtype, name), ()))
        keys |= self._named.get((namespace, rtype), set())
        for k in list(keys):  # Rollouts that borrow a candidate Deployment's template
            if traits(k.kind).lends_template:
                keys |= self._borrowers.get((namespace, k.name), set())
        return [self.workloads[k] for k in sorted(keys) if k in self.workloads]
