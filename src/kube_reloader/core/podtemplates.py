"""The one reader of a workload's pod template as plain JSON data (a manifest, an API answer):
where the template lives in the object, and which ConfigMaps, Secrets and SecretProviderClasses
its containers and volumes name, through which field.

`references` (the `PodTemplate` value the rules read), `explaining` (references with their
fields) and `linting` all read pod templates through it. It is total: a field of the wrong
shape reads as absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kube_reloader.core.kindtraits import Path, traits
from kube_reloader.core.objects import ResourceType
from kube_reloader.core.records import record


def template_path(kind: str) -> Path:
    """The path of a workload's pod template, for any kind name."""
    return traits(kind).template_path


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one."""
    return value if isinstance(value, Mapping) else {}


def mappings(value: Any) -> tuple[Mapping[str, Any], ...]:
    """The mappings in a list (other entries skipped); empty if `value` is not a list."""
    if not isinstance(value, list | tuple):
        return ()
    return tuple(v for v in value if isinstance(v, Mapping))


def template_of(obj: Any) -> Mapping[str, Any]:
    """The pod template of a workload object (by its `kind`), or an empty mapping."""
    node = mapping(obj)
    for key in template_path(str(node.get("kind") or "")):
        node = mapping(node.get(key))
    return node


def pod_spec(template: Any) -> Mapping[str, Any]:
    return mapping(mapping(template).get("spec"))


def template_annotations(template: Any) -> Mapping[str, Any]:
    return mapping(mapping(mapping(template).get("metadata")).get("annotations"))


def containers(template: Any) -> tuple[Mapping[str, Any], ...]:
    return mappings(pod_spec(template).get("containers"))


def init_containers(template: Any) -> tuple[Mapping[str, Any], ...]:
    return mappings(pod_spec(template).get("initContainers"))


def volumes(template: Any) -> tuple[Mapping[str, Any], ...]:
    return mappings(pod_spec(template).get("volumes"))


@record
class Source:
    """A resource named by a volume or a container, and the field that names it: for a volume
    `configMap`, `secret`, `projected` or `csi`; for a container e.g. `envFrom.secretRef`."""

    rtype: ResourceType
    name: str
    field: str
    #: the keys it reads: a keyRef's key, a volume source's `items` keys; None: every key
    items: tuple[str, ...] | None = None


def _name(value: Any, key: str) -> str | None:
    name = mapping(value).get(key)
    return str(name) if name else None


def _item_keys(source: Any) -> tuple[str, ...] | None:
    """The keys of a volume source's `items` (None when it lists none: every key)."""
    items = mappings(mapping(source).get("items"))
    keys = tuple(str(i.get("key")) for i in items if isinstance(i.get("key"), str))
    return keys or None


def volume_sources(volume: Mapping[str, Any]) -> tuple[Source, ...]:
    """What one volume reads, in order: configMap, secret, each projected source, CSI class."""
    out: list[Source] = []
    cm, sec = volume.get("configMap"), volume.get("secret")
    if name := _name(cm, "name"):
        out.append(Source(ResourceType.CONFIGMAP, name, "configMap", _item_keys(cm)))
    if name := _name(sec, "secretName"):
        out.append(Source(ResourceType.SECRET, name, "secret", _item_keys(sec)))
    for src in mappings(mapping(volume.get("projected")).get("sources")):
        if name := _name(src.get("configMap"), "name"):
            items = _item_keys(src.get("configMap"))
            out.append(Source(ResourceType.CONFIGMAP, name, "projected", items))
        if name := _name(src.get("secret"), "name"):
            items = _item_keys(src.get("secret"))
            out.append(Source(ResourceType.SECRET, name, "projected", items))
    attributes = mapping(mapping(volume.get("csi")).get("volumeAttributes"))
    if name := _name(attributes, "secretProviderClass"):
        out.append(Source(ResourceType.SECRETPROVIDERCLASS, name, "csi"))
    return tuple(out)


def env_sources(var: Mapping[str, Any]) -> tuple[Source, ...]:
    """What one `env` entry reads through `valueFrom` (a ConfigMap key, a Secret key)."""
    value_from = mapping(var.get("valueFrom"))
    base = f"env[{var.get('name')}].valueFrom"
    out: list[Source] = []
    for field, rtype in (
        ("configMapKeyRef", ResourceType.CONFIGMAP),
        ("secretKeyRef", ResourceType.SECRET),
    ):
        ref = mapping(value_from.get(field))
        if name := _name(ref, "name"):
            key = ref.get("key")
            items = (key,) if isinstance(key, str) else None
            out.append(Source(rtype, name, f"{base}.{field}", items))
    return tuple(out)


def env_from_sources(container: Mapping[str, Any]) -> tuple[Source, ...]:
    """What a container's `envFrom` reads, in order."""
    out: list[Source] = []
    for entry in mappings(container.get("envFrom")):
        if name := _name(entry.get("configMapRef"), "name"):
            out.append(Source(ResourceType.CONFIGMAP, name, "envFrom.configMapRef"))
        if name := _name(entry.get("secretRef"), "name"):
            out.append(Source(ResourceType.SECRET, name, "envFrom.secretRef"))
    return tuple(out)


def mounts(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    return mappings(container.get("volumeMounts"))


def env(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], ...]:
    return mappings(container.get("env"))
