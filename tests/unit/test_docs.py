"""The README is the landing page and the manual is docs/, built by MkDocs with --strict: the
README stays short and names the two commands CI and newcomers use, the manual builds with no
warning (broken links and anchors, pages missing from the nav), and the generated reference
pages (flags, annotation keys, metrics) match the code they describe."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from kube_reloader.cli import reference

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def test_the_readme_is_a_landing_page_of_at_most_250_lines() -> None:
    lines = README.read_text().splitlines()
    assert len(lines) <= 250, f"README.md has {len(lines)} lines; move detail into docs/"


def test_the_readme_names_the_two_contributor_commands() -> None:
    text = README.read_text()
    # CI (.ci/run) runs `make test`; `make demo` is the first thing a newcomer runs
    assert "make test" in text
    assert "make demo" in text


def test_the_readmes_relative_links_name_files_that_exist() -> None:
    targets = re.findall(r"\]\(([^)\s]+)\)", README.read_text())
    local = [t.split("#", 1)[0] for t in targets if not t.startswith(("http://", "https://", "#"))]
    assert local
    assert [t for t in local if not (ROOT / t).exists()] == []


def test_the_generated_reference_pages_match_the_code() -> None:
    out_of_date = reference.stale(DOCS)
    assert out_of_date == [], (
        f"docs/{', docs/'.join(out_of_date)} differ from the code: run `{reference.COMMAND}`"
    )


def test_every_flag_and_metric_is_on_its_reference_page() -> None:
    pages = reference.pages()
    parser_flags = [
        option
        for action in reference.flagset.build_parser()._actions
        for option in action.option_strings
        if option.startswith("--") and option != "--help"
    ]
    assert parser_flags
    assert all(f"`{flag}`" in pages["flags.md"] for flag in parser_flags)
    recorder = reference.metrics.Recorder(by_namespace=False)
    assert all(f"`{name}`" in pages["metrics.md"] for name in reference.metrics.names(recorder))


def test_a_comment_block_describes_every_name_up_to_a_blank_line() -> None:
    source = (
        'A = "a/x"\n'
        "#: first: two\n#: lines\n"
        'B = "b/x"\nC = "c/x"\n\n'
        'D = "d/x"\n'
        "class K:\n    #: a field\n    e: str = 'e/x'\n"
    )
    assert reference._notes(source) == {"B": "first: two lines", "C": "first: two lines",
                                        "e": "a field"}  # fmt: skip


def test_table_cells_escape_markdown_outside_code_spans_only() -> None:
    assert reference._cell("key:* a|b <x> `c|d*`") == r"key:\* a\|b &lt;x> `c|d*`"


@pytest.mark.skipif(importlib.util.find_spec("mkdocs") is None, reason="mkdocs not installed")
def test_the_manual_builds_with_mkdocs_strict(tmp_path: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
         "--config-file", str(ROOT / "mkdocs.yml"), "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
