"""Regenerates every language's code from protos/: one command, ``python protos/generate.py [ROOT]``.

- Python (messages, gRPC stubs and .pyi) of every .proto under protos/, into ROOT/client;
- Go (protoc-gen-go, protoc-gen-go-grpc, pinned in sdk/install.sh, from ROOT/.tools/bin) of podfit/v1,
  into ROOT/sdk/go/podfitv1;
- TypeScript (protoc-gen-es from sdk/typescript's pinned devDependencies) of podfit/v1, into
  ROOT/sdk/typescript/src/gen.

A missing generator stops it with the install command to run. ROOT defaults to the repository.

Each directory of .proto files becomes one generated package (protos/podfit/v1 -> client/podfit/v1,
protos/podfit/k8s/v1 -> client/podfit/k8s/v1, protos/grpcplugin -> client/grpcplugin), marked by an
``__init__.py`` that says so. Run as ``python protos/generate.py [OUT_DIR]``; the freshness test runs it
into a temporary directory and compares the result with the committed files, so stale generated code fails
the suite.
"""

from __future__ import annotations

import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

from grpc_tools import protoc

PROTO_ROOT = Path(__file__).resolve().parent
REPO_ROOT = PROTO_ROOT.parent
PROTO_FILES = sorted(p.relative_to(PROTO_ROOT).as_posix() for p in PROTO_ROOT.rglob("*.proto"))
# Package directories relative to the output directory, e.g. "podfit/k8s/v1".
PACKAGES = sorted({Path(name).parent.as_posix() for name in PROTO_FILES})
# How every generated package's __init__.py begins; the freshness test finds generated packages by it.
MARKER = '"""Generated from protos/'
_GENERATED_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py", "_pb2_grpc.pyi")


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


def _protoc(out_dir: Path) -> None:
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
    for name in PACKAGES:
        package = out_dir / name
        (package / "__init__.py").write_text(f'{MARKER}{name}; never edit by hand."""\n')
        (package / "py.typed").write_text("")


def generate(out_dir: Path) -> None:
    """Generates into a scratch directory, then writes only the files that changed and deletes the modules
    of protos that are gone, so that tools running meanwhile (pytest, mypy) never see a module missing."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        _protoc(fresh)
        written = set()
        for name in PACKAGES:
            for source in sorted((fresh / name).iterdir()):
                target = out_dir / name / source.name
                written.add(target)
                content = source.read_bytes()
                if not target.exists() or target.read_bytes() != content:
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(content)
    for init in out_dir.rglob("__init__.py"):
        if "__pycache__" not in init.parts and init.read_text().startswith(MARKER):
            for path in init.parent.iterdir():
                if path.name.endswith(_GENERATED_SUFFIXES) and path not in written:
                    path.unlink()


# The SDKs carry podfit's own contract; the Kubernetes subset and cluster-autoscaler's expander are the
# server's business.
SDK_PROTOS = [name for name in PROTO_FILES if name.startswith("podfit/v1/")]
GO_MODULE = "github.com/podfit/podfit/sdk/go"
GO_DIR = "sdk/go"
GO_PACKAGE = "podfitv1"
TS_DIR = "sdk/typescript/src/gen"
INSTALL_HINT = "run the README's install command (it runs sdk/install.sh)"


def _tool(path: Path) -> str:
    if not path.exists():
        raise SystemExit(f"{path.relative_to(REPO_ROOT)} not found: {INSTALL_HINT}")
    return str(path)


def _run_protoc(args: list[str]) -> None:
    well_known = Path(protoc.__file__).resolve().parent / "_proto"
    if protoc.main(["grpc_tools.protoc", f"-I{PROTO_ROOT}", f"-I{well_known}", *args, *SDK_PROTOS]) != 0:
        raise SystemExit("protoc failed")


def _sync(fresh: Path, target: Path, generated: str) -> None:
    """Makes ``target`` hold exactly ``fresh``'s files: changed ones written, generated ones (names ending in
    ``generated``) that protoc no longer writes deleted, anything hand-written left alone."""
    written = set()
    for source in sorted(p for p in fresh.rglob("*") if p.is_file()):
        destination = target / source.relative_to(fresh)
        written.add(destination)
        content = source.read_bytes()
        if not destination.exists() or destination.read_bytes() != content:
            destination.parent.mkdir(parents=True, exist_ok=True)
            destination.write_bytes(content)
    if target.exists():
        for path in target.rglob(f"*{generated}"):
            if path not in written:
                path.unlink()


def generate_go(root: Path) -> None:
    tools = REPO_ROOT / ".tools" / "bin"
    with tempfile.TemporaryDirectory() as scratch:
        _run_protoc(
            [
                f"--plugin=protoc-gen-go={_tool(tools / 'protoc-gen-go')}",
                f"--plugin=protoc-gen-go-grpc={_tool(tools / 'protoc-gen-go-grpc')}",
                f"--go_out={scratch}",
                f"--go_opt=module={GO_MODULE}",
                f"--go-grpc_out={scratch}",
                f"--go-grpc_opt=module={GO_MODULE}",
            ]
        )
        _sync(Path(scratch) / GO_PACKAGE, root / GO_DIR / GO_PACKAGE, ".pb.go")


def generate_typescript(root: Path) -> None:
    plugin = REPO_ROOT / "sdk" / "typescript" / "node_modules" / ".bin" / "protoc-gen-es"
    with tempfile.TemporaryDirectory() as scratch:
        _run_protoc(
            [f"--plugin=protoc-gen-es={_tool(plugin)}", f"--es_out={scratch}", "--es_opt=target=ts,import_extension=js"]
        )
        _sync(Path(scratch), root / TS_DIR, "_pb.ts")


def generate_all(root: Path) -> None:
    generate(root / "client")
    generate_go(root)
    generate_typescript(root)


if __name__ == "__main__":
    generate_all(Path(sys.argv[1]) if len(sys.argv) > 1 else REPO_ROOT)
