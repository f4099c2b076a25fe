"""Which ConfigMaps, Secrets and SecretProviderClasses a pod template uses, and which container
receives the reload env var (Reloader v1's algorithm, compat-spec §2.1).

A pod template is reduced to a small frozen `PodTemplate` value: container names, their env
references and mounts, and the volumes' sources. That is all the rules need, and all the
controller keeps per workload.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kube_reloader.core.objects import ResourceType

#: Only env vars whose name starts with this keep their value (the ones Reloader writes).
ENV_PREFIX = "STAKATER_"


@dataclass(frozen=True, slots=True)
class EnvVar:
    name: str
    value: str | None = None  # kept only for STAKATER_* variables
    configmap: str | None = None  # valueFrom.configMapKeyRef.name
    secret: str | None = None  # valueFrom.secretKeyRef.name


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class Volume:
    name: str
    configmaps: tuple[str, ...] = ()  # configMap.name and projected configMap sources
    secrets: tuple[str, ...] = ()  # secret.secretName and projected secret sources
    spc: str | None = None  # csi.volumeAttributes.secretProviderClass

    def sources(self, rtype: ResourceType, name: str) -> bool:
        if rtype is ResourceType.CONFIGMAP:
            return name in self.configmaps
        if rtype is ResourceType.SECRET:
            return name in self.secrets
        return self.spc == name


@dataclass(frozen=True, slots=True)
class PodTemplate:
    annotations: Mapping[str, str] = field(default_factory=dict)
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    volumes: tuple[Volume, ...] = ()

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


@dataclass(frozen=True, slots=True)
class Target:
    """The container that receives the env var, and how it was chosen (for `explain`)."""

    container: str | None
    how: str


def target_container(
    template: PodTemplate, rtype: ResourceType, name: str, *, auto: bool
) -> Target:
    """compat-spec §2.1, step by step."""
    cs, inits = template.containers, template.init_containers
    first = cs[0].name if cs else None
    volume = next((v for v in template.volumes if v.sources(rtype, name)), None)
    if volume is not None:
        for c in cs:
            if volume.name in c.mounts:
                return Target(c.name, f"container {c.name!r} mounts volume {volume.name!r}")
        if any(volume.name in c.mounts for c in inits):
            return Target(
                first, f"an init container mounts volume {volume.name!r}; first container"
            )
    for c in cs:
        if c.env_refers(rtype, name):
            return Target(c.name, f"container {c.name!r} references it in env/envFrom")
    if any(c.env_refers(rtype, name) for c in inits):
        return Target(first, "an init container references it in env/envFrom; first container")
    if not auto:
        return Target(first, "named in a reload annotation; first container")
    return Target(None, "no container mounts or references it")


# ----------------------------------------------------------------------- from manifests


def pod_template_from_manifest(template: Mapping[str, Any] | None) -> PodTemplate:
    """Reduce a pod template (`spec.template` as plain JSON data) to a `PodTemplate`."""
    template = template or {}
    meta = template.get("metadata") or {}
    spec = template.get("spec") or {}
    return PodTemplate(
        annotations=dict(meta.get("annotations") or {}),
        containers=tuple(_container(c) for c in spec.get("containers") or ()),
        init_containers=tuple(_container(c) for c in spec.get("initContainers") or ()),
        volumes=tuple(_volume(v) for v in spec.get("volumes") or ()),
    )


def _container(raw: Mapping[str, Any]) -> Container:
    env = []
    for var in raw.get("env") or ():
        name = str(var.get("name") or "")
        value_from = var.get("valueFrom") or {}
        cm = (value_from.get("configMapKeyRef") or {}).get("name")
        sec = (value_from.get("secretKeyRef") or {}).get("name")
        value = var.get("value") if name.startswith(ENV_PREFIX) else None
        env.append(EnvVar(name, None if value is None else str(value), cm, sec))
    env_from = raw.get("envFrom") or ()
    return Container(
        name=str(raw.get("name") or ""),
        env=tuple(env),
        env_from_configmaps=_names(e.get("configMapRef") for e in env_from),
        env_from_secrets=_names(e.get("secretRef") for e in env_from),
        mounts=tuple(str(m.get("name") or "") for m in raw.get("volumeMounts") or ()),
    )


def _names(refs: Iterable[Mapping[str, Any] | None]) -> tuple[str, ...]:
    return tuple(str(r["name"]) for r in refs if r and r.get("name"))


def _volume(raw: Mapping[str, Any]) -> Volume:
    cms: list[str] = []
    secrets: list[str] = []
    if (raw.get("configMap") or {}).get("name"):
        cms.append(str(raw["configMap"]["name"]))
    if (raw.get("secret") or {}).get("secretName"):
        secrets.append(str(raw["secret"]["secretName"]))
    for src in (raw.get("projected") or {}).get("sources") or ():
        if (src.get("configMap") or {}).get("name"):
            cms.append(str(src["configMap"]["name"]))
        if (src.get("secret") or {}).get("name"):
            secrets.append(str(src["secret"]["name"]))
    csi = raw.get("csi")
    spc = None
    if csi is not None:
        spc = (csi.get("volumeAttributes") or {}).get("secretProviderClass") or None
    return Volume(str(raw.get("name") or ""), tuple(cms), tuple(secrets), spc)
