"""``podfit-server`` as a subprocess with flags and environment of a test's choosing (shutdown, memo)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time

from podfit.client import AsyncClient, PodfitError
from podfit.client.conformance import NO_OTHER_LISTENERS, free_port


class ServerProcess:
    """``podfit-server`` as a subprocess on a free loopback port, with its own flags."""

    def __init__(self, *flags: str, env: dict[str, str] | None = None) -> None:
        self.target = f"127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(
            [sys.executable, "-m", "podfit.server.app", "--grpc-addr", self.target, *NO_OTHER_LISTENERS, *flags],
            env={**os.environ, "PODFIT_LOG_FORMAT": "text", **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )

    async def ready(self, client: AsyncClient) -> None:
        for _ in range(300):
            assert self.process.poll() is None, self.log()
            try:
                await client.stats(timeout=1)
                return
            except PodfitError:
                await asyncio.sleep(0.05)
        raise AssertionError("podfit-server did not start")

    def signal(self, signum: int = signal.SIGTERM) -> float:
        self.process.send_signal(signum)
        return time.monotonic()

    async def exited(self, within: float) -> float:
        """Waits for the process to exit; the monotonic time it was seen gone."""
        deadline = time.monotonic() + within
        while self.process.poll() is None:
            assert time.monotonic() < deadline, f"podfit-server still running {within} s later"
            await asyncio.sleep(0.01)
        return time.monotonic()

    def log(self) -> str:
        return self.process.stderr.read().decode() if self.process.stderr and self.process.poll() is not None else ""

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
