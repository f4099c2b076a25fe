"""Freed heap memory is handed back to the OS after the initial sync."""

from __future__ import annotations

import gc
import platform

import pytest

from kube_reloader.runtime import memory


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is a glibc function")
def test_free_heap_pages_are_returned_on_glibc() -> None:
    garbage = [bytes(8192) for _ in range(5000)]  # 40 MiB of small heap blocks
    del garbage
    assert memory.release_free_memory() is True


def test_without_malloc_trim_it_only_freezes_the_heap_and_resumes_collections(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(memory, "_TRIM", None)
    monkeypatch.setattr(memory, "_FROZEN", [False])
    memory.defer_collections()
    assert not gc.isenabled()
    before = gc.get_freeze_count()
    kept = [object() for _ in range(100)]
    assert memory.release_free_memory() is False
    assert gc.isenabled()
    assert gc.get_freeze_count() >= before + len(kept), "what was alive is out of collections"


def test_a_process_freezes_its_heap_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_FROZEN", [True])  # an earlier controller of this process did
    before = gc.get_freeze_count()
    kept = [object() for _ in range(100)]
    memory.release_free_memory()
    assert gc.get_freeze_count() == before, f"{len(kept)} new objects left to the collector"
