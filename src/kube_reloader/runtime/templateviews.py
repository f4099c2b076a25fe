"""A workload's pod template as the core's rules read it: `core.references.PodTemplate`,
reduced from the projection (`kube.projections.PodTemplateSpec`) to the references that
matter: each container's env vars and envFrom sources, the volumes of ConfigMaps, Secrets,
projected sources and CSI secret provider classes (with their item keys), and the annotations
kept.
"""

from __future__ import annotations

from kube_reloader.core.references import ENV_PREFIX, Container, EnvVar, PodTemplate, Volume
from kube_reloader.kube import projections as p


def _env(v: p.EnvVar) -> EnvVar:
    value = v.value if v.name.startswith(ENV_PREFIX) else None
    cm = v.valueFrom.configMapKeyRef if v.valueFrom else None
    sec = v.valueFrom.secretKeyRef if v.valueFrom else None
    # a reference without a name reads nothing (as `core.podtemplates` reads a manifest)
    cm = cm if cm is not None and cm.name else None
    sec = sec if sec is not None and sec.name else None
    ref = cm or sec
    return EnvVar(
        v.name,
        value,
        cm.name if cm else None,
        sec.name if sec else None,
        ref.key if ref is not None and ref.key else None,
    )


def _items(items: tuple[p.KeyToPath, ...]) -> tuple[str, ...] | None:
    return tuple(i.key for i in items) or None


def _container(c: p.Container) -> Container:
    env = tuple(_env(v) for v in c.env)
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
    cm, sec = v.configMap, v.secret
    cms = [(cm.name, _items(cm.items))] if cm and cm.name else []
    secrets = [(sec.secretName, _items(sec.items))] if sec and sec.secretName else []
    if v.projected:
        cms += [
            (s.configMap.name, _items(s.configMap.items))
            for s in v.projected.sources
            if s.configMap and s.configMap.name
        ]
        secrets += [
            (s.secret.name, _items(s.secret.items))
            for s in v.projected.sources
            if s.secret and s.secret.name
        ]
    spc = (v.csi.volumeAttributes.get("secretProviderClass") or None) if v.csi else None
    return Volume(
        v.name,
        tuple(n for n, _ in cms),
        tuple(n for n, _ in secrets),
        spc,
        _item_lists(cms),
        _item_lists(secrets),
    )


def _item_lists(
    sources: list[tuple[str, tuple[str, ...] | None]],
) -> tuple[tuple[str, ...] | None, ...]:
    """Per source its item keys; () when no source lists items (the common case)."""
    if all(items is None for _, items in sources):
        return ()
    return tuple(items for _, items in sources)


def pod_template(tmpl: p.PodTemplateSpec | None, keep: frozenset[str]) -> PodTemplate:
    """`tmpl` as the core reads it, with only the annotations named in `keep`."""
    if tmpl is None:
        return PodTemplate()
    return PodTemplate(
        annotations={k: v for k, v in tmpl.metadata.annotations.items() if k in keep},
        containers=tuple(_container(c) for c in tmpl.spec.containers),
        init_containers=tuple(_container(c) for c in tmpl.spec.initContainers),
        volumes=tuple(
            vol
            for vol in (
                _volume(v)
                for v in tmpl.spec.volumes
                if v.configMap or v.secret or v.projected or v.csi
            )
            if vol.used
        ),
    )
