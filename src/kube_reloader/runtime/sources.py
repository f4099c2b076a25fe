"""What is watched: the reflectors built from the options and the kinds registry, each with
the transform that reduces its objects to what the rules read (hashes, never Secret data)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kube_reloader.core.annotations import Keys
from kube_reloader.core.objects import ResourceType
from kube_reloader.kube import contents, projections, resources
from kube_reloader.kube.client import Client
from kube_reloader.kube.watching import Reflector
from kube_reloader.runtime.cache import (
    ConfigEntry,
    WorkloadEntry,
    configmap_entry,
    content_kept,
    secret_entry,
    spc_status_entry,
    status_entry,
    workload_entry,
)
from kube_reloader.runtime.kinds import KindSpec
from kube_reloader.runtime.options import Options
from kube_reloader.runtime.stores import Stores

CONTENT_TYPES: dict[ResourceType, type[Any]] = {
    ResourceType.CONFIGMAP: contents.ConfigMapContent,
    ResourceType.SECRET: contents.SecretContent,
}


def scopes(options: Options) -> list[str | None]:
    """One reflector per watched namespace, or one cluster-wide."""
    return list(options.namespaces) if options.namespaces else [None]


#: (namespace, type, name) -> keep per-key digests? (`WorkloadIndex.wants_keys`)
WantsKeys = Callable[[str, ResourceType, str], bool]


def _reduced(
    rtype: ResourceType,
    obj: Any,
    keys: Keys,
    hash_key: bytes | None,
    *,
    per_key: bool,
    content: bytes = b"",
) -> ConfigEntry:
    if rtype is ResourceType.CONFIGMAP:
        return configmap_entry(obj, keys, hash_key, per_key=per_key, content=content)
    return secret_entry(obj, keys, hash_key, per_key=per_key, content=content)


def config_transform(
    rtype: ResourceType,
    keys: Keys,
    hash_key: bytes | None,
    wants_keys: WantsKeys = lambda _ns, _t, _n: False,
) -> Callable[[Any], ConfigEntry]:
    """The full reduction of a ConfigMap or Secret (a LIST's, an ADDED event's): no digest
    of its content's bytes is taken."""

    def transform(obj: Any) -> ConfigEntry:
        per_key = wants_keys(obj.metadata.namespace, rtype, obj.metadata.name)
        return _reduced(rtype, obj, keys, hash_key, per_key=per_key)

    return transform


def config_update(
    rtype: ResourceType,
    keys: Keys,
    hash_key: bytes | None,
    wants_keys: WantsKeys = lambda _ns, _t, _n: False,
) -> Callable[[Any, ConfigEntry], ConfigEntry | None]:
    """The reflector's reduction of a MODIFIED event, from the stored entry: the digest of
    the content's bytes is taken, and when it is the stored one's (a write to labels or
    annotations) the stored hash stands (`cache.content_kept`); otherwise the full reduction,
    keeping that digest for the next event. (The first MODIFIED event of an object listed
    or added is reduced in full.)"""

    def update(obj: Any, old: ConfigEntry) -> ConfigEntry | None:
        per_key = wants_keys(obj.metadata.namespace, rtype, obj.metadata.name)
        content = obj.digest()
        kept = content_kept(obj, old, keys, per_key=per_key, content=content)
        if kept is not None:
            return kept
        return _reduced(rtype, obj, keys, hash_key, per_key=per_key, content=content)

    return update


def configs(
    client: Client,
    options: Options,
    ns: str | None,
    wants_keys: WantsKeys = lambda _ns, _t, _n: False,
) -> list[Reflector[ConfigEntry]]:
    keys = options.plan.match.keys
    out: list[Reflector[ConfigEntry]] = []
    for rtype in options.resources:
        res = resources.CONFIGMAPS if rtype is ResourceType.CONFIGMAP else resources.SECRETS
        out.append(
            Reflector(
                client,
                res,
                type=CONTENT_TYPES[rtype],
                namespace=ns,
                label_selector=options.resource_label_selector or None,
                transform=config_transform(rtype, keys, options.hash_key, wants_keys),
                update=config_update(rtype, keys, options.hash_key, wants_keys),
                poll_interval=options.poll_interval,
            )
        )
    return out


def workloads(
    client: Client, options: Options, spec: KindSpec, ns: str | None
) -> Reflector[WorkloadEntry]:
    keys = options.plan.match.keys

    def transform(obj: Any) -> WorkloadEntry:
        return workload_entry(spec.kind, spec.workload(obj), keys, spec.status)

    def update(obj: Any, old: WorkloadEntry) -> WorkloadEntry | None:
        return status_entry(spec.kind, spec.workload(obj), old, keys, spec.status)

    return Reflector(
        client,
        spec.resource,
        type=spec.projection,
        namespace=ns,
        transform=transform,
        poll_interval=options.poll_interval,
        update=update,
    )


def namespaces(client: Client, options: Options) -> Reflector[projections.Object] | None:
    """Namespaces, watched for `--namespace-selector` and for the namespace policies
    (freeze, reload-window); not in `--namespaces` mode (no cluster-wide read there)."""
    if options.namespaces or not (options.namespace_selector or options.namespace_policies):
        return None
    return Reflector(
        client,
        resources.NAMESPACES,
        type=projections.Object,
        label_selector=options.namespace_selector,
    )


def spc_transform(keys: Keys) -> Callable[[Any], projections.Object]:
    keep = keys.resource_keys()

    def transform(obj: Any) -> projections.Object:
        meta = obj.metadata
        return projections.Object(
            projections.ObjectMeta(
                name=meta.name,
                namespace=meta.namespace,
                uid=meta.uid,
                resourceVersion=meta.resourceVersion,
                annotations={k: v for k, v in meta.annotations.items() if k in keep},
            )
        )

    return transform


def spc_classes(client: Client, options: Options, ns: str | None) -> Reflector[projections.Object]:
    return Reflector(
        client,
        resources.SECRETPROVIDERCLASSES,
        type=projections.Object,
        namespace=ns,
        transform=spc_transform(options.plan.match.keys),
    )


def spc_statuses(client: Client, options: Options, ns: str | None) -> Reflector[ConfigEntry]:
    return Reflector(
        client,
        resources.SECRETPROVIDERCLASSPODSTATUSES,
        type=projections.SpcPodStatus,
        namespace=ns,
        transform=functools.partial(spc_status_entry, hash_key=options.hash_key),
    )


def build(client: Client, options: Options, stores: Stores) -> None:
    """The reflectors that run from the start, into `stores` (optional kinds are added when
    their APIs are served: `optionalapis`)."""
    for ns in scopes(options):
        stores.configs += configs(client, options, ns, stores.index.wants_keys)
        for kind in options.workload_kinds:
            spec = options.kinds[kind]
            if not spec.discovered:
                stores.workloads.append(workloads(client, options, spec, ns))
    stores.namespaces = namespaces(client, options)
    stores.namespaces_select = bool(options.namespace_selector)
