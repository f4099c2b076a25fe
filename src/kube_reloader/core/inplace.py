"""In-place reloads: a workload's pods are reloaded without a new pod, as values.

Two strategies (`kube-reloader.io/strategy`), both carried out by the agent sidecar
(`kube-reloader agent`, no API credentials) that reads its own pod's annotations through a
downward-API file:

* `restart-in-place`: kube-reloader sets the pod annotation `RESTART` to a token; the agent
  exits with `RESTART_EXIT_CODE`, and the sidecar's restart rule (`RestartAllContainers`,
  Kubernetes 1.36) has the kubelet restart every container of the pod in place: same pod,
  same UID, IP and volumes, no ReplicaSet change. A pod is current once each of its
  containers started after the change.
* `signal`: kube-reloader sets the pod annotation `SIGNAL_REQUEST` to a request naming the
  signal and, for each volume that mounts a changed config, the digest of the files the
  kubelet will write there (`files_digest`). The agent waits until what is mounted has that
  digest (the kubelet refreshes mounted ConfigMaps and Secrets with a delay), then signals the
  application (`shareProcessNamespace: true`). A pod is current once it carries the request.

`next_step` is the policy, one call per look at the workload's pods: one pod at a time,
never while a pod is short or one is still restarting, a pod that serves nothing first, the
highest StatefulSet ordinal first; the targets follow from the cluster alone (level-based),
so a restarted controller carries on where the last one stopped.

Pure: no I/O and no clock; times are epoch seconds passed in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import signal
from collections.abc import Iterable, Mapping
from enum import StrEnum

from kube_reloader.core.annotations import SIGNAL
from kube_reloader.core.records import record

#: pod annotations kube-reloader writes and the agent reads
RESTART = "kube-reloader.io/restart"
SIGNAL_REQUEST = "kube-reloader.io/signal-request"
DEFAULT_SIGNAL = "SIGHUP"
#: the exit code the agent leaves with to ask for a restart of the pod's containers
RESTART_EXIT_CODE = 75
#: signals the agent may send: the ones applications take as "reload" (never one whose
#: default action ends the process on purpose, SIGTERM, SIGINT, SIGQUIT, SIGKILL)
SIGNALS = frozenset({"SIGHUP", "SIGUSR1", "SIGUSR2", "SIGWINCH"})
#: a signal request's value for a volume holding Secrets: the agent waits until the
#: volume's files differ from what the application last loaded (no digest of Secret content
#: is ever published on a pod, where readers of pods could test guesses against it)
CHANGED = "changed"
#: seconds a restart may take (annotation written, containers not started again yet) before
#: the token is written again with the next attempt (an agent restarted on its own in between
#: took the first one as its starting point)
RESTART_PATIENCE = 60.0
#: seconds after a signal request before the next pod: the kubelet's pod sync that brings
#: the new annotation and files (an annotation change syncs the pod at once), the signal, and
#: the application's reload showing in its readiness
SIGNAL_SETTLE = 5.0
MAX_REQUEST_TEXT = 4096


class Mode(StrEnum):
    RESTART = "restart-in-place"
    SIGNAL = "signal"


def parse_signal(text: str) -> str:
    """A signal name the agent may send (`SIGHUP`, or `HUP`); ValueError otherwise."""
    name = text if text.startswith("SIG") else "SIG" + text
    if name not in SIGNALS:
        raise ValueError(
            f"invalid {SIGNAL} {text[:40]!r}: want one of {', '.join(sorted(SIGNALS))}"
        )
    return name


def signal_number(name: str) -> int:
    return int(getattr(signal, parse_signal(name)))


def files_digest(contents: Iterable[bytes]) -> str:
    """The digest of a mounted volume's files: the sorted SHA-256s of their contents, hashed.
    Paths are left out on purpose: the agent sees the files under the names `items` gave
    them, kube-reloader sees the keys; both see the same bytes."""
    parts = sorted(hashlib.sha256(c).hexdigest() for c in contents)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def restart_token(changed_at: float, attempt: int = 0) -> str:
    return f"{math.floor(changed_at)}-{attempt}"


def token_change(token: str | None) -> int | None:
    """The change time a restart token was written for (None when unreadable)."""
    head = (token or "").partition("-")[0]
    return int(head) if head.isascii() and head.isdigit() and len(head) <= 12 else None


def token_attempt(token: str | None) -> int:
    """The attempt a restart token carries (0 when unreadable: tokens are hostile input)."""
    tail = (token or "").partition("-")[2]
    return int(tail) if tail.isascii() and tail.isdigit() and len(tail) <= 6 else 0


def signal_request(sig: str, digests: Mapping[str, str], change: str = "") -> str:
    """The request's text. `change` tells one change from the next where a volume holding a
    Secret is named `CHANGED` (not digested): without it two changes of the same Secret would
    ask with the same text, and a pod (and its agent) that served the first would take the
    second as served. Requests that digest every volume need none, and carry none."""
    doc: dict[str, object] = {"signal": sig, "digests": dict(sorted(digests.items()))}
    if change and CHANGED in digests.values():
        doc["change"] = change
    return json.dumps(doc, separators=(",", ":"))


def change_id(changed_at: float, contents: Iterable[tuple[str, str, str]], key: bytes) -> str:
    """A short identifier of a change: its second and the (type, name, content hash) of each
    config it changed, keyed with `key` (the controller process's own random key), so that
    nothing of a Secret's content can be tested against it. Another process gives the same
    change another identifier: its agents then wait for files newer than those they loaded,
    so no change is ever signalled twice."""
    text = json.dumps([math.floor(changed_at), sorted(contents)], separators=(",", ":"))
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()[:16]


def parse_request(text: str) -> tuple[str, dict[str, str]] | None:
    """(signal, digests by volume) of a request; None when unreadable (the agent then does
    nothing: a request it cannot read is never a reason to signal)."""
    if len(text) > MAX_REQUEST_TEXT:
        return None
    try:
        doc = json.loads(text)
        sig = parse_signal(str(doc["signal"]))
        digests = doc.get("digests", {})
        if not isinstance(digests, dict):
            return None
        return sig, {str(k): str(v) for k, v in digests.items()}
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError):
        return None


@record
class Pod:
    """What an in-place rotation needs of a pod."""

    uid: str
    name: str
    ready: bool = False
    terminating: bool = False
    #: the earliest of its regular containers' latest starts (a crash-looping container's is
    #: its last run's), epoch seconds; None while one never started
    started: float | None = None
    #: its `RESTART` / `SIGNAL_REQUEST` annotation
    request: str | None = None
    ordinal: int | None = None
    #: its containers' restarts, summed
    restarts: int = 0


class Phase(StrEnum):
    ACT = "act"
    WAIT = "wait"
    DONE = "done"


@record
class Step:
    phase: Phase
    pod: Pod | None = None
    #: the annotation value to write on `pod`
    value: str = ""
    remaining: int = 0
    reason: str = ""


def current(pod: Pod, mode: Mode, want: str, changed_at: float, restarted: frozenset[str]) -> bool:
    """Whether `pod` has the change: its containers all started after it (whole seconds: one
    started in the change's own second may have read the old content, so it counts as
    older), or it restarted since this rotation asked it (`restarted`: a node clock behind
    the API server's cannot make it look older), or (`signal`) it carries the request."""
    if mode is Mode.SIGNAL and pod.request == want:
        return True
    if mode is Mode.RESTART and pod.uid in restarted:
        return True
    return pod.started is not None and pod.started >= math.floor(changed_at) + 1


def next_step(
    pods: Iterable[Pod],
    mode: Mode,
    want: str,
    changed_at: float,
    now: float,
    *,
    replicas: int,
    started: float,
    ordered: bool = False,
    last_action: float | None = None,
    pending: frozenset[str] = frozenset(),
    restarted: frozenset[str] = frozenset(),
) -> Step:
    """What to do now. `want`: the annotation value of this change (a restart token of
    attempt 0, or the signal request); `started`: when this rotation began; `last_action`:
    when it last wrote a pod; `pending`: pods it asked to restart that have not yet (whatever
    change they were asked for: never two at once); `restarted`: pods that restarted since it
    asked them, for this change."""
    live = [p for p in pods if not p.terminating]
    todo = [p for p in live if not current(p, mode, want, changed_at, restarted)]
    ready = sum(1 for p in live if p.ready)
    short = max(0, replicas - ready)
    settling = mode is Mode.SIGNAL and last_action is not None and now - last_action < SIGNAL_SETTLE
    if mode is Mode.RESTART:
        asked = [p for p in live if p.uid in pending and p.uid not in restarted]
        asked += [p for p in todo if token_change(p.request) == math.floor(changed_at)]
        if asked:  # written, its containers not started again yet: one at a time
            p = asked[0]
            # asked by an earlier run maybe: patience counts from this one's start at least
            if now - max(last_action or 0.0, started) > RESTART_PATIENCE:
                token = restart_token(changed_at, token_attempt(p.request) + 1)
                again = f"{p.name} did not restart; asking again"
                return Step(Phase.ACT, p, token, len(todo), again)
            return Step(Phase.WAIT, remaining=len(todo), reason=f"waiting for {p.name} to restart")
    if not todo:
        if settling or (short and last_action is not None):
            return Step(Phase.WAIT, reason=_short(short, replicas) if short else "settling")
        return Step(Phase.DONE)
    if settling:
        return Step(Phase.WAIT, remaining=len(todo), reason="settling")
    down = [p for p in todo if not p.ready]  # serves nothing: reloading it costs nothing
    if short and not down:
        return Step(Phase.WAIT, remaining=len(todo), reason=_short(short, replicas))
    pool = down or todo
    pick = min(pool, key=_by_ordinal) if ordered else min(pool, key=lambda p: p.name)
    value = want if mode is Mode.SIGNAL else restart_token(changed_at)
    return Step(Phase.ACT, pick, value, len(todo))


def _by_ordinal(p: Pod) -> tuple[int, str]:
    return (1 if p.ordinal is None else -p.ordinal, p.name)


def _short(short: int, replicas: int) -> str:
    return f"waiting for {short} of {replicas} pods to be Ready"
