"""Run a real `Server` (HTTP through uvicorn, gRPC) on loopback ports inside the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass

from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.server import RouterExtension, Server
from vllm_server.source import LlmSource
from vllm_server.state import ServerState


@dataclass
class RunningServer:
    """A server serving in the background, and how to reach it."""

    server: Server
    shutdown: asyncio.Event
    task: asyncio.Task[None]

    @property
    def state(self) -> ServerState:
        """The server's state."""
        assert self.server.state is not None
        return self.server.state

    @property
    def base_url(self) -> str:
        """`http(s)://127.0.0.1:PORT`."""
        scheme = "https" if self.server.config.server.ssl_certfile else "http"
        return f"{scheme}://127.0.0.1:{self.server.http_port}"

    @property
    def grpc_target(self) -> str:
        """`127.0.0.1:PORT`."""
        return f"127.0.0.1:{self.server.grpc_port}"

    async def wait_ready(self, limit: float = 300) -> None:
        """Wait until the server takes requests (its Llm is ready)."""
        ready = asyncio.ensure_future(self.state.subscribe_readiness().wait_for(bool))
        done, _ = await asyncio.wait([ready, self.task], timeout=limit, return_when=asyncio.FIRST_COMPLETED)
        if self.task in done:
            ready.cancel()
            self.task.result()
            raise RuntimeError("the server stopped before it was ready")
        if ready not in done:
            ready.cancel()
            raise TimeoutError("the server did not become ready")

    async def stop(self) -> None:
        """Drain and stop the server."""
        self.shutdown.set()
        await self.task


async def start_server(
    config: ServerConfig | FrontendConfig,
    source: LlmSource,
    *,
    ready: bool = True,
    extensions: Sequence[RouterExtension] = (),
) -> RunningServer:
    """Start `Server(config, source)` on the configured (usually ephemeral) ports, with `extensions`."""
    server = Server(config, source)
    for extend in extensions:
        server.router_extension(extend)
    shutdown = asyncio.Event()
    task = asyncio.create_task(server.serve(shutdown))
    listening = asyncio.ensure_future(server.listening.wait())
    done, _ = await asyncio.wait([listening, task], timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task in done:
        listening.cancel()
        task.result()
        raise RuntimeError("the server stopped while starting")
    running = RunningServer(server, shutdown, task)
    if ready:
        await running.wait_ready()
    return running
