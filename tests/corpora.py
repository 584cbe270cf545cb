"""Where the suite finds the public conformance corpora: vendored in tests/conformance (refreshed from
../shared/conformance by tests/conformance/refresh.py), so a clone without the sibling folder passes."""

from __future__ import annotations

from pathlib import Path

CONFORMANCE = Path(__file__).resolve().parent / "conformance"


def corpus(relative: str) -> Path:
    """The vendored file of ``shared/conformance/<relative>`` (``.jsonl`` files are stored as ``.jsonl.gz``)."""
    return CONFORMANCE / (relative + ".gz" if relative.endswith(".jsonl") else relative)
