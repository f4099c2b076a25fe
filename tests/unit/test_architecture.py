"""The shape of the code, checked: module sizes, function lengths, no import circle, time
injected, one place that creates tasks is checked in test_supervisor. import-linter checks the
layers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from kube_reloader.logs import RESERVED_FIELDS

SRC = Path(__file__).resolve().parents[2] / "src" / "kube_reloader"
MODULES = {
    ".".join(("kube_reloader", *p.relative_to(SRC).with_suffix("").parts)).removesuffix(
        ".__init__"
    ): p
    for p in sorted(SRC.rglob("*.py"))
}


def imports_of(name: str, path: Path) -> set[str]:
    """Modules of this package imported by `name` (type-only imports included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                out.add(full if full in MODULES else base)
    return {m for m in out if m in MODULES and m != name}


def cycles() -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    graph = {name: imports_of(name, path) for name, path in MODULES.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def test_no_module_imports_itself_through_a_circle() -> None:
    assert cycles() == []


def test_the_cycle_finder_sees_a_circle_when_there_is_one(monkeypatch: pytest.MonkeyPatch) -> None:
    real = imports_of

    def with_circle(name: str, path: Path) -> set[str]:
        found = real(name, path)
        if name == "kube_reloader.core.objects":
            found.add("kube_reloader.core.planning")
        return found

    monkeypatch.setitem(globals(), "imports_of", with_circle)
    assert ["kube_reloader.core.objects", "kube_reloader.core.planning"] in [
        [m for m in c if m in ("kube_reloader.core.objects", "kube_reloader.core.planning")]
        for c in cycles()
    ]


@pytest.mark.parametrize("name", sorted(MODULES))
def test_every_module_stays_under_400_lines(name: str) -> None:
    assert len(MODULES[name].read_text().splitlines()) <= 400


def test_the_controller_is_wiring_of_at_most_250_lines() -> None:
    assert len(MODULES["kube_reloader.runtime.controller"].read_text().splitlines()) <= 250


CLOCK_CALLS = {("time", "time"), ("time", "monotonic"), ("datetime", "now"), ("dt", "now"),
               ("datetime", "utcnow")}  # fmt: skip


def clock_calls(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if (name, node.func.attr) in CLOCK_CALLS:
                found.append(f"{path.name}:{node.lineno}")
    return found


@pytest.mark.parametrize(
    "name",
    sorted(n for n in MODULES if n.startswith(("kube_reloader.core.", "kube_reloader.runtime."))),
)
def test_core_and_runtime_read_time_only_through_the_injected_clock(name: str) -> None:
    if name == "kube_reloader.runtime.clock":
        return  # the real clock itself
    assert clock_calls(MODULES[name]) == []


def test_the_clock_check_finds_a_direct_call(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import time\nimport datetime as dt\nx = time.monotonic()\n"
                      "y = dt.datetime.now(dt.UTC)\n")  # fmt: skip
    assert clock_calls(module) == ["m.py:3", "m.py:4"]


METRIC_CALLS = {"labels", "inc", "dec", "observe", "set"}
#: the sink (`reporting`) and the domain reporters over it
REPORTERS = ("reporting", "counting", "reloadreports", "rolloutreports", "fleetreports")
REPORTING_POINT = {"kube_reloader.metrics", *(f"kube_reloader.runtime.{m}" for m in REPORTERS)}
METRIC_OWNERS = {"metrics", "recorder"}


def metric_touches(path: Path) -> list[str]:
    """Calls like `metrics.x.labels(...)` / `recorder.leader.set(...)`: a metric object used
    directly."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        if node.func.attr not in METRIC_CALLS:
            continue
        chain = node.func.value
        names = []
        while isinstance(chain, ast.Attribute | ast.Call):
            chain = chain.value if isinstance(chain, ast.Attribute) else chain.func
            if isinstance(chain, ast.Attribute):
                names.append(chain.attr)
            elif isinstance(chain, ast.Name):
                names.append(chain.id)
        if METRIC_OWNERS & set(names):
            found.append(f"{path.name}:{node.lineno}")
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_only_the_reporting_point_touches_metric_objects(name: str) -> None:
    # the reporting point: the sink (`reporting`) and the domain reporters over it
    if name in REPORTING_POINT:
        return
    assert metric_touches(MODULES[name]) == []


def test_the_metric_check_finds_a_direct_touch(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("self.metrics.retries.inc()\nrecorder.leader.set(1)\nx.set(1)\n"
                      "self.metrics.skipped.labels(reason='r').inc()\n")  # fmt: skip
    assert metric_touches(module) == ["m.py:1", "m.py:2", "m.py:4", "m.py:4"]


MAX_FUNCTION_LINES = 60


def long_functions(path: Path, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`path:line name length` of every function and method (nested ones too) longer than
    `limit` lines, counted from its `def` line to its last line (decorators not counted)."""
    root = SRC.parents[1]
    shown = path.relative_to(root) if path.is_relative_to(root) else path.name
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            if length > limit:
                found.append(f"{shown}:{node.lineno} {node.name} {length}")
    return found


def test_no_function_or_method_is_longer_than_60_lines() -> None:
    offenders = [found for path in MODULES.values() for found in long_functions(path)]
    assert offenders == [], f"longer than {MAX_FUNCTION_LINES} lines: " + "; ".join(offenders)


def test_the_length_check_counts_from_def_to_the_last_line_without_decorators(
    tmp_path: Path,
) -> None:
    module = tmp_path / "m.py"
    sixty = "@decorator\n@another\ndef sixty():\n" + "    x = 1\n" * 59
    sixty_one = "class C:\n    async def sixty_one(self):\n" + "        x = 1\n" * 60
    module.write_text(sixty + sixty_one)
    assert long_functions(module) == ["m.py:64 sixty_one 61"]


_FORMATTER_OFF = re.compile(r"#\s*fmt:\s*(skip|off)\b")
_WITH_REASON = re.compile(r"#\s*fmt:\s*(skip|off)\s*#\s*\S.{3,}$")


def formatter_opt_outs(text: str) -> list[tuple[int, str]]:
    """(line, text) of every `# fmt: skip` / `# fmt: off` that gives no reason after a
    second `#` (`# fmt: skip # the columns of this table carry its meaning`)."""
    return [
        (n, line.strip())
        for n, line in enumerate(text.splitlines(), 1)
        if _FORMATTER_OFF.search(line) and not _WITH_REASON.search(line)
    ]


def test_the_formatter_is_turned_off_only_with_a_reason() -> None:
    found = [
        f"{path.relative_to(SRC)}:{n}: {line}"
        for path in sorted(SRC.rglob("*.py"))
        for n, line in formatter_opt_outs(path.read_text())
    ]
    assert found == [], "\n".join(found)


def test_the_opt_out_check_wants_the_reason_after_a_second_hash() -> None:
    text = "a = 1  # fmt: skip\nb = 2  # fmt: skip # columns line up\nc = 3\n# fmt: off\n"
    assert formatter_opt_outs(text) == [(1, "a = 1  # fmt: skip"), (4, "# fmt: off")]


def reserved_log_fields(path: Path) -> list[str]:
    """`file:line key` of every `extra={...}` literal key that logging reserves (a log line
    that would raise KeyError in the path it reports on)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.keyword)
            and node.arg == "extra"
            and isinstance(node.value, ast.Dict)
        ):
            for key in node.value.keys:
                if isinstance(key, ast.Constant) and key.value in RESERVED_FIELDS:
                    found.append(f"{path.name}:{key.lineno} {key.value}")
    return found


def test_no_log_call_passes_a_field_that_logging_reserves() -> None:
    offenders = [found for path in MODULES.values() for found in reserved_log_fields(path)]
    assert offenders == []


def test_the_log_field_check_finds_a_reserved_key(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("log.error('x', extra={'object': 'a'})\n"
                      "log.error('x', extra={'kind': 'k', 'name': 'a'})\n")  # fmt: skip
    assert reserved_log_fields(module) == ["m.py:2 name"]
