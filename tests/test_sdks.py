"""The Go and TypeScript SDKs' own test suites, run against a real podfit-server (each starts its own on a
loopback port, found on the PATH as after the README's install command)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from podfit.client.conformance import LocalServer

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


GO_PROGRAM = """package main

import (
	"context"
	"fmt"
	"os"

	podfit "github.com/podfit/podfit/sdk/go"
)

func main() {
	ctx := context.Background()
	client, err := podfit.Dial(ctx, os.Args[1], podfit.WithInsecure())
	if err != nil {
		panic(err)
	}
	defer client.Close()
	stats, err := client.Stats(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("nodes:", stats.GetNodes())
}
"""


def test_the_go_sdk_replace_recipe_builds_a_program_outside_the_repository(tmp_path: Path) -> None:
    """sdk/go/README.md's recipe for the unpublished module, run as written in a module of its own."""
    if shutil.which("go") is None:
        pytest.fail("go is not installed: the Go SDK needs Go >= 1.26 (see the README)")
    (tmp_path / "main.go").write_text(GO_PROGRAM)

    def go(*args: str) -> str:
        done = subprocess.run(["go", *args], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, f"go {' '.join(args)}: {done.stdout}{done.stderr}"
        return done.stdout

    go("mod", "init", "example.com/uses-podfit")
    go("mod", "edit", f"-replace=github.com/podfit/podfit/sdk/go={ROOT / 'sdk' / 'go'}")
    go("mod", "tidy")
    go("build", "-o", "uses-podfit", ".")
    with LocalServer() as local:
        done = subprocess.run(
            [str(tmp_path / "uses-podfit"), local.target], capture_output=True, text=True, timeout=60, check=False
        )
    assert done.returncode == 0 and done.stdout == "nodes: 0\n", done.stdout + done.stderr


def test_the_readme_async_python_snippet_runs_as_shown() -> None:
    """The README's AsyncClient example, run as a script against a server; its comment states the output."""
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.S)
    snippet = next((b for b in blocks if "AsyncClient(" in b and "asyncio.run" in b), None)
    assert snippet, "the README's async Python example is gone"
    expected = re.search(r"print\(.*\)\s*#\s*(.+)", snippet)
    assert expected, "the snippet no longer states its output"
    with LocalServer() as local:
        code = snippet.replace('"localhost:50051"', repr(local.target))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected.group(1).strip()


def test_podfit_load_asks_a_server_with_decision_workers_from_concurrent_connections(tmp_path: Path) -> None:
    """sdk/go/cmd/podfit-load, the benchmark README's concurrent caller, built and run as documented."""
    if shutil.which("go") is None:
        pytest.fail("go is not installed: the Go SDK needs Go >= 1.26 (see the README)")
    binary = tmp_path / "podfit-load"
    built = subprocess.run(
        ["go", "build", "-o", str(binary), "./cmd/podfit-load"],
        cwd=ROOT / "sdk" / "go",
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    from podfit.client.sync import Client

    with LocalServer("--workers", "2") as local:
        with Client(local.target) as client:
            room = {"cpu": "64", "memory": "256Gi", "pods": "110"}
            client.apply(
                [{"kind": "Node", "metadata": {"name": f"n{i}"}, "status": {"allocatable": room}} for i in range(3)]
            )
        argv = [str(binary), "-target", local.target, "-insecure", "-clients", "4", "-decisions", "40", "-assume"]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
        assert done.returncode == 0, done.stderr
        assert re.fullmatch(
            r"clients=4 assume=true decisions=40 placed=40 seconds=[\d.]+ per_second=\d+\n", done.stdout
        )
        with Client(local.target) as client:
            assert sum(1 for p in client.list("Pod").objects if p.pod.spec.node_name) == 40
