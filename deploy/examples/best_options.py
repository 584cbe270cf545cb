"""Ask podfit's cluster-autoscaler expander to choose, as cluster-autoscaler would ask it.

    python deploy/examples/best_options.py --target localhost:9443 --ca-file ca.crt

The options are the two node groups of deploy/examples/node-groups.yaml (3 small nodes, or 1 large
one) for its six pending api pods, sent the way cluster-autoscaler sends them: pods and template nodes
in Kubernetes protobuf. podfit answers with the options it prefers.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import grpc
from grpcplugin import expander_pb2 as ex
from grpcplugin import expander_pb2_grpc as ex_grpc
from podfit.client.manifests import load_manifests
from podfit.k8s import protobuf

EXAMPLES = Path(__file__).resolve().parent
NODE_COUNTS = {"small": 3, "large": 1}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="localhost:9443", help="podfit's --ca-expander-addr")
    parser.add_argument("--ca-file", required=True, help="the CA that signed podfit's certificate")
    args = parser.parse_args()
    documents = load_manifests(str(EXAMPLES / "node-groups.yaml"))
    pods = [protobuf.encode(d) for d in documents if d["kind"] == "Pod"]
    groups = [d for d in documents if d["kind"] == "NodeGroup"]
    request = ex.BestOptionsRequest(
        options=[
            ex.Option(nodeGroupId=g["id"], nodeCount=NODE_COUNTS[g["id"]], debug=g["id"], podBytes=pods)
            for g in groups
        ],
        nodeBytesMap={g["id"]: protobuf.encode(g["template"]) for g in groups},
    )
    credentials = grpc.ssl_channel_credentials(Path(args.ca_file).read_bytes())
    with grpc.secure_channel(args.target, credentials) as channel:
        response = ex_grpc.ExpanderStub(channel).BestOptions(request, timeout=10)
    for option in response.options:
        print(f"{option.nodeGroupId}: {option.nodeCount} node(s) for {len(option.podBytes)} pods")


if __name__ == "__main__":
    main()
