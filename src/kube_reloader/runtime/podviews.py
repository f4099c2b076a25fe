"""Listed pods as the core's rules read them: `core.evicting.Pod` for a rotation (and the
catch-up's look at pods), `core.inplace.Pod` for the in-place strategies. The projection
(`kube.pods.PodObject`) is Kubernetes' shape; these are the values the decisions take.
"""

from __future__ import annotations

from kube_reloader.core import evicting, inplace
from kube_reloader.kube.pods import PodObject
from kube_reloader.kube.projections import epoch


def view(pod: PodObject) -> evicting.Pod:
    """The rotation's view of `pod`. A creation time that does not parse counts as the
    oldest (the pod is replaced rather than left on old content)."""
    meta = pod.metadata
    ready = next((c for c in pod.status.conditions if c.type == "Ready"), None)
    is_ready = ready is not None and ready.status == "True"
    return evicting.Pod(
        uid=meta.uid,
        name=meta.name,
        created=epoch(meta.creationTimestamp) or 0.0,
        ready=is_ready,
        ready_since=epoch(ready.lastTransitionTime) if ready is not None and is_ready else None,
        terminating=meta.deletionTimestamp is not None,
        ordinal=evicting.ordinal_of(meta.name, meta.labels),
    )


def in_place_view(pod: PodObject, annotation: str) -> inplace.Pod:
    """The in-place rotation's view of `pod`; `annotation`: the one its strategy writes."""
    base = view(pod)
    starts = [c.last_start() for c in pod.status.containerStatuses]
    started = (
        None
        if not starts or any(s is None for s in starts)
        else min(s for s in starts if s is not None)
    )
    return inplace.Pod(
        uid=base.uid,
        name=base.name,
        ready=base.ready,
        terminating=base.terminating,
        started=started,
        request=pod.metadata.annotations.get(annotation),
        ordinal=base.ordinal,
        restarts=sum(c.restartCount for c in pod.status.containerStatuses),
    )
