"""The dev cluster's data types: its error, the recorded processes and the state file.

`State` is what `up` writes to `<state_dir>/state.json` and `status`/`down` read back;
`default_state_dir` says where that directory lives by default.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path


class ClusterError(RuntimeError):
    """One line naming the component at fault and its log file."""


@dataclass
class Proc:
    name: str
    pid: int
    argv: list[str]
    log: str

    @property
    def argv0(self) -> str:
        return self.argv[0]


@dataclass
class State:
    """What `up` wrote and `status`/`down` read: `<state_dir>/state.json`."""

    versions: dict[str, str]
    ports: dict[str, int]
    kubeconfig: str
    nodes: int
    procs: list[Proc] = field(default_factory=list)
    minimal: bool = False
    audit: bool = False
    #: a kubelet with containerd runs beside the kwok nodes (`up --real-node`)
    real_node: bool = False
    started_at: float = 0.0
    ready_seconds: float = 0.0

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> State:
        raw = json.loads(text)
        procs = [Proc(**p) for p in raw.pop("procs", [])]
        return cls(procs=procs, **raw)


def default_state_dir(name: str = "default", env: Mapping[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    base = env.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "kube-reloader" / "dev-clusters" / name


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    pid: int | None
    running: bool
    healthy: bool
    detail: str
