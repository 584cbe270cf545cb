"""The committed protobuf/gRPC code must be exactly what protos/ generates (never hand-edited)."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("podfit_generate", ROOT / "protos" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["podfit_generate"] = module
    spec.loader.exec_module(module)
    module.generate(tmp_path)
    committed = ROOT / "client" / "podfit" / "v1"
    fresh = tmp_path / "podfit" / "v1"
    names = sorted(p.name for p in fresh.iterdir())
    assert names == sorted(p.name for p in committed.iterdir() if p.name != "__pycache__")
    stale = [name for name in names if (fresh / name).read_bytes() != (committed / name).read_bytes()]
    assert stale == [], f"regenerate with `python protos/generate.py`: stale {stale}"
