"""The contract is governed: buf lint (protos/buf.yaml) is clean and nothing breaks against the last released
contract (protos/released/), with buf pinned in sdk/typescript's devDependencies."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BUF = ROOT / "sdk" / "typescript" / "node_modules" / ".bin" / "buf"
RELEASED = sorted((ROOT / "protos" / "released").glob("podfit-v*.json"))[-1]


def buf(*args: str, cwd: Path = ROOT / "protos") -> subprocess.CompletedProcess[str]:
    if not BUF.exists():
        pytest.fail(f"{BUF.relative_to(ROOT)} is missing: run the README's install command (sdk/install.sh)")
    return subprocess.run([str(BUF), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False)


def test_lint_is_clean() -> None:
    result = buf("lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_nothing_breaks_against_the_released_contract() -> None:
    result = buf("breaking", "--against", str(RELEASED))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("old", "new", "complaint"),
    [
        pytest.param("int32 nodes = 2;", "int32 nodes = 99;", "deleted", id="a renumbered field"),
        pytest.param("int32 nodes = 2;", "int64 nodes = 2;", "type", id="a field's type changed"),
        pytest.param("  rpc Stats(StatsRequest) returns (StatsResponse);\n", "", "Stats", id="an RPC removed"),
    ],
)
def test_the_breaking_check_catches_breaking_changes(tmp_path: Path, old: str, new: str, complaint: str) -> None:
    """On a copy of the contract with one breaking edit, the same check fails and says what broke."""
    copy = tmp_path / "repo"
    shutil.copytree(ROOT / "protos", copy / "protos", ignore=shutil.ignore_patterns("__pycache__"))
    proto = copy / "protos" / "podfit" / "v1" / "cluster_cache.proto"
    text = proto.read_text()
    assert old in text
    proto.write_text(text.replace(old, new, 1))
    result = buf("breaking", "--against", str(RELEASED), cwd=copy / "protos")
    assert result.returncode != 0
    assert complaint in result.stdout + result.stderr
