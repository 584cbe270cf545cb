"""The committed protobuf/gRPC code must be exactly what protos/ generates (never hand-edited)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "client"


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("podfit_generate", ROOT / "protos" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["podfit_generate"] = module
    spec.loader.exec_module(module)
    return module


def _files(root: Path, packages: list[str]) -> dict[str, bytes]:
    """Every file of the given packages (paths relative to root), without bytecode caches."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for package in packages
        for path in sorted((root / package).rglob("*"))
        if path.is_file() and "__pycache__" not in path.parts
    }


def _generated_packages(root: Path, marker: str) -> list[str]:
    """The packages under root whose __init__.py says they are generated."""
    return sorted(
        init.parent.relative_to(root).as_posix()
        for init in root.rglob("__init__.py")
        if "__pycache__" not in init.parts and init.read_text().startswith(marker)
    )


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> tuple[ModuleType, Path]:
    module = _generator()
    out = tmp_path_factory.mktemp("generated")
    module.generate(out)
    return module, out


def test_every_proto_directory_is_a_generated_package(fresh: tuple[ModuleType, Path]) -> None:
    module, out = fresh
    assert module.PACKAGES == ["grpcplugin", "podfit/k8s/v1", "podfit/v1"]
    # protoc writes nothing outside the packages (no stray modules from a misplaced .proto).
    everything = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert everything == set(_files(out, module.PACKAGES))
    # Every committed generated package is still generated (a deleted .proto leaves no orphan package).
    assert _generated_packages(CLIENT, module.MARKER) == module.PACKAGES


@pytest.mark.parametrize("package", ["podfit/v1", "podfit/k8s/v1", "grpcplugin"])
def test_generated_code_is_fresh(fresh: tuple[ModuleType, Path], package: str) -> None:
    _, out = fresh
    generated = _files(out, [package])
    committed = _files(CLIENT, [package])
    assert sorted(committed) == sorted(generated), "regenerate with `python protos/generate.py`: files differ"
    stale = [name for name in generated if generated[name] != committed[name]]
    assert stale == [], f"regenerate with `python protos/generate.py`: stale {stale}"


def _tree(root: Path, suffix: str) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob(f"*{suffix}")) if p.is_file()}


@pytest.mark.parametrize(
    ("language", "directory", "suffix"),
    [
        pytest.param("go", "sdk/go/podfitv1", ".pb.go", id="go"),
        pytest.param("typescript", "sdk/typescript/src/gen", "_pb.ts", id="typescript"),
    ],
)
def test_sdk_code_is_fresh(tmp_path: Path, language: str, directory: str, suffix: str) -> None:
    """Go and TypeScript from the same command (pinned generators installed by sdk/install.sh)."""
    module = _generator()
    getattr(module, f"generate_{language}")(tmp_path)
    generated, committed = _tree(tmp_path / directory, suffix), _tree(ROOT / directory, suffix)
    assert generated, f"nothing generated for {language}"
    assert sorted(committed) == sorted(generated), "regenerate with `python protos/generate.py`: files differ"
    stale = [name for name in generated if generated[name] != committed[name]]
    assert stale == [], f"regenerate with `python protos/generate.py`: stale {stale}"
