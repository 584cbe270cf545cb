"""The vendored corpora are exactly the public ones: every file matches the SHA-256 its PROVENANCE.md
records, and, where ../shared/conformance sits beside the repository (the project's machines and CI),
the vendored set equals it file for file (run tests/conformance/refresh.py when it changes)."""

from __future__ import annotations

import pytest

from tests.conformance import refresh

RECORDED = refresh.provenance()


def test_provenance_lists_the_corpora() -> None:
    assert "cases-public.jsonl" in RECORDED and "v1.37/cases-public.jsonl" in RECORDED
    assert len(RECORDED) >= 20


@pytest.mark.parametrize("relative", sorted(RECORDED))
def test_a_vendored_file_is_what_its_provenance_records(relative: str) -> None:
    assert refresh.digest(refresh.read_vendored(relative)) == RECORDED[relative]


def test_the_vendored_corpora_equal_the_shared_ones_where_they_exist() -> None:
    """A clone without ../shared has nothing to compare with; the provenance check above still holds."""
    source = refresh.DEFAULT_SOURCE
    if not source.is_dir():
        assert not source.exists() or source.is_file()
        return
    shared = refresh.source_files(source)
    assert shared == sorted(RECORDED), "files added or removed in ../shared/conformance: run refresh.py"
    stale = [r for r in shared if refresh.digest((source / r).read_bytes()) != RECORDED[r]]
    assert not stale, f"../shared/conformance changed: run tests/conformance/refresh.py ({stale[:5]})"
