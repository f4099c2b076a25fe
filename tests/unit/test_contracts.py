"""The import contracts cover every module, and docs/architecture.md draws exactly them.

`lint-imports` checks only the modules a layers contract names: a module left out of it is
unconstrained. So every top-level module of the package must sit in the `Layers` contract and
every runtime room in the `Runtime rooms` contract. docs/architecture.md draws both contracts
as diagrams (a row per layer, `|` between the modules of one row) and the room table names
every runtime room; these tests keep the drawing and the contracts the same, row for row.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "kube_reloader"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
NOT_MODULES = {"__init__", "__main__"}

Rows = list[list[str]]


def contract(name: str) -> Rows:
    """The rows of the layers contract called `name`, as module names without the package."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    for entry in config["tool"]["importlinter"]["contracts"]:
        if entry["name"].startswith(name):
            return [
                [m.strip().removeprefix("kube_reloader.") for m in row.split("|")]
                for row in entry["layers"]
            ]
    raise AssertionError(f"no contract named {name!r} in pyproject.toml")


def modules(package: Path) -> set[str]:
    """The modules and subpackages directly in `package`."""
    found = {p.stem for p in package.glob("*.py")}
    found |= {p.name for p in package.iterdir() if (p / "__init__.py").exists()}
    return found - NOT_MODULES


def drawing(first_row: str) -> Rows:
    """The rows of the diagram in docs/architecture.md whose first row starts with
    `first_row`: a row is the names before a description (two spaces or more apart), a line
    starting with `|` carries the names on, a line with no names carries the description on."""
    text = ARCHITECTURE.read_text()
    blocks = re.findall(r"^```\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    block = next((b for b in blocks if b.startswith(first_row + " ")), None)
    assert block is not None, f"no diagram starting with {first_row!r} in {ARCHITECTURE.name}"
    rows: Rows = []
    for line in block.splitlines():
        names = re.split(r"\s{2,}", line, maxsplit=1)[0].strip()
        if not names:
            continue
        split = [n.strip() for n in names.strip("|").split("|") if n.strip()]
        if names.startswith("|"):
            rows[-1].extend(split)
        else:
            rows.append(split)
    return rows


def flat(rows: Rows) -> list[str]:
    return [name for row in rows for name in row]


def test_every_top_level_module_is_in_the_layers_contract() -> None:
    listed = flat(contract("Layers"))
    assert sorted(modules(PACKAGE) - set(listed)) == []
    assert sorted(set(listed) - modules(PACKAGE)) == []


def test_every_runtime_room_is_in_the_runtime_rooms_contract() -> None:
    listed = flat(contract("Runtime rooms"))
    assert sorted(modules(PACKAGE / "runtime") - set(listed)) == []
    assert sorted(set(listed) - modules(PACKAGE / "runtime")) == []


def test_every_edge_is_in_the_edges_contract() -> None:
    listed = flat(contract("Edges"))
    assert sorted(modules(PACKAGE / "edges") - set(listed)) == []
    assert sorted(set(listed) - modules(PACKAGE / "edges")) == []


def test_no_module_is_in_two_rows_of_a_contract() -> None:
    for name in ("Layers", "Runtime rooms", "Edges"):
        listed = flat(contract(name))
        assert len(listed) == len(set(listed)), name


@pytest.mark.parametrize(
    ("name", "first_row"),
    [("Layers", "cli"), ("Runtime rooms", "manager"), ("Edges", "tlsserving")],
)
def test_the_architecture_page_draws_each_contract_row_for_row(name: str, first_row: str) -> None:
    assert drawing(first_row) == contract(name)


def test_the_architecture_page_says_what_every_runtime_room_owns() -> None:
    table = [line for line in ARCHITECTURE.read_text().splitlines() if line.startswith("| `")]
    described = {n for line in table for n in re.findall(r"`(\w+)`", line.split("|")[1])}
    assert sorted(modules(PACKAGE / "runtime") - described) == []


def test_the_diagram_reader_sees_a_name_carried_onto_the_next_line() -> None:
    # the reader itself: a row's names continued with `|`, a description continued alone
    assert drawing("tlsserving")[1] == ["alerts", "serving", "admitserving"]
    assert drawing("manager")[1] == ["controller", "servingcerts", "auditroom"]


def test_no_module_name_is_used_twice_in_the_package() -> None:
    # one concept, one name: a module is found by its name alone (`scheduler`, not "the
    # runtime's scheduling, not the core's"); packages' __init__ and __main__ aside
    seen: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.stem not in NOT_MODULES:
            seen.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
