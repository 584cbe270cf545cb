"""Regenerates the Python protobuf/gRPC code (and its .pyi stubs) from protos/ into client/podfit/v1.

Run as ``python protos/generate.py [OUT_DIR]``; the freshness test runs it into a temporary directory
and compares the result with the committed files, so stale generated code fails the suite.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
from pathlib import Path

from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
PROTO_FILES = sorted(str(p.relative_to(PROTO_ROOT)) for p in (PROTO_ROOT / "podfit" / "v1").glob("*.proto"))


def _plugin(name: str) -> str:
    """Finds a protoc plugin beside the running interpreter (the venv), then on PATH."""
    for directory in (Path(sys.executable).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / name
        if candidate.exists():
            return str(candidate)
    found = shutil.which(name)
    if not found:
        raise SystemExit(f"{name} not found: install the 'dev' extra (mypy-protobuf)")
    return found


def generate(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    well_known = Path(protoc.__file__).resolve().parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"-I{PROTO_ROOT}",
        f"-I{well_known}",
        f"--plugin=protoc-gen-mypy={_plugin('protoc-gen-mypy')}",
        f"--plugin=protoc-gen-mypy_grpc={_plugin('protoc-gen-mypy_grpc')}",
        f"--python_out={out_dir}",
        f"--grpc_python_out={out_dir}",
        f"--mypy_out={out_dir}",
        f"--mypy_grpc_out={out_dir}",
        *PROTO_FILES,
    ]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    package = out_dir / "podfit" / "v1"
    (package / "__init__.py").write_text('"""Generated from protos/podfit/v1; never edit by hand."""\n')
    (package / "py.typed").write_text("")


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT / "client")
