"""What an in-place strategy needs of the pod spec, checked before it ships (`lint`, rule
KR015): the agent sidecar, its restart rule, its view of the pod's annotations, the shared
process namespace and the volumes it watches (core/inplace.py, agent.py).

Pure: takes the workload's policy and its raw pod template, returns (path, message, fix,
is_error) tuples; `lintvalues` turns them into findings (KR015).
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

from kube_reloader.core import inplace
from kube_reloader.core.evicting import PodPolicy, PodStrategy

Issue = tuple[tuple[str | int, ...], str, str, bool]
AGENT_FIX = (
    "add the agent as a native sidecar: an initContainer with restartPolicy: Always running "
    "`kube-reloader agent --annotations /etc/kube-reloader/annotations` "
    "(docs/strategies.md: In-place reloads)"
)


def _list(node: Any) -> list[Mapping[str, Any]]:
    return [x for x in node if isinstance(x, dict)] if isinstance(node, list) else []


def _args(c: Mapping[str, Any]) -> list[str]:
    return [str(a) for a in (*(c.get("command") or ()), *(c.get("args") or ()))]


def _flag(args: Sequence[str], name: str) -> list[str]:
    """Every value of `--name VALUE` or `--name=VALUE`."""
    out = []
    for i, a in enumerate(args):
        if a == name and i + 1 < len(args):
            out.append(args[i + 1])
        elif a.startswith(name + "="):
            out.append(a.split("=", 1)[1])
    return out


def find_agent(spec: Mapping[str, Any]) -> tuple[int, Mapping[str, Any]] | None:
    """The agent sidecar: a restartable initContainer running `agent --annotations ...`."""
    for i, c in enumerate(_list(spec.get("initContainers"))):
        args = _args(c)
        if c.get("restartPolicy") == "Always" and "agent" in args and _flag(args, "--annotations"):
            return i, c
    return None


def _mounted_at(c: Mapping[str, Any], path: str) -> str | None:
    """The volume mounted at exactly `path` in container `c`."""
    for m in _list(c.get("volumeMounts")):
        if posixpath.normpath(str(m.get("mountPath", ""))) == posixpath.normpath(path):
            return str(m.get("name"))
    return None


def check(
    policy: PodPolicy | None, template: Mapping[str, Any], base: tuple[str | int, ...]
) -> list[Issue]:
    """Issues of `template` (a pod template at `base`) for the policy's strategy; [] for the
    others (and for an unreadable policy, which earns its own finding)."""
    strategy = policy.strategy if policy is not None else PodStrategy.PATCH
    if strategy not in (PodStrategy.RESTART_IN_PLACE, PodStrategy.SIGNAL):
        return []
    spec = template.get("spec") if isinstance(template.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    sp = (*base, "spec")
    found = find_agent(spec)
    if found is None:
        text = f"{strategy.value} needs the kube-reloader agent sidecar; there is none"
        return [
            (sp, text + ", so no pod is ever reloaded and each rotation fails", AGENT_FIX, True)
        ]
    index, agent = found
    at = (*sp, "initContainers", index)
    volumes = {str(v.get("name")): v for v in _list(spec.get("volumes"))}
    out = _annotations_file(agent, volumes, at)
    if strategy is PodStrategy.RESTART_IN_PLACE:
        return out + _restart_rule(agent, at)
    return out + _signal(spec, agent, volumes, sp, at)


def _annotations_file(
    agent: Mapping[str, Any], volumes: Mapping[str, Any], at: tuple[str | int, ...]
) -> list[Issue]:
    """The agent's --annotations file must be a downwardAPI item of metadata.annotations."""
    file = _flag(_args(agent), "--annotations")[0]
    folder, name = posixpath.dirname(file), posixpath.basename(file)
    vol = volumes.get(_mounted_at(agent, folder) or "")
    items = _list(((vol or {}).get("downwardAPI") or {}).get("items"))
    if any(_field_path(i) == "metadata.annotations" and i.get("path") == name for i in items):
        return []
    text = (
        f"the agent reads {file}, which no downwardAPI volume of metadata.annotations "
        "provides there: it never sees a request"
    )
    fix = (
        f"mount a downwardAPI volume with item path {name!r} "
        f"(fieldPath metadata.annotations) at {folder}"
    )
    return [(at, text, fix, True)]


def _field_path(item: Mapping[str, Any]) -> object:
    return (item.get("fieldRef") or {}).get("fieldPath")


def _restart_rule(agent: Mapping[str, Any], at: tuple[str | int, ...]) -> list[Issue]:
    """restart-in-place: the agent's exit code must restart every container of the pod."""
    code = inplace.RESTART_EXIT_CODE
    for rule in _list(agent.get("restartPolicyRules")):
        exit_codes = rule.get("exitCodes") or {}
        if (
            rule.get("action") == "RestartAllContainers"
            and exit_codes.get("operator") == "In"
            and code in (exit_codes.get("values") or ())
        ):
            return []
    text = (
        f"the agent has no restart rule RestartAllContainers on exit code {code}: "
        "when it exits only the agent restarts"
    )
    fix = (
        "add restartPolicyRules: [{action: RestartAllContainers, exitCodes: "
        f"{{operator: In, values: [{code}]}}}}] (Kubernetes 1.36+)"
    )
    return [(at, text, fix, True)]


def _signal(
    spec: Mapping[str, Any],
    agent: Mapping[str, Any],
    volumes: Mapping[str, Any],
    sp: tuple[str | int, ...],
    at: tuple[str | int, ...],
) -> list[Issue]:
    """signal: a shared process namespace, a process to signal, and every config volume
    watched (the agent must not signal before the kubelet has updated the files)."""
    out: list[Issue] = []
    if spec.get("shareProcessNamespace") is not True:
        text = (
            "signal needs shareProcessNamespace: true; without it the agent "
            "cannot see the application's process"
        )
        out.append((sp, text, "set it", True))
    if not _flag(_args(agent), "--process"):
        text = "the agent has no --process: it never knows which process to signal"
        out.append((at, text, "add --process NAME (the application's command name)", True))
    watched = dict(v.split("=", 1) for v in _flag(_args(agent), "--volume") if "=" in v)
    out += _watched_volumes(agent, volumes, watched, at)
    for c in _list(spec.get("containers")):
        out += _unwatched_config(c, volumes, watched, sp, at)
    return out


def _watched_volumes(
    agent: Mapping[str, Any],
    volumes: Mapping[str, Any],
    watched: Mapping[str, str],
    at: tuple[str | int, ...],
) -> list[Issue]:
    """signal: each volume the agent watches is mounted in the agent where it says, and
    projects ConfigMaps and Secrets only."""
    out: list[Issue] = []
    for name, path in sorted(watched.items()):
        if _mounted_at(agent, path) != name:
            text = (
                f"the agent watches volume {name!r} at {path}, but {name!r} is not "
                "mounted there in the agent: it waits forever"
            )
            out.append((at, text, f"mount {name!r} at {path} in the agent (readOnly)", True))
        sources = ((volumes.get(name) or {}).get("projected") or {}).get("sources")
        if any(not ({"configMap", "secret"} & set(s)) for s in _list(sources)):
            text = (
                f"volume {name!r} projects more than ConfigMaps and Secrets: its "
                "files never match the digest kube-reloader publishes"
            )
            out.append((at, text, "watch a volume of ConfigMaps and Secrets only", True))
    return out


def _unwatched_config(
    c: Mapping[str, Any],
    volumes: Mapping[str, Any],
    watched: Mapping[str, str],
    sp: tuple[str | int, ...],
    at: tuple[str | int, ...],
) -> list[Issue]:
    """signal: container `c`'s config volumes the agent does not watch (warnings), and its
    ConfigMaps and Secrets read through the environment."""
    out: list[Issue] = []
    for m in _list(c.get("volumeMounts")):
        v = volumes.get(str(m.get("name")), {})
        config = "configMap" in v or "secret" in v or "projected" in v
        name = m.get("name")
        if config and name not in watched:
            text = (
                f"volume {name!r} (mounted in {c.get('name')!r}) is not "
                "watched by the agent: it may signal before the kubelet updates it"
            )
            fix = f"add --volume {name}={m.get('mountPath')} to the agent and mount it there"
            out.append((at, text, fix, False))
    refs = (
        {"configMapKeyRef", "secretKeyRef"} & set(e.get("valueFrom") or {})
        for e in _list(c.get("env"))
    )
    if c.get("envFrom") or any(refs):
        text = (
            f"container {c.get('name')!r} reads ConfigMaps or "
            "Secrets through its environment, which a signal cannot change"
        )
        fix = "mount them as files, or use restart-in-place"
        out.append(((*sp, "containers"), text, fix, False))
    return out
