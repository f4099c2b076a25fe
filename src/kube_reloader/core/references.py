"""Which ConfigMaps, Secrets and SecretProviderClasses a pod template uses, and which container
receives the reload env var (Reloader v1's algorithm, compat-spec §2.1).

A pod template is reduced to a small frozen `PodTemplate` value: container names, their env
references and mounts, and the volumes' sources. That is all the rules need, and all the
controller keeps per workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import field
from typing import Any

from kube_reloader.core import podtemplates as pt
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.records import record

#: Only env vars whose name starts with this keep their value (the ones Reloader writes).
ENV_PREFIX = "STAKATER_"


@record
class EnvVar:
    name: str
    value: str | None = None  # kept only for STAKATER_* variables
    configmap: str | None = None  # valueFrom.configMapKeyRef.name
    secret: str | None = None  # valueFrom.secretKeyRef.name
    key: str | None = None  # the key of configMapKeyRef / secretKeyRef


@record
class Container:
    name: str
    env: tuple[EnvVar, ...] = ()
    env_from_configmaps: tuple[str, ...] = ()
    env_from_secrets: tuple[str, ...] = ()
    mounts: tuple[str, ...] = ()

    def env_value(self, name: str) -> str | None:
        for var in self.env:
            if var.name == name:
                return var.value
        return None

    def env_index(self, name: str) -> int | None:
        for i, var in enumerate(self.env):
            if var.name == name:
                return i
        return None

    def env_refers(self, rtype: ResourceType, name: str) -> bool:
        """v1 checks a container's env before its envFrom; either counts."""
        if rtype is ResourceType.CONFIGMAP:
            return any(v.configmap == name for v in self.env) or name in self.env_from_configmaps
        if rtype is ResourceType.SECRET:
            return any(v.secret == name for v in self.env) or name in self.env_from_secrets
        return False


@record
class Volume:
    name: str
    configmaps: tuple[str, ...] = ()  # configMap.name and projected configMap sources
    secrets: tuple[str, ...] = ()  # secret.secretName and projected secret sources
    spc: str | None = None  # csi.volumeAttributes.secretProviderClass
    #: per entry of `configmaps` / `secrets`: the keys of its `items`, or None (every key);
    #: empty when no source lists items
    configmap_items: tuple[tuple[str, ...] | None, ...] = ()
    secret_items: tuple[tuple[str, ...] | None, ...] = ()

    @property
    def used(self) -> bool:
        """Whether it names anything the rules read (an emptyDir, or a projected volume of
        service-account tokens alone, names nothing: both readers leave it out)."""
        return bool(self.configmaps or self.secrets or self.spc)

    def items_of(self, rtype: ResourceType) -> list[tuple[str, tuple[str, ...] | None]]:
        """Each source of the type with the keys its `items` project (None: every key)."""
        if rtype is ResourceType.CONFIGMAP:
            names, items = self.configmaps, self.configmap_items
        elif rtype is ResourceType.SECRET:
            names, items = self.secrets, self.secret_items
        else:
            return []
        return [(n, items[i] if i < len(items) else None) for i, n in enumerate(names)]

    def sources(self, rtype: ResourceType, name: str) -> bool:
        if rtype is ResourceType.CONFIGMAP:
            return name in self.configmaps
        if rtype is ResourceType.SECRET:
            return name in self.secrets
        return self.spc == name


@record
class PodTemplate:
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    volumes: tuple[Volume, ...] = ()
    #: `target_container`'s answers, built on first use (one pass over the template: a
    #: template with thousands of references costs linear time, not quadratic)
    _targets: dict[tuple[ResourceType, str], Target] | None = field(
        default=None, init=False, compare=False, hash=False, repr=False
    )

    def references(self) -> frozenset[tuple[ResourceType, str]]:
        """Every resource the template uses in any way (for the reverse index).

        Wider than v1's target-container test on purpose: an unmounted volume is included,
        so the index never misses a candidate; the decision then applies v1's exact rules.
        """
        refs: set[tuple[ResourceType, str]] = set()
        for vol in self.volumes:
            refs.update((ResourceType.CONFIGMAP, n) for n in vol.configmaps)
            refs.update((ResourceType.SECRET, n) for n in vol.secrets)
            if vol.spc:
                refs.add((ResourceType.SECRETPROVIDERCLASS, vol.spc))
        for c in (*self.containers, *self.init_containers):
            for var in c.env:
                if var.configmap:
                    refs.add((ResourceType.CONFIGMAP, var.configmap))
                if var.secret:
                    refs.add((ResourceType.SECRET, var.secret))
            refs.update((ResourceType.CONFIGMAP, n) for n in c.env_from_configmaps)
            refs.update((ResourceType.SECRET, n) for n in c.env_from_secrets)
        return frozenset(refs)

    def container(self, name: str) -> tuple[int, Container] | None:
        for i, c in enumerate(self.containers):
            if c.name == name:
                return i, c
        return None


@record
class Target:
    """The container that receives the env var, and how it was chosen (for `explain`)."""

    container: str | None
    how: str


def target_container(
    template: PodTemplate, rtype: ResourceType, name: str, *, auto: bool
) -> Target:
    """compat-spec §2.1, step by step (answered from the template's index)."""
    targets = template._targets
    if targets is None:
        targets = _target_index(template)
        object.__setattr__(template, "_targets", targets)  # a cache, not a field's value
    found = targets.get((rtype, name))
    if found is not None:
        return found
    if not auto:
        first = template.containers[0].name if template.containers else None
        return Target(first, "named in a reload annotation; first container")
    return Target(None, "no container mounts or references it")


def _target_index(template: PodTemplate) -> dict[tuple[ResourceType, str], Target]:
    """Every referenced resource's target container, by compat-spec §2.1: the first volume
    that sources it, if a container (else an init container: the first container) mounts
    it; else the first container referencing it in env/envFrom (else an init container:
    the first container)."""
    cs, inits = template.containers, template.init_containers
    first = cs[0].name if cs else None
    volume_of: dict[tuple[ResourceType, str], Volume] = {}
    for v in template.volumes:
        for n in v.configmaps:
            volume_of.setdefault((ResourceType.CONFIGMAP, n), v)
        for n in v.secrets:
            volume_of.setdefault((ResourceType.SECRET, n), v)
        if v.spc is not None:
            volume_of.setdefault((ResourceType.SECRETPROVIDERCLASS, v.spc), v)
    mounted_by: dict[str, str] = {}
    for c in cs:
        for m in c.mounts:
            mounted_by.setdefault(m, c.name)
    init_mounts = {m for c in inits for m in c.mounts}
    env_of: dict[tuple[ResourceType, str], str] = {}
    for c in cs:
        for ref in _env_refs(c):
            env_of.setdefault(ref, c.name)
    init_env = {ref for c in inits for ref in _env_refs(c)}
    out: dict[tuple[ResourceType, str], Target] = {}
    for ref in {*volume_of, *env_of, *init_env}:
        volume = volume_of.get(ref)
        if volume is not None and volume.name in mounted_by:
            c_name = mounted_by[volume.name]
            out[ref] = Target(c_name, f"container {c_name!r} mounts volume {volume.name!r}")
        elif volume is not None and volume.name in init_mounts:
            out[ref] = Target(
                first, f"an init container mounts volume {volume.name!r}; first container"
            )
        elif ref in env_of:
            out[ref] = Target(
                env_of[ref], f"container {env_of[ref]!r} references it in env/envFrom"
            )
        elif ref in init_env:
            out[ref] = Target(
                first, "an init container references it in env/envFrom; first container"
            )
    return out


def _env_refs(c: Container) -> Iterable[tuple[ResourceType, str]]:
    for var in c.env:
        if var.configmap:
            yield ResourceType.CONFIGMAP, var.configmap
        if var.secret:
            yield ResourceType.SECRET, var.secret
    for n in c.env_from_configmaps:
        yield ResourceType.CONFIGMAP, n
    for n in c.env_from_secrets:
        yield ResourceType.SECRET, n


# ----------------------------------------------------------------------- from manifests


def pod_template_from_manifest(template: Mapping[str, Any] | None) -> PodTemplate:
    """Reduce a pod template (`spec.template` as plain JSON data) to a `PodTemplate`."""
    return PodTemplate(
        annotations=dict(pt.template_annotations(template)),
        containers=tuple(_container(c) for c in pt.containers(template)),
        init_containers=tuple(_container(c) for c in pt.init_containers(template)),
        volumes=tuple(v for v in map(_volume, pt.volumes(template)) if v.used),
    )


def _container(raw: Mapping[str, Any]) -> Container:
    env = []
    for var in pt.env(raw):
        name = str(var.get("name") or "")
        refs = pt.env_sources(var)
        cm = next((s.name for s in refs if s.rtype is ResourceType.CONFIGMAP), None)
        sec = next((s.name for s in refs if s.rtype is ResourceType.SECRET), None)
        key = next((s.items[0] for s in refs if s.items), None)
        value = var.get("value") if name.startswith(ENV_PREFIX) else None
        env.append(EnvVar(name, None if value is None else str(value), cm, sec, key))
    env_from = pt.env_from_sources(raw)
    return Container(
        name=str(raw.get("name") or ""),
        env=tuple(env),
        env_from_configmaps=_names(env_from, ResourceType.CONFIGMAP),
        env_from_secrets=_names(env_from, ResourceType.SECRET),
        mounts=tuple(str(m.get("name") or "") for m in pt.mounts(raw)),
    )


def _names(sources: Iterable[pt.Source], rtype: ResourceType) -> tuple[str, ...]:
    return tuple(s.name for s in sources if s.rtype is rtype)


def _volume(raw: Mapping[str, Any]) -> Volume:
    sources = pt.volume_sources(raw)
    spc = next((s.name for s in sources if s.rtype is ResourceType.SECRETPROVIDERCLASS), None)
    cms = [s for s in sources if s.rtype is ResourceType.CONFIGMAP]
    secrets = [s for s in sources if s.rtype is ResourceType.SECRET]
    return Volume(
        str(raw.get("name") or ""),
        tuple(s.name for s in cms),
        tuple(s.name for s in secrets),
        spc,
        _items(cms),
        _items(secrets),
    )


def _items(sources: list[pt.Source]) -> tuple[tuple[str, ...] | None, ...]:
    if all(s.items is None for s in sources):
        return ()
    return tuple(s.items for s in sources)


@record
class Reference:
    """A ConfigMap or Secret reference as `explain` shows it: the container and the field
    it comes through."""

    rtype: str
    name: str
    container: str
    field: str


def references_with_fields(template: Mapping[str, Any]) -> list[Reference]:
    """Every ConfigMap and Secret reference, with the container and the field it comes
    through (as `explain` lists them): per container, its mounted volumes, env and envFrom;
    then unmounted volumes."""
    out: list[Reference] = []
    volumes = {v.get("name"): v for v in pt.volumes(template)}
    kept = (ResourceType.CONFIGMAP, ResourceType.SECRET)
    groups = ((pt.containers(template), ""), (pt.init_containers(template), "init container "))
    mounted = set()
    for group, prefix in groups:
        for c in group:
            cname = f"{prefix}{c.get('name')}"
            for m in pt.mounts(c):
                mounted.add(m.get("name"))
                path = f"volumeMounts[{m.get('name')}] -> volume"
                out += [
                    Reference(s.rtype.value, s.name, cname, f"{path}.{s.field}")
                    for s in pt.volume_sources(volumes.get(m.get("name")) or {})
                    if s.rtype in kept
                ]
            sources = [s for e in pt.env(c) for s in pt.env_sources(e)]
            sources += pt.env_from_sources(c)
            out += [Reference(s.rtype.value, s.name, cname, s.field) for s in sources]
    for vname, vol in volumes.items():
        if vname not in mounted:
            out += [
                Reference(s.rtype.value, s.name, "(none)", f"volume {vname} (not mounted)")
                for s in pt.volume_sources(vol)
                if s.field in ("configMap", "secret")  # projected ones are not listed here
            ]
    return out
