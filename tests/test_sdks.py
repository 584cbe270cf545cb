"""The Go and TypeScript SDKs' own test suites, run against a real podfit-server (each starts its own on a
loopback port, found on the PATH as after the README's install command)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    ("tool", "command"),
    [
        pytest.param("go", [str(ROOT / "sdk" / "go" / "test.sh")], id="go"),
        pytest.param("npm", ["npm", "--prefix", str(ROOT / "sdk" / "typescript"), "test"], id="typescript"),
    ],
)
def test_sdk_suite_passes_against_a_live_server(tool: str, command: list[str]) -> None:
    if shutil.which(tool) is None:
        pytest.fail(f"{tool} is not installed: the SDK suites need Go and Node.js (see the README)")
    # podfit-server beside this interpreter: the venv the install command made.
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    result = subprocess.run(
        command, cwd=ROOT, env={**os.environ, "PATH": path}, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, (result.stdout + result.stderr)[-6000:]
