"""`Server`: HTTP (FastAPI + uvicorn) and gRPC listeners over any Llm, with graceful shutdown.

    server = Server(ServerConfig(port=8000), LlmSource.provided(my_llm))
    server.router_extension(lambda app, state: app.include_router(my_router))
    await server.serve(shutdown_event)

On shutdown (the event is set: the CLI sets it on SIGTERM / SIGINT) readiness turns false at once
(HTTP /ready 503, gRPC health NOT_SERVING), new requests get 503 / UNAVAILABLE, in-flight requests get
`shutdown_grace_period` seconds to finish, the rest are cancelled (which aborts them), then the
listeners close and an engine core the server owns is shut down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator

import uvicorn
from fastapi import FastAPI

from vllm_llm import EngineCoreLlm, Llm, LlmError
from vllm_llm.wire import LoraRequest
from vllm_server.affinity import keep_off_engine_cpus
from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.grpc.listener import GrpcFrontend
from vllm_server.grpc.services import public_services
from vllm_server.http.app import build_app
from vllm_server.runtime import freeze_heap
from vllm_server.source import LlmSource
from vllm_server.state import ServerState
from vllm_server.wiring import build_state

logger = logging.getLogger(__name__)

RouterExtension = Callable[[FastAPI, ServerState], None]


class _Uvicorn(uvicorn.Server):
    """uvicorn without its own signal handling: the caller owns shutdown."""

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield


class Server:
    """The server over an `LlmSource` (see the module docstring)."""

    def __init__(self, config: ServerConfig | FrontendConfig, source: LlmSource) -> None:
        frontend = config if isinstance(config, FrontendConfig) else FrontendConfig(server=config)
        if source.engine_core_config is not None:
            frontend = FrontendConfig(server=frontend.server, engine_core=source.engine_core_config)
        self.config = frontend
        self.source = source
        self._extensions: list[RouterExtension] = []
        self.state: ServerState | None = None
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        #: Set once both listeners accept connections (the Llm may still be starting).
        self.listening = asyncio.Event()

    def router_extension(self, fn: RouterExtension) -> Server:
        """Add routes (or middleware) to the HTTP app; called with the app and the server state."""
        self._extensions.append(fn)
        return self

    async def serve(self, shutdown_event: asyncio.Event) -> None:
        """Serve until `shutdown_event` is set, then drain and stop."""
        llm, engine = self._make_llm()
        state = self.state = build_state(self.config, llm, engine=engine)
        app = build_app(state)
        for extend in self._extensions:
            extend(app, state)
        server = self.config.server
        if engine is None and llm.subscribe_readiness().value:
            state.attach_layers()  # a provided Llm that is ready already: ready as soon as we listen
            state.update_readiness()
        grpc = None
        http = _Uvicorn(self._uvicorn_config(app))
        tasks: list[asyncio.Task[None]] = []
        try:
            http_task = asyncio.create_task(http.serve(), name="http")
            tasks.append(http_task)
            await self._wait_started(http, http_task)
            self.http_port = http.servers[0].sockets[0].getsockname()[1]
            if server.grpc_port is not None:
                public = public_services(state)
                grpc = GrpcFrontend(
                    llm,
                    api_key=server.api_key,
                    tls=server.tls(),
                    max_message_bytes=server.max_grpc_message_bytes,
                    extra_services=[service.register for service in public],
                    health_services=[service.name for service in public],
                    info=state.served_info,
                )
                self.grpc_port = await grpc.start(server.grpc_host or server.host, server.grpc_port)
            self.listening.set()
            logger.info("listening: HTTP on %s:%s, gRPC on %s", server.host, self.http_port, self.grpc_port)
            tasks.append(asyncio.create_task(self._bring_up(state, engine), name="bring-up"))
            waiter = asyncio.create_task(shutdown_event.wait())
            await asyncio.wait([waiter, http_task], return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            await self._drain(state, http, grpc)
            await http_task  # uvicorn closes its listeners and cancels what is left after its own timeout
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if grpc is not None:
                await grpc.stop(0)
            if engine is not None:
                await engine.shutdown()

    # ---- steps ----------------------------------------------------------------------------------------

    def _make_llm(self) -> tuple[Llm, EngineCoreLlm | None]:
        if self.source.provided_llm is not None:
            return self.source.provided_llm, None
        cfg = self.config.engine_core
        assert cfg is not None
        names = self.config.server.served_model_name
        engine = EngineCoreLlm(cfg.engine_settings(names[0] if names else None))
        return engine, engine

    def _uvicorn_config(self, app: FastAPI) -> uvicorn.Config:
        server = self.config.server
        return uvicorn.Config(
            app,
            host=server.host,
            port=server.port,
            lifespan="off",
            log_level=server.log_level if server.log_level != "info" else "warning",
            access_log=False,
            ssl_certfile=str(server.ssl_certfile) if server.ssl_certfile else None,
            ssl_keyfile=str(server.ssl_keyfile) if server.ssl_keyfile else None,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=5,
        )

    @staticmethod
    async def _wait_started(http: uvicorn.Server, task: asyncio.Task[None]) -> None:
        while not http.started:
            if task.done():
                task.result()
                raise RuntimeError("the HTTP server did not start")
            await asyncio.sleep(0.01)

    async def _bring_up(self, state: ServerState, engine: EngineCoreLlm | None) -> None:
        """Start the engine (if owned), attach the text and chat layers, then follow the Llm's readiness."""
        if engine is not None:
            await engine.start()
            await self._load_static_loras(state, engine)
        readiness = state.llm.subscribe_readiness()
        await readiness.wait_for(bool)
        state.attach_layers()
        if self.config.server.freeze_gc_heap:
            freeze_heap()  # start-up is done: the engine client, tokenizer and layers exist
        if self.config.server.keep_off_engine_cpus:
            keep_off_engine_cpus()  # the engine's workers bound their threads while it started
        refresher = asyncio.create_task(_follow_adapters(state)) if engine is None else None
        try:
            async for _ in readiness:
                state.update_readiness()
        finally:
            if refresher is not None:
                refresher.cancel()

    async def _load_static_loras(self, state: ServerState, engine: EngineCoreLlm) -> None:
        cfg = self.config.engine_core
        assert cfg is not None
        for lora_id, module in enumerate(cfg.lora_modules, start=1):
            lora = LoraRequest(module.name, lora_id, module.path, module.base_model_name)
            if not await engine.add_lora(lora):
                raise RuntimeError(f"the LoRA adapter {module.name!r} failed to load from {module.path!r}")
            state.lora_modules[module.name] = (module, lora_id)

    async def _drain(self, state: ServerState, http: uvicorn.Server, grpc: GrpcFrontend | None) -> None:
        grace = self.config.server.shutdown_grace_period
        logger.info("draining: up to %.1f s for in-flight requests", grace)
        state.begin_drain()
        stops = []
        if grpc is not None:
            await grpc.begin_drain()
            stops.append(grpc.stop(grace))
        stops.append(self._drain_http(state, http, grace))
        await asyncio.gather(*stops)

    @staticmethod
    async def _drain_http(state: ServerState, http: uvicorn.Server, grace: float) -> None:
        try:
            await asyncio.wait_for(state.load.wait_idle(), grace)
        except TimeoutError:
            logger.warning(
                "%d HTTP request(s) still running after %.1f s: cancelling", state.load.in_progress, grace
            )
        http.should_exit = True


#: How often a router re-reads its workers' LoRA adapters in the background (seconds).
ADAPTER_REFRESH_INTERVAL = 10.0


async def _follow_adapters(state: ServerState) -> None:
    """Keep a provided Llm's adapters current (a router's workers load and unload them at runtime)."""
    while True:
        await asyncio.sleep(ADAPTER_REFRESH_INTERVAL)
        try:
            await state.refresh_adapters()
        except LlmError as exc:
            logger.debug("could not re-read the LoRA adapters: %s", exc)
