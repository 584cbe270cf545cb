"""Refreshes tests/conformance from ../shared/conformance: the public corpora the suite replays, so that a
clone without the sibling folder passes too. ``.jsonl`` files are stored gzip-compressed (deterministic:
no name, mtime 0), every other file as is; PROVENANCE.md records each file's SHA-256 before compression.

    python tests/conformance/refresh.py [SOURCE]      # default: ../shared/conformance beside the repo
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_SOURCE = HERE.parents[2] / "shared" / "conformance"
PROVENANCE = HERE / "PROVENANCE.md"
KEEP = {"refresh.py", "PROVENANCE.md", "__init__.py"}


def vendored_name(relative: str) -> str:
    return relative + ".gz" if relative.endswith(".jsonl") else relative


def source_files(source: Path) -> list[str]:
    return sorted(p.relative_to(source).as_posix() for p in source.rglob("*") if p.is_file())


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_vendored(relative: str) -> bytes:
    """A vendored file's original bytes (decompressed when stored compressed)."""
    path = HERE / vendored_name(relative)
    data = path.read_bytes()
    return gzip.decompress(data) if path.suffix == ".gz" else data


def provenance() -> dict[str, str]:
    """relative path -> SHA-256 of the original, as PROVENANCE.md lists them."""
    entries = {}
    for line in PROVENANCE.read_text().splitlines():
        if line.startswith("| `"):
            cells = [c.strip().strip("`") for c in line.strip("|").split("|")]
            entries[cells[0]] = cells[1]
    return entries


def refresh(source: Path) -> None:
    for old in HERE.rglob("*"):
        if old.is_file() and old.name not in KEEP and "__pycache__" not in old.parts:
            old.unlink()
    rows = []
    for relative in source_files(source):
        data = (source / relative).read_bytes()
        target = HERE / vendored_name(relative)
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.suffix == ".gz":
            with target.open("wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as out:
                out.write(data)
        else:
            shutil.copyfile(source / relative, target)
        rows.append(f"| `{relative}` | `{digest(data)}` |")
    PROVENANCE.write_text(
        "# Provenance of the vendored conformance corpora\n\n"
        "Copied from the project's `shared/conformance/` (public cases recorded from kube-scheduler v1.35.4 and\n"
        "v1.37.2 and from cluster-autoscaler's own code; each folder's FORMAT, STORAGE-DRA or VERSIONS document\n"
        "says how). `.jsonl` files are stored gzip-compressed. Refresh with `python tests/conformance/refresh.py`;\n"
        "`tests/test_corpora.py` fails when a file differs from the SHA-256 below or from `../shared/conformance`.\n\n"
        "| file | SHA-256 of the original |\n|---|---|\n" + "\n".join(rows) + "\n"
    )


if __name__ == "__main__":
    refresh(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SOURCE)
