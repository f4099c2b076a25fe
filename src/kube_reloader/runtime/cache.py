"""What the controller remembers between events: content hashes and a reverse index.

ConfigMaps and Secrets are reduced to `ConfigEntry` (name, namespace, the annotations that
matter, content hash) the moment they are decoded, so no Secret value outlives the event that
carried it. Workloads are reduced to the core's `Workload` value. `WorkloadIndex` maps each
(namespace, type, name) to the workloads that reference it, plus, per namespace, the workloads
with a named reload list (which may match resources they do not reference): a change costs
work proportional to the workloads it can affect, never a LIST.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass

from kube_reloader.core import hashing, matching, rollouts
from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ObjectKey, ResourceType, WorkloadKind
from kube_reloader.core.planning import Workload
from kube_reloader.core.references import (
    ENV_PREFIX,
    Container,
    EnvVar,
    PodTemplate,
    Volume,
)
from kube_reloader.kube import projections as p
from kube_reloader.kube.projections import ObjectMeta


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    """A ConfigMap or Secret as remembered: never its data, only its hash."""

    metadata: ObjectMeta
    rtype: ResourceType
    hash: str
    #: the resource a SecretProviderClassPodStatus reports on (its SecretProviderClass)
    resource: str = ""
    #: epoch seconds of the last write to the content (from managedFields), if known
    changed_at: float | None = None

    @property
    def name(self) -> str:
        return self.resource or self.metadata.name


@dataclass(frozen=True, slots=True)
class WorkloadEntry:
    metadata: ObjectMeta
    workload: Workload


def _trim_meta(meta: ObjectMeta, keep: frozenset[str]) -> ObjectMeta:
    return ObjectMeta(
        name=meta.name,
        namespace=meta.namespace,
        uid=meta.uid,
        resourceVersion=meta.resourceVersion,
        annotations={k: v for k, v in meta.annotations.items() if k in keep},
    )


_CONTENT_FIELDS = (b'"f:data"', b'"f:binaryData"', b'"f:stringData"')


def configmap_entry(
    obj: p.ConfigMapContent, keys: Keys, hash_key: bytes | None = None
) -> ConfigEntry:
    return ConfigEntry(
        _trim_meta(obj.metadata, keys.resource_keys()),
        ResourceType.CONFIGMAP,
        hashing.configmap_hash(obj.data, obj.binaryData, key=hash_key),
        changed_at=p.last_write(obj.metadata, *_CONTENT_FIELDS),
    )


def secret_entry(obj: p.SecretContent, keys: Keys, hash_key: bytes | None = None) -> ConfigEntry:
    return ConfigEntry(
        _trim_meta(obj.metadata, keys.resource_keys()),
        ResourceType.SECRET,
        hashing.secret_hash(dict(obj.values()), key=hash_key),
        changed_at=p.last_write(obj.metadata, *_CONTENT_FIELDS),
    )


def _container(c: p.Container) -> Container:
    env = tuple(
        EnvVar(
            v.name,
            v.value if v.name.startswith(ENV_PREFIX) else None,
            v.valueFrom.configMapKeyRef.name
            if v.valueFrom and v.valueFrom.configMapKeyRef
            else None,
            v.valueFrom.secretKeyRef.name if v.valueFrom and v.valueFrom.secretKeyRef else None,
        )
        for v in c.env
    )
    return Container(
        name=c.name,
        env=env,
        env_from_configmaps=tuple(
            e.configMapRef.name for e in c.envFrom if e.configMapRef and e.configMapRef.name
        ),
        env_from_secrets=tuple(
            e.secretRef.name for e in c.envFrom if e.secretRef and e.secretRef.name
        ),
        mounts=tuple(m.name for m in c.volumeMounts),
    )


def _volume(v: p.Volume) -> Volume:
    cms = [v.configMap.name] if v.configMap and v.configMap.name else []
    secrets = [v.secret.secretName] if v.secret and v.secret.secretName else []
    if v.projected:
        cms += [s.configMap.name for s in v.projected.sources if s.configMap and s.configMap.name]
        secrets += [s.secret.name for s in v.projected.sources if s.secret and s.secret.name]
    spc = (v.csi.volumeAttributes.get("secretProviderClass") or None) if v.csi else None
    return Volume(v.name, tuple(cms), tuple(secrets), spc)


def _template(tmpl: p.PodTemplateSpec | None, keep: frozenset[str]) -> PodTemplate:
    if tmpl is None:
        return PodTemplate()
    return PodTemplate(
        annotations={k: v for k, v in tmpl.metadata.annotations.items() if k in keep},
        containers=tuple(_container(c) for c in tmpl.spec.containers),
        init_containers=tuple(_container(c) for c in tmpl.spec.initContainers),
        volumes=tuple(
            _volume(v) for v in tmpl.spec.volumes if v.configMap or v.secret or v.projected or v.csi
        ),
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
        template = _template(obj.spec.jobTemplate.spec.template, keep)
        paused, ref = obj.spec.suspend, ""
    else:
        template = _template(obj.spec.template, keep)
        paused = obj.spec.paused
        ref = obj.spec.workloadRef.name if obj.spec.workloadRef else ""
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
        template_changed_at=p.last_write(meta, b'"f:template"', b'"f:jobTemplate"'),
        template_manager=p.last_writer(meta, b'"f:template"', b'"f:jobTemplate"'),
        status=None if isinstance(obj, p.CronJob) or status is None else status(obj),
        active=_job_running(obj) if kind == WorkloadKind.JOB and isinstance(obj, p.Workload) else 0,
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

    def __init__(self, keys: Keys) -> None:
        self.keys = keys
        self.workloads: dict[ObjectKey, Workload] = {}
        self._refs: dict[tuple[str, ResourceType, str], set[ObjectKey]] = defaultdict(set)
        self._named: dict[tuple[str, ResourceType], set[ObjectKey]] = defaultdict(set)
        #: (namespace, Deployment name) -> Rollouts whose workloadRef points at it
        self._borrowers: dict[tuple[str, str], set[ObjectKey]] = defaultdict(set)
        self._indexed: dict[
            ObjectKey, tuple[list[tuple[str, ResourceType, str]], list[tuple[str, ResourceType]]]
        ] = {}

    def __len__(self) -> int:
        return len(self.workloads)

    def put(self, workload: Workload) -> None:
        key = workload.key
        self.remove(key)
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
        if workload.workload_ref:
            self._borrowers[(workload.namespace, workload.workload_ref)].add(key)

    def remove(self, key: ObjectKey) -> None:
        old = self.workloads.pop(key, None)
        if old is not None and old.workload_ref:
            borrowers = self._borrowers.get((old.namespace, old.workload_ref))
            if borrowers is not None:
                borrowers.discard(key)
                if not borrowers:
                    del self._borrowers[(old.namespace, old.workload_ref)]
        refs, named = self._indexed.pop(key, ([], []))
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

    def candidates(self, namespace: str, rtype: ResourceType, name: str) -> list[Workload]:
        """Workloads that reference the resource or carry a named list for its type."""
        keys = set(self._refs.get((namespace, rtype, name), ()))
        keys |= self._named.get((namespace, rtype), set())
        for k in list(keys):  # Rollouts that borrow a candidate Deployment's template
            if k.kind == WorkloadKind.DEPLOYMENT:
                keys |= self._borrowers.get((namespace, k.name), set())
        return [self.workloads[k] for k in sorted(keys) if k in self.workloads]
