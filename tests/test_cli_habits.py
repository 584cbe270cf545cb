"""kubectl habits of the podfit CLI, run as a user runs it: the installed console script in a subprocess
against a real podfit-server subprocess (flags anywhere, -o honoured or refused, get/describe columns,
delete semantics, version and completion, big and broken inputs, progress bars only on a terminal)."""

from __future__ import annotations

import contextlib
import fcntl
import io
import json
import os
import pty
import re
import signal
import socket
import struct
import subprocess
import sys
import termios
from collections.abc import Callable, Iterator
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import yaml
from podfit.client import cli
from podfit.client.cli import COMMANDS, SUPPORTED_OUTPUTS
from podfit.client.cli_views import resource_claim_state
from podfit.client.conformance import LocalServer, load_cases
from podfit.k8s.convert import KINDS, manifest_to_object, object_to_manifest

from tests.builders import make_node, make_pod
from tests.corpora import corpus

PODFIT = str(Path(sys.executable).parent / "podfit")
ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "deploy" / "examples"
CLUSTER = str(EXAMPLES / "cluster.yaml")
POD = str(EXAMPLES / "pod.yaml")
CASES = corpus("cases-public.jsonl")
BENCH = ["bench", "SchedulingBasic/6Nodes_10Pods", "--decisions", "5"]


@pytest.fixture(scope="module")
def target() -> Iterator[str]:
    with LocalServer() as local:
        yield local.target


def podfit(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([PODFIT, *args], input=stdin, capture_output=True, text=True, timeout=120)


def reset(target: str, *paths: str) -> None:
    """Makes the given manifests the whole cluster state (the example cluster by default): ``podfit apply
    --replace``'s own code, run in this process. It sets a test up, so it need not pay a console script's
    start (the commands under test still run as a user runs them, in a subprocess)."""
    files = [arg for path in (paths or (CLUSTER,)) for arg in ("-f", path)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["--target", target, "apply", "--replace", *files])
    assert code == 0, err.getvalue()


def write(path: Path, documents: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump_all(documents))
    return str(path)


def rows(out: str) -> dict[str, list[str]]:
    """A printed table by its first column (every cell is one word in these tables)."""
    lines = out.splitlines()
    return {line.split()[0]: line.split() for line in lines}


# -- global flags -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["--target", "{t}", "-o", "json", "-n", "shop", "get", "pods"], id="before the subcommand"),
        pytest.param(["get", "pods", "--target", "{t}", "-o", "json", "-n", "shop"], id="after the subcommand"),
        pytest.param(["-n", "shop", "get", "--target", "{t}", "pods", "--output", "json"], id="mixed"),
        pytest.param(["get", "pods", "--namespace=shop", "--target={t}", "-ojson"], id="kubectl's joined spellings"),
    ],
)
def test_global_flags_anywhere(target: str, argv: list[str]) -> None:
    reset(target)
    done = podfit(*[a.replace("{t}", target) for a in argv])
    assert done.returncode == 0, done.stderr
    items = json.loads(done.stdout)["items"]
    assert sorted(p["metadata"]["name"] for p in items) == ["batch-1", "web-1"]


# -- -o: honoured or refused by every command -------------------------------------------------------

REFUSED = "refused"
# (argv after the target, -o value, what stdout must show): REFUSED means exit 2 with one line on stderr.
OUTPUT_CASES: list[tuple[list[str], str, Any]] = [
    (["apply", "-f", CLUSTER], "name", lambda out: "node/node-a" in out.splitlines()),
    (["apply", "-f", CLUSTER], "json", lambda out: json.loads(out)["unchangedCount"] == 9),
    (["apply", "-f", CLUSTER], "wide", REFUSED),
    (["delete", "pod", "web-1", "-n", "shop"], "name", lambda out: out == "pod/web-1\n"),
    (["delete", "pod", "web-1", "-n", "shop"], "yaml", lambda out: yaml.safe_load(out)["appliedCount"] == 1),
    (["delete", "pod", "web-1", "-n", "shop"], "wide", REFUSED),
    (["get", "nodes"], "name", lambda out: out.split() == ["node/node-a", "node/node-b", "node/node-gpu"]),
    (["get", "nodes"], "yaml", lambda out: len(yaml.safe_load(out)["items"]) == 3),
    (["get", "nodes"], "wide", lambda out: "ZONE" in out.splitlines()[0]),
    (["get", "pod", "web-1", "-n", "shop"], "json", lambda out: json.loads(out)["spec"]["nodeName"] == "node-a"),
    (["describe", "node", "node-a"], "json", REFUSED),
    (["describe", "pod", "web-1", "-n", "shop"], "name", REFUSED),
    (["filter", "-f", POD], "yaml", lambda out: len(yaml.safe_load(out)["nodes"]) == 3),
    (["filter", "-f", POD], "name", REFUSED),
    (["score", "-f", POD], "yaml", lambda out: "scores" in yaml.safe_load(out)),
    (["score", "-f", POD], "wide", lambda out: out.startswith("NODE") and "node-b" in out),
    (["schedule", "-f", POD], "yaml", lambda out: yaml.safe_load(out)["selectedNode"] == "node-b"),
    (["schedule", "-f", POD], "name", REFUSED),
    (["explain", "-f", POD], "yaml", lambda out: isinstance(yaml.safe_load(out), dict)),
    (["explain", "-f", POD], "wide", REFUSED),
    (["preempt", "-f", str(EXAMPLES / "urgent-pod.yaml")], "yaml", lambda out: "victims" in yaml.safe_load(out)),
    (["preempt", "-f", str(EXAMPLES / "urgent-pod.yaml")], "wide", lambda out: out.startswith("preemption: evict")),
    (["stats"], "yaml", lambda out: yaml.safe_load(out)["nodes"] == 3),
    (["stats"], "wide", REFUSED),
    (["simulate", "-f", str(EXAMPLES / "scenario.yaml")], "json", lambda out: "placements" in json.loads(out)),
    (["simulate", "-f", str(EXAMPLES / "scenario.yaml")], "name", REFUSED),
    (["estimate", "-f", str(EXAMPLES / "node-groups.yaml")], "yaml", lambda out: "estimates" in yaml.safe_load(out)),
    (["estimate", "-f", str(EXAMPLES / "node-groups.yaml")], "wide", lambda out: out.startswith("NODE GROUP")),
    (["drain", "node-a", "--dry-run"], "json", lambda out: json.loads(out)["nodes"][0]["nodeName"] == "node-a"),
    (["drain", "node-a", "--dry-run"], "name", REFUSED),
    (BENCH, "json", lambda out: json.loads(out)["workloads"][BENCH[1]]["decisions"] == 5),
    (BENCH, "wide", REFUSED),
    (["conformance", "cases.jsonl"], "name", REFUSED),
    (["feed", "--kubeconfig", "k.yaml"], "json", REFUSED),
    (["completion", "bash"], "yaml", REFUSED),
    (["wait-ready", "--timeout", "1"], "json", REFUSED),
]


def test_the_output_table_covers_every_command() -> None:
    """A command added without deciding its -o support fails here."""
    assert {argv[0] for argv, _, _ in OUTPUT_CASES} == set(COMMANDS) | {
        "bench",
        "conformance",
        "feed",
        "completion",
        "wait-ready",
    }
    assert set(SUPPORTED_OUTPUTS) == {argv[0] for argv, _, _ in OUTPUT_CASES}


@pytest.mark.parametrize(
    ("argv", "output", "check"),
    [pytest.param(a, o, c, id=f"{a[0]} -o {o}") for a, o, c in OUTPUT_CASES],
)
def test_output_is_honoured_or_refused(
    target: str, argv: list[str], output: str, check: Callable[[str], bool] | str
) -> None:
    reset(target)
    done = podfit("--target", target, *argv, "-o", output)
    if check == REFUSED:
        assert done.returncode == 2 and done.stdout == ""
        assert len(done.stderr.splitlines()) == 1
        assert done.stderr.startswith(f"podfit {argv[0]}: error: -o {output} is not supported here (use table")
    else:
        assert done.returncode == 0, done.stderr
        assert callable(check) and check(done.stdout), done.stdout


# -- get and describe -------------------------------------------------------------------------------


def test_get_nodes_shows_status_taints_and_the_schedulers_allocation(target: str, tmp_path: Path) -> None:
    nodes = [
        make_node("ready").capacity(cpu="4", memory="8Gi", pods="10").json(),
        make_node("cordoned").unschedulable().json(),
        make_node("down").taint("node.kubernetes.io/not-ready", effect="NoExecute").taint("x").json(),
        make_node("both").unschedulable().taint("node.kubernetes.io/unreachable", effect="NoSchedule").json(),
    ]
    pods = [
        # An init container larger than the app containers sets the effective request (1 cpu, 1Gi).
        make_pod("a").node("ready").req(cpu="500m", memory="512Mi").init_container({"cpu": "1", "memory": "1Gi"}),
        make_pod("b").node("ready").req(cpu="250m", memory="256Mi").overhead(cpu="250m"),
        # A terminal pod no longer counts, as in the scheduler's NodeInfo.
        make_pod("done").node("ready").req(cpu="2", memory="2Gi").phase("Succeeded"),
        make_pod("pending").req(cpu="3"),
    ]
    reset(target, write(tmp_path / "c.yaml", [*nodes, *(p.json() for p in pods)]))
    done = podfit("--target", target, "get", "nodes")
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert table["NAME"] == [
        "NAME",
        "STATUS",
        "TAINTS",
        "CPU(REQ/ALLOC)",
        "MEMORY(REQ/ALLOC)",
        "PODS(REQ/ALLOC)",
        "AGE",
    ]
    assert table["ready"][1:6] == ["Ready", "0", "1500m/4", "1.2Gi/8Gi", "2/10"]
    assert table["cordoned"][1:3] == ["Ready,SchedulingDisabled", "0"]
    assert table["down"][1:3] == ["NotReady", "2"]
    assert table["both"][1:3] == ["NotReady,SchedulingDisabled", "1"]


@pytest.mark.parametrize(
    ("argv", "headers", "names"),
    [
        pytest.param(["get", "pods"], ["NAME", "PHASE", "NODE", "PRIORITY", "AGE"], ["lone"], id="default namespace"),
        pytest.param(
            ["get", "pods", "-n", "shop"],
            ["NAME", "PHASE", "NODE", "PRIORITY", "AGE"],
            ["batch-1", "web-1"],
            id="-n",
        ),
        pytest.param(
            ["get", "pods", "-A"],
            ["NAMESPACE", "NAME", "PHASE", "NODE", "PRIORITY", "AGE"],
            ["default", "shop", "shop"],
            id="-A adds NAMESPACE",
        ),
        pytest.param(
            ["-A", "get", "pods"],
            ["NAMESPACE", "NAME", "PHASE", "NODE", "PRIORITY", "AGE"],
            ["default", "shop", "shop"],
            id="-A before the subcommand",
        ),
        pytest.param(
            ["get", "pods", "--all-namespaces", "-o", "wide"],
            ["NAMESPACE", "NAME", "PHASE", "NODE", "PRIORITY", "AGE", "NOMINATED-NODE", "SCHEDULER", "GATES"],
            ["default", "shop", "shop"],
            id="-o wide adds columns",
        ),
    ],
)
def test_get_pods_columns(target: str, tmp_path: Path, argv: list[str], headers: list[str], names: list[str]) -> None:
    lone = make_pod("lone").container().priority(7).gates("wait").json()
    lone["metadata"]["creationTimestamp"] = "2020-01-01T00:00:00Z"
    reset(target, CLUSTER, write(tmp_path / "lone.yaml", [lone]))
    done = podfit("--target", target, *argv)
    assert done.returncode == 0, done.stderr
    lines = [line.split() for line in done.stdout.splitlines()]
    assert lines[0] == headers
    assert sorted(line[0] for line in lines[1:]) == names
    if names == ["lone"]:
        assert lines[1] == ["lone", "Pending", "<none>", "7", lines[1][4]] and lines[1][4].endswith("d")
    if "GATES" in headers:
        assert next(line for line in lines if line[1] == "lone")[-1] == "wait"


def test_get_of_an_empty_namespace_says_so(target: str) -> None:
    reset(target)
    done = podfit("--target", target, "get", "pods", "-n", "nowhere")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "No resources found in nowhere namespace.\n")


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        pytest.param(
            ["describe", "node", "node-b"],
            [
                "Name:                 node-b",
                "Labels:               disktype=ssd",
                "Taints:               <none>",
                "Allocated resources:",
                "  cpu        3 (75%)     4",
                "Non-terminated Pods:  (1 in total)",
                "  shop        batch-1   Running   10",
            ],
            id="a node: labels, taints, allocated vs allocatable, its pods",
        ),
        pytest.param(
            ["describe", "node", "node-gpu"],
            ["Taints:               nvidia.com/gpu=present:NoSchedule", "Non-terminated Pods:  (0 in total)"],
            id="a tainted node without pods",
        ),
        pytest.param(
            ["describe", "pod", "web-1", "-n", "shop"],
            [
                "Namespace:            shop",
                "Node:                 node-a",
                "Phase:                Running",
                "Containers:",
                "    Requests:   cpu: 1500m",
            ],
            id="a pod: its node, phase and requests",
        ),
    ],
)
def test_describe(target: str, argv: list[str], expected: list[str]) -> None:
    reset(target)
    done = podfit("--target", target, *argv)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for line in expected:
        assert line in lines, f"{line!r} not in\n{done.stdout}"


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["get", "node", "ghost"], id="get"),
        pytest.param(["describe", "node", "ghost"], id="describe node"),
        pytest.param(["describe", "pod", "ghost", "-n", "shop"], id="describe pod"),
    ],
)
def test_a_missing_object_is_kubectls_not_found(target: str, argv: list[str]) -> None:
    done = podfit("--target", target, *argv)
    resource = "nodes" if argv[1] == "node" else "pods"
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == f'Error from server (NotFound): {resource} "ghost" not found\n'


def test_describe_pod_lists_tolerations(target: str, tmp_path: Path) -> None:
    pod = (
        make_pod("t")
        .container()
        .toleration("gpu", value="yes", effect="NoSchedule")
        .toleration(operator="Exists")
        .json()
    )
    reset(target, CLUSTER, write(tmp_path / "t.yaml", [pod]))
    done = podfit("--target", target, "describe", "pod", "t")
    lines = done.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Tolerations:"))
    assert lines[start : start + 2] == [
        "Tolerations:          gpu=yes:NoSchedule",
        "                      <all> op=Exists",
    ]


# -- delete -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "code", "out", "err"),
    [
        pytest.param(["delete", "pod", "web-1", "-n", "shop"], 0, 'pod "web-1" deleted\n', "", id="an object"),
        pytest.param(
            ["delete", "pod", "ghost"],
            1,
            "",
            'Error from server (NotFound): pods "ghost" not found\n',
            id="a missing object is NotFound, exit 1",
        ),
        pytest.param(
            ["delete", "pod", "ghost", "web-1", "-n", "shop"],
            1,
            'pod "web-1" deleted\n',
            'Error from server (NotFound): pods "ghost" not found\n',
            id="the others are still deleted",
        ),
        pytest.param(
            ["delete", "node", "ghost", "--ignore-not-found"], 0, "", "", id="--ignore-not-found makes it exit 0"
        ),
        pytest.param(
            ["delete", "-f", str(EXAMPLES / "urgent-pod.yaml"), "-f", str(EXAMPLES / "pod.yaml")],
            1,
            "",
            'Error from server (NotFound): pods "urgent" not found\n'
            'Error from server (NotFound): pods "web-2" not found\n',
            id="-f names objects that are not there",
        ),
    ],
)
def test_delete(target: str, argv: list[str], code: int, out: str, err: str) -> None:
    reset(target)
    done = podfit("--target", target, *argv)
    assert (done.returncode, done.stdout, done.stderr) == (code, out, err)


def test_delete_f_names_the_document_of_a_kind_podfit_does_not_hold(target: str, tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_text("kind: Node\nmetadata: {name: a}\n---\nkind: Deployment\nmetadata: {name: web}\n")
    done = podfit("--target", target, "delete", "-f", str(path))
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith(f"podfit: {path}: document 2: kind: 'Deployment' is not a kind podfit holds")


def test_delete_f_deletes_the_objects_of_the_manifests(target: str) -> None:
    reset(target)
    done = podfit("--target", target, "delete", "-f", CLUSTER)
    assert done.returncode == 0, done.stderr
    assert 'node "node-a" deleted' in done.stdout.splitlines() and 'pod "web-1" deleted' in done.stdout.splitlines()
    stats = json.loads(podfit("--target", target, "stats", "-o", "json").stdout)
    assert (stats["nodes"], stats["pods"], stats["namespaces"]) == (0, 0, 0)


# -- version and completion -------------------------------------------------------------------------


def test_version() -> None:
    done = podfit("--version")
    assert (done.returncode, done.stdout) == (0, f"podfit {version('podfit')}\n")


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        pytest.param("bash", "-F _shtab_podfit podfit", id="bash"),
        pytest.param("zsh", "#compdef podfit", id="zsh"),
        pytest.param("fish", "complete -c podfit -n __fish_use_subcommand -a describe", id="fish"),
    ],
)
def test_completion(shell: str, marker: str) -> None:
    done = podfit("completion", shell)
    assert done.returncode == 0, done.stderr
    # Subcommands and their flags, e.g. delete's --ignore-not-found and get's --all-namespaces, are offered.
    assert marker in done.stdout
    assert all(word in done.stdout for word in ("describe", "completion", "ignore-not-found", "all-namespaces"))
    if shell == "bash":
        syntax = subprocess.run(["bash", "-n"], input=done.stdout, capture_output=True, text=True, timeout=30)
        assert syntax.returncode == 0, syntax.stderr


# -- big inputs -------------------------------------------------------------------------------------


def test_apply_replace_prints_one_summary_line_and_the_kinds_at_v(target: str, tmp_path: Path) -> None:
    """--replace sums up like apply: one line, the per-kind table only at -v."""
    seed = write(tmp_path / "seed.yaml", [make_node("gone").json()])
    reset(target, seed)
    path = write(
        tmp_path / "two.yaml",
        [make_node("a").json(), make_node("b").json(), make_pod("p").container().node("a").json()],
    )
    done = podfit("--target", target, "apply", "--replace", "-f", path)
    generation = json.loads(podfit("--target", target, "stats", "-o", "json").stdout)["generation"]
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"2 nodes, 1 pod replaced, 1 deleted, 0 unchanged (generation {generation})\n"
    again = podfit("--target", target, "apply", "--replace", "-f", path, "-v")
    lines = again.stdout.splitlines()
    assert lines[0].split() == ["KIND", "UPSERTED", "DELETED", "UNCHANGED"]
    assert lines[1].split() == ["Node", "0", "0", "2"]
    assert lines[-1].startswith("0 objects replaced, 0 deleted, 3 unchanged")


def test_apply_prints_one_summary_line_across_chunks(target: str, tmp_path: Path) -> None:
    """2,500 nodes and 1,000 pods: more than one Apply call, one line of summary."""
    reset(target, write(tmp_path / "empty.yaml", [make_node("seed").json()]))
    documents = [make_node(f"n{i}").json() for i in range(2500)] + [
        make_pod(f"p{i}").node(f"n{i}").req(cpu="1m").json() for i in range(1000)
    ]
    path = write(tmp_path / "big.yaml", documents)
    done = podfit("--target", target, "apply", "-f", path)
    stats = json.loads(podfit("--target", target, "stats", "-o", "json").stdout)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"2500 nodes, 1000 pods applied, 0 unchanged, 0 stale (generation {stats['generation']})\n"
    assert (stats["nodes"], stats["pods"]) == (2501, 1000)
    again = podfit("--target", target, "apply", "-f", path, "-v")
    lines = again.stdout.splitlines()
    assert lines[-1] == f"0 objects applied, 3500 unchanged, 0 stale (generation {stats['generation']})"
    assert len(lines) == 3501 and lines[0] == "node/n0 unchanged" and lines[2500] == "pod/default/p0 unchanged"

    # A reader that stops early (| head) ends the table quietly, as with kubectl.
    reader = subprocess.Popen(
        [PODFIT, "--target", target, "get", "nodes"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert reader.stdout is not None and reader.stderr is not None
    assert reader.stdout.readline().split()[0] == "NAME"
    reader.stdout.close()
    assert reader.wait(timeout=60) == 141 and reader.stderr.read() == ""


def test_yaml_is_read_with_libyaml_when_present() -> None:
    from podfit.client import manifests

    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert manifests._YAML_LOADER is expected


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param(
            "kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\n---\n"
            "kind: Node\nmetadata: {name: c}\nspec: {taints: [{key: k, effect: Sometimes}]}\n",
            "podfit: INVALID_ARGUMENT: {f}: document 3: spec.taints[0].effect: 'Sometimes' must be NoSchedule, "
            "PreferNoSchedule or NoExecute",
            id="the server's field path, in the file's third document",
        ),
        pytest.param(
            "kind: Node\nmetadata: {name: a}\n---\nkind: Node\nmetadata: {name: b}\nspec: {taints: 5}\n",
            "podfit: {f}: document 2: spec.taints: ",
            id="a shape the client cannot convert",
        ),
        pytest.param(
            "kind: NodeList\nitems:\n- {kind: Node, metadata: {name: a}}\n- {kind: Gadget, metadata: {name: b}}\n",
            "podfit: {f}: document 1: items[1]: kind: 'Gadget' is not a kind podfit holds",
            id="an item of a List",
        ),
        pytest.param("kind: Node\nmetadata: {name: [\n", "podfit: {f}: not valid YAML or JSON: ", id="broken YAML"),
        pytest.param(
            "kind: Node\n---\n- a list\n", "podfit: {f}: document 2: a manifest must be a mapping", id="a list"
        ),
        pytest.param(
            "kind: Node\nmetadata: {name: a}\n---\n---\n- a list\n",
            "podfit: {f}: document 3: a manifest must be a mapping",
            id="an empty document keeps its number",
        ),
    ],
)
def test_manifest_errors_name_the_file_and_document(target: str, tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    done = podfit("--target", target, "apply", "-f", str(path))
    assert done.returncode == 1 and done.stdout == ""
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(error.replace("{f}", str(path))), done.stderr


@pytest.mark.parametrize("command", [["apply"], ["schedule", "--assume"]], ids=["apply", "schedule --assume"])
@pytest.mark.parametrize(
    ("flags", "namespace"),
    [
        pytest.param(["-n", "team"], "team", id="-n fills in a missing namespace"),
        pytest.param([], "default", id="without -n: default"),
    ],
)
def test_namespace_flag_fills_in_manifests(
    target: str, tmp_path: Path, command: list[str], flags: list[str], namespace: str
) -> None:
    reset(target)
    pod = make_pod("solo").container().json()
    del pod["metadata"]["namespace"]
    done = podfit("--target", target, *command, "-f", write(tmp_path / "p.yaml", [pod]), *flags)
    assert done.returncode == 0, done.stderr
    found = podfit("--target", target, "get", "pod", "solo", "-n", namespace, "-o", "json")
    assert found.returncode == 0 and json.loads(found.stdout)["metadata"].get("namespace", "default") == namespace


def test_apply_refuses_a_namespace_that_contradicts_n(target: str) -> None:
    done = podfit("--target", target, "apply", "-f", CLUSTER, "-n", "other")
    assert done.returncode == 1
    assert done.stderr == f"podfit: {CLUSTER}: document 5: its namespace 'shop' does not match --namespace 'other'\n"


def _on_terminal(argv: list[str]) -> tuple[int, str, str]:
    """Runs with stderr on a pseudo-terminal (stdout stays a pipe); returns code, stdout, terminal text."""
    master, slave = pty.openpty()
    # A terminal of 100 columns: a fresh pseudo-terminal has none, and a bar 0 columns wide is drawn as nothing.
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 100, 0, 0))
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, text=True)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert process.stdout is not None
    out = process.stdout.read()
    return process.wait(timeout=120), out, b"".join(chunks).decode(errors="replace")


def _small_cases(tmp_path: Path) -> str:
    path = tmp_path / "cases.jsonl"
    path.write_text("".join(json.dumps(case) + "\n" for case in load_cases(CASES)[:3]))
    return str(path)


@pytest.mark.parametrize("terminal", [pytest.param(True, id="a terminal"), pytest.param(False, id="a pipe")])
@pytest.mark.parametrize(
    ("command", "label"),
    [
        pytest.param("apply", "read:", id="apply reading"),
        pytest.param("apply", "apply:", id="apply sending"),
        pytest.param("conformance", "cases:", id="conformance"),
        pytest.param("bench", "bench:", id="bench"),
    ],
)
def test_progress_bar_only_on_a_terminal(target: str, tmp_path: Path, terminal: bool, command: str, label: str) -> None:
    reset(target)
    if command == "apply":
        nodes = [make_node(f"x{i}").json() for i in range(3)]
        argv = [PODFIT, "--target", target, "apply", "-f", write(tmp_path / "n.yaml", nodes)]
        summary = "3 nodes applied, 0 unchanged"
    elif command == "conformance":
        argv = [PODFIT, "--target", target, "conformance", _small_cases(tmp_path)]
        summary = "3 passed, 0 failed"
    else:
        argv = [PODFIT, "--target", target, *BENCH]
        summary = f"| {BENCH[1]} | grpc | 5 |"
    if terminal:
        code, out, err = _on_terminal(argv)
    else:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        code, out, err = done.returncode, done.stdout, done.stderr
    assert code == 0, err
    assert summary in out and "\r" not in out
    if terminal:
        assert label in err and "%|" in err
    else:
        assert err == ""


README_START = (
    "(nohup {server} {flags} > {log} 2>&1 & echo $! > {pid}) && "
    "{podfit}{target} wait-ready --pid-file {pid} --log {log} --timeout 30"
)


def _start_as_the_readme_does(
    tmp_path: Path, flags: str, target: str = "", env: dict[str, str] | None = None, log: bool = True
) -> subprocess.CompletedProcess[str]:
    """The README's start, as written there (a server in the background, then wait-ready), with
    ``--target`` when one is given and without ``--log`` when ``log`` is off."""
    start = README_START if log else README_START.replace(" --log {log}", "")
    command = start.format(
        server=Path(sys.executable).parent / "podfit-server",
        podfit=PODFIT,
        flags=flags,
        log=tmp_path / "podfit-server.log",
        pid=tmp_path / ".podfit-server.pid",
        target=f" --target {target}" if target else "",
    )
    return subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, env=env)


def test_the_readme_start_fails_loudly_when_the_server_cannot_start(tmp_path: Path) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        busy = held.getsockname()[1]
        flags = f"--grpc-addr 127.0.0.1:{busy} --extender-addr off --metrics-addr off"
        result = _start_as_the_readme_does(tmp_path, flags, f"127.0.0.1:{busy}")
    assert result.returncode == 1
    assert "did not start" in result.stderr and f"grpcAddr: cannot listen on 127.0.0.1:{busy}" in result.stderr


def test_the_readme_start_returns_once_the_server_answers(tmp_path: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    flags = f"--grpc-addr 127.0.0.1:{port} --extender-addr off --metrics-addr off"
    result = _start_as_the_readme_does(tmp_path, flags, f"127.0.0.1:{port}")
    pid = int((tmp_path / ".podfit-server.pid").read_text())
    try:
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == f"podfit-server is serving on 127.0.0.1:{port}"
    finally:
        os.kill(pid, signal.SIGTERM)


@pytest.mark.parametrize(
    ("where", "log_format"),
    [
        pytest.param("environment", "json", id="PODFIT_GRPC_ADDR set, as a user whose 50051 is busy sets it"),
        pytest.param("environment, no log", "json", id="PODFIT_GRPC_ADDR set and no log given: the variable says"),
        pytest.param("flag", "json", id="--grpc-addr given: the log says where it listens"),
        pytest.param("flag", "text", id="--grpc-addr given, text log: the log line says where"),
        pytest.param("wildcard", "json", id="listening on 0.0.0.0 (with a token): reached on this machine"),
    ],
)
def test_wait_ready_follows_the_server_it_waits_for(tmp_path: Path, where: str, log_format: str) -> None:
    """The README's start without --target: wait-ready finds the server where it listens, not on 50051."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PODFIT_LOG_FORMAT": log_format}
    env.pop("PODFIT_GRPC_ADDR", None)
    flags = "--extender-addr off --metrics-addr off"
    if where.startswith("environment"):
        env["PODFIT_GRPC_ADDR"] = f"127.0.0.1:{port}"
    elif where == "flag":
        flags += f" --grpc-addr 127.0.0.1:{port}"
    else:
        token = tmp_path / "token"
        token.write_text("s3cret-token-for-the-test\n")
        flags += f" --grpc-addr 0.0.0.0:{port} --auth-token-file {token}"
        env["PODFIT_TOKEN"] = "s3cret-token-for-the-test"
    result = _start_as_the_readme_does(tmp_path, flags, env=env, log=where != "environment, no log")
    pid = int((tmp_path / ".podfit-server.pid").read_text())
    try:
        assert result.returncode == 0, result.stderr + (tmp_path / "podfit-server.log").read_text()
        assert result.stdout.strip() == f"podfit-server is serving on 127.0.0.1:{port}"
    finally:
        os.kill(pid, signal.SIGTERM)


# -- output that scales -----------------------------------------------------------------------------


def node_rows(out: str) -> list[str]:
    return [line.split()[0] for line in out.splitlines() if line.startswith("n-")]


@pytest.fixture
def wide_cluster(target: str, tmp_path: Path) -> str:
    """30 nodes: the first 25 too small for the pod, the last 5 fit it (and tie)."""
    nodes = [
        make_node(f"n-{i:02}").capacity(cpu="1" if i < 25 else "8", memory="8Gi", pods="10").json() for i in range(30)
    ]
    reset(target, write(tmp_path / "c.yaml", nodes))
    return write(tmp_path / "pod.yaml", [make_pod("big").req(cpu="2").json()])


@pytest.mark.parametrize(
    ("command", "default_rows", "summary"),
    [
        pytest.param("filter", 20, "... and 10 more; -o wide for all", id="filter"),
        pytest.param("score", 5, "", id="score-only-feasible"),
    ],
)
def test_tables_show_the_top_rows_and_wide_shows_all(
    target: str, wide_cluster: str, command: str, default_rows: int, summary: str
) -> None:
    short = podfit("--target", target, command, "-f", wide_cluster)
    assert short.returncode == 0, short.stderr
    shown = node_rows(short.stdout)
    assert len(shown) == default_rows
    assert (summary in short.stdout) if summary else ("more; -o wide" not in short.stdout)
    if command == "filter":
        # The nodes that fit come first, so a capped table still shows them.
        assert shown[:5] == [f"n-{i}" for i in range(25, 30)]
    full = podfit("--target", target, command, "-f", wide_cluster, "-o", "wide")
    assert full.returncode == 0, full.stderr
    assert len(node_rows(full.stdout)) == (30 if command == "filter" else 5)
    assert "more; -o wide" not in full.stdout


def test_schedule_names_a_few_ties_and_wide_names_all(target: str, tmp_path: Path) -> None:
    nodes = [make_node(f"n-{i:02}").capacity(cpu="8", memory="8Gi", pods="10").json() for i in range(30)]
    reset(target, write(tmp_path / "c.yaml", nodes))
    pod = write(tmp_path / "pod.yaml", [make_pod("p").req(cpu="1").json()])
    short = podfit("--target", target, "schedule", "-f", pod)
    assert short.returncode == 0, short.stderr
    first = short.stdout.splitlines()[0]
    assert first.endswith(" and 25 more)") and first.count("n-") == 6, first
    assert len(node_rows(short.stdout)) == 20 and "... and 10 more; -o wide for all" in short.stdout
    full = podfit("--target", target, "schedule", "-f", pod, "-o", "wide")
    assert full.stdout.splitlines()[0].count("n-") == 31
    assert len(node_rows(full.stdout)) == 30


def test_estimate_names_a_few_unscheduled_pods(target: str, tmp_path: Path) -> None:
    group = {
        "kind": "NodeGroup",
        "id": "tiny",
        "currentSize": 0,
        "maxSize": 1,
        "template": make_node("tiny").capacity(cpu="1", memory="8Gi", pods="10").json(),
    }
    pods = [make_pod(f"p-{i:02}").req(cpu="1").owner("ReplicaSet", "rs").json() for i in range(12)]
    path = write(tmp_path / "groups.yaml", [group, *pods])
    short = podfit("--target", target, "estimate", "-f", path)
    assert short.returncode == 0, short.stderr
    assert " and 6 more" in short.stdout and short.stdout.count("default/p-") == 5, short.stdout
    full = podfit("--target", target, "estimate", "-f", path, "-o", "wide")
    assert full.stdout.count("default/p-") == 11, full.stdout


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        pytest.param(
            ["schedul", "-f", POD], 'unknown command "schedul" for "podfit"; did you mean "schedule"?', id="typo"
        ),
        pytest.param(
            ["--target", "127.0.0.1:1", "explian", "-f", POD],
            'unknown command "explian" for "podfit"; did you mean "explain"?',
            id="after-global-flags",
        ),
        pytest.param(
            ["zzzz"], 'unknown command "zzzz" for "podfit" (commands: apply, delete, get,', id="no-close-match"
        ),
    ],
)
def test_a_mistyped_subcommand_gets_did_you_mean(argv: list[str], error: str) -> None:
    done = podfit(*argv)
    assert done.returncode == 2 and done.stdout == ""
    assert error in done.stderr.splitlines()[-1], done.stderr


def test_all_namespaces_is_refused_where_it_means_nothing() -> None:
    done = podfit("-A", "schedule", "-f", POD)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == "podfit schedule: error: -A/--all-namespaces applies to get only"


def counters(body: Any, path: str = "") -> dict[str, Any]:
    """Every generation-like field of a JSON/YAML answer, by path."""
    found: dict[str, Any] = {}
    items = body.items() if isinstance(body, dict) else enumerate(body) if isinstance(body, list) else ()
    for key, value in items:
        where = f"{path}.{key}"
        if isinstance(key, str) and key.lower().endswith("generation"):
            found[where] = value
        found.update(counters(value, where))
    return found


@pytest.mark.parametrize(
    "argv",
    [
        pytest.param(["stats"], id="stats"),
        pytest.param(["schedule", "-f", POD], id="schedule"),
        pytest.param(["filter", "-f", POD], id="filter"),
        pytest.param(["apply", "--replace", "-f", CLUSTER], id="apply-replace"),
        pytest.param(["simulate", "-f", str(EXAMPLES / "scenario.yaml")], id="simulate"),
    ],
)
@pytest.mark.parametrize("output", ["json", "yaml"])
def test_generations_are_numbers_in_json_and_yaml(target: str, argv: list[str], output: str) -> None:
    reset(target)
    done = podfit("--target", target, *argv, "-o", output)
    assert done.returncode == 0, done.stderr
    found = counters(json.loads(done.stdout) if output == "json" else yaml.safe_load(done.stdout))
    assert found, "no generation in the answer"
    assert all(type(v) is int and v >= 0 for v in found.values()), found


@pytest.mark.parametrize(
    ("argv", "header", "row"),
    [
        pytest.param(
            ["get", "pdb", "-n", "shop"],
            "NAME  MIN AVAILABLE  MAX UNAVAILABLE  ALLOWED DISRUPTIONS  AGE",
            "web   1              N/A              0                    <unknown>",
            id="pdb",
        ),
        pytest.param(
            ["-A", "get", "poddisruptionbudgets"],
            "NAMESPACE  NAME  MIN AVAILABLE  MAX UNAVAILABLE  ALLOWED DISRUPTIONS  AGE",
            "shop       web   1              N/A              0                    <unknown>",
            id="pdb -A",
        ),
    ],
)
def test_get_pdb_shows_kubectls_budget_columns(target: str, argv: list[str], header: str, row: str) -> None:
    reset(target)
    done = podfit("--target", target, *argv)
    assert done.returncode == 0, done.stderr
    # Columns are separated by two or more spaces (a header such as "MIN AVAILABLE" has one inside).
    table = [re.split(r" {2,}", line.strip()) for line in done.stdout.splitlines()]
    assert table == [re.split(r" {2,}", header), re.split(r" {2,}", row)]


@pytest.mark.parametrize(
    ("manifest", "state"),
    [
        pytest.param({}, "pending", id="pending"),
        pytest.param({"status": {"allocation": {"devices": {}}}}, "allocated", id="allocated"),
        pytest.param(
            {"status": {"allocation": {"devices": {}}, "reservedFor": [{"name": "p"}]}},
            "allocated,reserved",
            id="allocated and reserved",
        ),
        pytest.param({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}}, "deleted", id="deleted"),
        pytest.param(
            {"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}, "status": {"allocation": {"devices": {}}}},
            "deleted,allocated",
            id="deleted while allocated",
        ),
    ],
)
def test_resource_claim_state_is_kubectls(manifest: dict[str, Any], state: str) -> None:
    assert resource_claim_state(manifest) == state


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_kind_prints_as_a_manifest_with_its_api_version(kind: str) -> None:
    manifest = object_to_manifest(manifest_to_object({"kind": kind, "metadata": {"name": "x"}}))
    assert (manifest["kind"] == kind and "/" in manifest["apiVersion"]) or manifest["apiVersion"] == "v1"


def _pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "strict"}, "spec": spec}


_CONTAINER = {"name": "c", "image": "nginx"}


_STRICT_CASES = [
    ("unknown field", _pod(containrs=[_CONTAINER]), 'unknown field "spec.containrs"'),
    (
        "unknown field in a list",
        _pod(containers=[{**_CONTAINER, "imagee": "x"}]),
        'unknown field "spec.containers[0].imagee"',
    ),
    (
        "wrong type",
        _pod(containers=[{**_CONTAINER, "ports": [{"containerPort": "http"}]}]),
        "spec.containers[0].ports[0].containerPort: expected an integer, got string 'http'",
    ),
    (
        "wrong type in another kind",
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "r"}, "spec": {"replicas": "three"}},
        "spec.replicas: expected an integer, got string 'three'",
    ),
    ("a pod without containers", _pod(), "spec.containers: Required value"),
]


@pytest.mark.parametrize(
    ("command", "document", "message"),
    [
        pytest.param(command, document, message, id=f"{command}: {name}")
        for command in ("apply", "schedule")
        for name, document, message in _STRICT_CASES
        if command == "apply" or document["kind"] == "Pod"
    ],
)
def test_manifests_are_checked_as_kubectl_checks_them(
    target: str, tmp_path: Path, command: str, document: dict[str, Any], message: str
) -> None:
    path = write(tmp_path / "bad.yaml", [document])
    done = podfit("--target", target, command, "-f", path)
    assert done.returncode == 1
    assert done.stderr.strip() == f"podfit: {path}: document 1: {message}"
    assert "Failed to parse" not in done.stderr and "invalid literal" not in done.stderr


def test_apply_of_the_examples_directory_leaves_out_the_what_if_files(target: str) -> None:
    reset(target)
    done = podfit("--target", target, "apply", "-f", str(EXAMPLES))
    assert done.returncode == 0, done.stderr
    assert "skipped 3 what-if files" in done.stderr and "/node-groups.yaml" in done.stderr
    assert "gpu-node-groups.yaml" in done.stderr
    assert "scenario.yaml" in done.stderr and "podfit simulate -f" in done.stderr
    names = podfit("--target", target, "get", "pods", "-A", "-o", "name")
    # The what-if files' pods are questions, not cluster objects.
    pending = yaml.safe_load((EXAMPLES / "scenario.yaml").read_text().split("---")[-1])["metadata"]["name"]
    assert f"pod/{pending}" not in names.stdout


@pytest.mark.parametrize("count", [1, 2], ids=["one pod", "two pods"])
@pytest.mark.parametrize("assume", [False, True], ids=["without --assume", "with --assume"])
def test_schedule_reserves_only_with_assume_for_one_pod_or_several(
    target: str, tmp_path: Path, count: int, assume: bool
) -> None:
    reset(target)
    before = podfit("--target", target, "stats", "-o", "json")
    pods = [make_pod(f"r{i}", "shop").container({"cpu": "100m"}).json() for i in range(count)]
    done = podfit(
        "--target", target, "schedule", "-f", write(tmp_path / "p.yaml", pods), *(["--assume"] if assume else [])
    )
    assert done.returncode == 0, done.stderr
    after = podfit("--target", target, "stats", "-o", "json")
    bound = json.loads(after.stdout)["boundPods"] - json.loads(before.stdout)["boundPods"]
    assert bound == (count if assume else 0)
    if count > 1 and not assume:
        assert "nothing reserved (--assume to reserve them)" in done.stdout
