"""What an in-place strategy needs of the pod spec, checked before it ships (`lint`, rule
KR015): the agent sidecar, its restart rule, its view of the pod's annotations, the shared
process namespace and the volumes it watches (core/inplace.py, agent.py).

Pure: takes the workload's policy and its raw pod template, returns (path, message, fix,
is_error) tuples; `linting` turns them into findings.
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
    vol = volumes.get(_mounted_at(agent, posixpath.dirname(file)) or "")
    items = _list(((vol or {}).get("downwardAPI") or {}).get("items"))
    if any(i.get("path") == posixpath.basename(file)
           and (i.get("fieldRef") or {}).get("fieldPath") == "metadata.annotations"
           for i in items):  # fmt: skip
        return []
    return [(at, f"the agent reads {file}, which no downwardAPI volume of metadata."
                 "annotations provides there: it never sees a request",
             f"mount a downwardAPI volume with item path {posixpath.basename(file)!r} "
             f"(fieldPath metadata.annotations) at {posixpath.dirname(file)}",
             True)]  # fmt: skip


def _restart_rule(agent: Mapping[str, Any], at: tuple[str | int, ...]) -> list[Issue]:
    """restart-in-place: the agent's exit code must restart every container of the pod."""
    rules = _list(agent.get("restartPolicyRules"))
    if any(r.get("action") == "RestartAllContainers"
           and (r.get("exitCodes") or {}).get("operator") == "In"
           and inplace.RESTART_EXIT_CODE in ((r.get("exitCodes") or {}).get("values") or ())
           for r in rules):  # fmt: skip
        return []
    return [(at, "the agent has no restart rule RestartAllContainers on exit code "
                 f"{inplace.RESTART_EXIT_CODE}: when it exits only the agent restarts",
             "add restartPolicyRules: [{action: RestartAllContainers, exitCodes: "
             f"{{operator: In, values: [{inplace.RESTART_EXIT_CODE}]}}}}] (Kubernetes "
             "1.36+)", True)]  # fmt: skip


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
        out.append((sp, "signal needs shareProcessNamespace: true; without it the agent "
                         "cannot see the application's process", "set it", True))  # fmt: skip
    if not _flag(_args(agent), "--process"):
        out.append((at, "the agent has no --process: it never knows which process to signal",
                    "add --process NAME (the application's command name)", True))  # fmt: skip
    watched = dict(v.split("=", 1) for v in _flag(_args(agent), "--volume") if "=" in v)
    for name, path in sorted(watched.items()):
        if _mounted_at(agent, path) != name:
            out.append((at, f"the agent watches volume {name!r} at {path}, but {name!r} is not "
                            "mounted there in the agent: it waits forever",
                        f"mount {name!r} at {path} in the agent (readOnly)", True))  # fmt: skip
        sources = ((volumes.get(name) or {}).get("projected") or {}).get("sources")
        if any(not ({"configMap", "secret"} & set(s)) for s in _list(sources)):
            out.append((at, f"volume {name!r} projects more than ConfigMaps and Secrets: its "
                            "files never match the digest kube-reloader publishes",
                        "watch a volume of ConfigMaps and Secrets only", True))  # fmt: skip
    for c in _list(spec.get("containers")):
        for m in _list(c.get("volumeMounts")):
            v = volumes.get(str(m.get("name")), {})
            if ("configMap" in v or "secret" in v or "projected" in v) and m.get(
                "name"
            ) not in watched:
                out.append((at, f"volume {m.get('name')!r} (mounted in {c.get('name')!r}) is not "
                                "watched by the agent: it may signal before the kubelet updates it",
                            f"add --volume {m.get('name')}={m.get('mountPath')} to the agent and "
                            "mount it there", False))  # fmt: skip
        refs = ({"configMapKeyRef", "secretKeyRef"} & set(e.get("valueFrom") or {})
                for e in _list(c.get("env")))  # fmt: skip
        if c.get("envFrom") or any(refs):
            out.append(((*sp, "containers"), f"container {c.get('name')!r} reads ConfigMaps or "
                        "Secrets through its environment, which a signal cannot change",
                        "mount them as files, or use restart-in-place", False))  # fmt: skip
    return out
