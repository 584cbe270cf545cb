"""An extender that decides nothing, for the bound on any extender (not a test; run by hand).

    python -m benchmarks.null_extender --port 8888 [--server raw|aiohttp]

Answers kube-scheduler's filter with every node it was sent and prioritize with 0 for each, as fast as
its HTTP server allows. kube-scheduler's loop with this extender shows what the protocol itself costs
on the machine (two HTTP round trips per pod, kube-scheduler's JSON work on both sides), so the distance
from there to podfit is podfit's own. ``raw`` is a bare asyncio protocol (HTTP/1.1, keep-alive,
Content-Length bodies only); ``aiohttp`` is the framework podfit's extender runs on.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import msgspec

_ARGS = msgspec.json.Decoder(dict[str, msgspec.Raw])
_NAMES = msgspec.json.Decoder(list[str] | None)


def answer(path: str, body: bytes) -> bytes:
    args = _ARGS.decode(body)
    names = _NAMES.decode(args["NodeNames"]) if "NodeNames" in args else None
    if path.endswith("/filter"):
        if names is not None:
            return msgspec.json.encode({"NodeNames": names, "FailedNodes": {}, "Error": ""})
        return b'{"Nodes":' + bytes(args["Nodes"]) + b',"FailedNodes":{},"Error":""}'
    if names is None:
        nodes: Any = msgspec.json.decode(args["Nodes"])
        names = [item["metadata"]["name"] for item in nodes["items"]]
    return msgspec.json.encode([{"Host": name, "Score": 0} for name in names])


class _Raw(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.buffer = b""

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            head_end = self.buffer.find(b"\r\n\r\n")
            if head_end < 0:
                return
            head = self.buffer[:head_end].decode("latin-1").split("\r\n")
            length = 0
            for line in head[1:]:
                key, _, value = line.partition(":")
                if key.strip().lower() == "content-length":
                    length = int(value)
            if len(self.buffer) < head_end + 4 + length:
                return
            body = self.buffer[head_end + 4 : head_end + 4 + length]
            self.buffer = self.buffer[head_end + 4 + length :]
            out = answer(head[0].split(" ")[1], body)
            self.transport.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(out) + out
            )


async def serve(port: int, server: str) -> None:
    if server == "raw":
        loop = asyncio.get_running_loop()
        listener = await loop.create_server(_Raw, "127.0.0.1", port)
        async with listener:
            await listener.serve_forever()
    from aiohttp import web

    async def handle(request: web.Request) -> web.Response:
        return web.Response(body=answer(request.path, await request.read()), content_type="application/json")

    app = web.Application()
    app.router.add_post("/scheduler/{verb}", handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    await asyncio.Event().wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=8888)
    parser.add_argument("--server", choices=["raw", "aiohttp"], default="raw")
    args = parser.parse_args()
    asyncio.run(serve(args.port, args.server))


if __name__ == "__main__":
    main()
