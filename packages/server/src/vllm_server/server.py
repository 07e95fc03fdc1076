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
import os
import socket
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING

import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from vllm_llm import EngineCoreLlm, Llm, LlmError
from vllm_server.affinity import keep_off_engine_cpus
from vllm_server.config import FrontendConfig, ServerConfig
from vllm_server.grpc.listener import GrpcFrontend
from vllm_server.grpc.services import public_services
from vllm_server.http.app import build_app
from vllm_server.http.openai.sse import DirectBodySend
from vllm_server.request_log import RequestLogLlm
from vllm_server.runtime import freeze_heap
from vllm_server.source import LlmSource
from vllm_server.state import ServerState, StartupError
from vllm_server.wiring import build_state

if TYPE_CHECKING:
    from vllm_server.tracing import Tracing

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
        if frontend.server.otlp_traces_endpoint is not None:
            from vllm_server.tracing import check_endpoint

            check_endpoint(frontend.server.otlp_traces_endpoint)  # a bad endpoint fails here, not later
        self._extensions: list[RouterExtension] = []
        #: Whether the Llm was ready once: a failure before is a failed start, after it a failed server.
        self._ready_once = False
        self.state: ServerState | None = None
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        #: Set once both listeners accept connections (the Llm may still be starting).
        self.listening = asyncio.Event()

    def router_extension(self, fn: RouterExtension) -> Server:
        """Add routes (or middleware) to the HTTP app; called with the app and the server state.

        Middleware added here sees each SSE response's start but not its frames, which go straight to
        uvicorn (`DirectBodySend`): a layer that must rewrite a stream's body does not belong here."""
        self._extensions.append(fn)
        return self

    async def serve(self, shutdown_event: asyncio.Event) -> None:
        """Serve until `shutdown_event` is set, then drain and stop."""
        server = self.config.server
        # First: an engine core started after it traces its own start-up too.
        tracing = _start_tracing(server.otlp_traces_endpoint)
        llm, engine = self._make_llm()
        if server.enable_log_requests:
            llm = RequestLogLlm(llm, max_log_len=server.max_log_len)
        if tracing is not None:
            llm = tracing.traced(llm)
        state = self.state = build_state(self.config, llm, engine=engine)
        app = build_app(state, tracer=tracing.tracer if tracing is not None else None)
        for extend in self._extensions:
            extend(app, state)
        if engine is None and llm.subscribe_readiness().value:
            self._attach_layers(state)  # a provided Llm that is ready already: ready as soon as we listen
            state.update_readiness()
        grpc = None
        # SSE frames: the server's send, unless a middleware of the user's may read the body (`build_app`).
        served = DirectBodySend(app) if app.state.frames_past_the_stack else app
        http = _Uvicorn(self._uvicorn_config(served))
        tasks: list[asyncio.Task[None]] = []
        try:
            # Listen before the engine starts (as vLLM's server binds its socket first): a port in use
            # stops the start at once, not after the engine loaded.
            sock = _bind_unix(server.uds) if server.uds else _bind(server.host, server.port)
            try:
                http.config.load()  # its SSL context exists from here (for --enable-ssl-refresh)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: files that are not PEM
                where = f"unix:{server.uds}" if server.uds else f"{server.host}:{server.port}"
                raise StartupError(f"HTTP cannot serve on {where}: {exc}") from exc
            http_task = asyncio.create_task(http.serve(sockets=[sock]), name="http")
            tasks.append(http_task)
            await self._wait_started(http, http_task)
            if server.enable_ssl_refresh and http.config.ssl is not None:
                tasks.append(asyncio.create_task(_refresh_ssl(http.config), name="ssl refresh"))
            if server.grpc_port is not None:
                grpc = await self._start_grpc(state, llm)
            self.listening.set()
            if server.uds:
                logger.info("listening: HTTP on unix:%s, gRPC on %s", server.uds, self.grpc_port)
            else:
                self.http_port = port = sock.getsockname()[1]
                logger.info("listening: HTTP on %s:%s, gRPC on %s", server.host, port, self.grpc_port)
            bring_up = asyncio.create_task(self._bring_up(state, engine), name="bring-up")
            tasks.append(bring_up)
            waiter = asyncio.create_task(shutdown_event.wait())
            await asyncio.wait([waiter, http_task, bring_up], return_when=asyncio.FIRST_COMPLETED)
            if bring_up.done() and not self._ready_once:
                waiter.cancel()
                http.should_exit = True
                await asyncio.gather(http_task, return_exceptions=True)
                raise _startup_failure(bring_up)
            if bring_up.done():  # failed after serving: say why once, and stay up (unready) until stopped
                _log_failure(bring_up)
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
            if tracing is not None:
                await tracing.shutdown()  # exports the spans still batched

    async def _start_grpc(self, state: ServerState, llm: Llm) -> GrpcFrontend:
        server = self.config.server
        public = public_services(state)
        grpc = GrpcFrontend(
            llm,
            api_key=server.api_key,
            tls=server.tls(),
            max_message_bytes=server.max_grpc_message_bytes,
            extra_services=[service.register for service in public],
            health_services=[service.name for service in public],
            info=state.served_info,
            metrics=state.metrics,
        )
        host = server.grpc_host or server.host
        assert server.grpc_port is not None
        try:
            self.grpc_port = await grpc.start(host, server.grpc_port)
        except Exception as exc:
            await grpc.stop(0)
            raise StartupError(f"gRPC cannot listen on {host}:{server.grpc_port}: {exc}") from exc
        return grpc

    # ---- steps ----------------------------------------------------------------------------------------

    def _make_llm(self) -> tuple[Llm, EngineCoreLlm | None]:
        if self.source.provided_llm is not None:
            return self.source.provided_llm, None
        settings = self.config.engine_settings()
        assert settings is not None
        engine = EngineCoreLlm(settings)
        return engine, engine

    def _uvicorn_config(self, app: ASGIApp) -> uvicorn.Config:

        server = self.config.server
        # How long an idle keep-alive connection stays open: vLLM's VLLM_HTTP_TIMEOUT_KEEP_ALIVE (seconds,
        # default 5; vllm/envs.py). A client that reuses a connection the server closed meanwhile sees it
        # closed: see "Keep-alive" in docs/performance.md.
        keep_alive = int(os.environ.get("VLLM_HTTP_TIMEOUT_KEEP_ALIVE", "5"))
        # As vLLM's serve_http: uvicorn's loggers at --uvicorn-log-level, HTTPS as vLLM configures it
        # (client certificates against --ssl-ca-certs when --ssl-cert-reqs asks for them), h11's limits.
        config = uvicorn.Config(
            app,
            host=server.host,
            port=server.port,
            uds=server.uds,
            lifespan="off",
            log_level=server.uvicorn_log_level,
            access_log=server.access_log,
            ssl_certfile=str(server.ssl_certfile) if server.ssl_certfile else None,
            ssl_keyfile=str(server.ssl_keyfile) if server.ssl_keyfile else None,
            ssl_ca_certs=str(server.ssl_ca_certs) if server.ssl_ca_certs else None,
            ssl_cert_reqs=server.ssl_cert_reqs,
            timeout_graceful_shutdown=1,
            timeout_keep_alive=keep_alive,
            h11_max_incomplete_event_size=server.h11_max_incomplete_event_size,
        )
        if server.ssl_ciphers is not None:
            config.ssl_ciphers = server.ssl_ciphers
        # vLLM sets it on uvicorn's config, which reads no such setting (uvicorn 0.54): the same here.
        config.h11_max_header_count = server.h11_max_header_count  # type: ignore[attr-defined]
        if server.access_log:
            access = logging.getLogger("uvicorn.access")
            for old in [f for f in access.filters if isinstance(f, _ExcludePaths)]:
                access.removeFilter(old)  # the logger is process-wide; the last server configured wins
            if server.access_log_exclude_paths:
                access.addFilter(_ExcludePaths(server.access_log_exclude_paths))
        return config

    async def _wait_started(self, http: uvicorn.Server, task: asyncio.Task[None]) -> None:
        while not http.started:
            if task.done():
                server = self.config.server
                cause = task.exception() if not task.cancelled() else None
                raise StartupError(
                    f"HTTP cannot serve on {server.host}:{server.port}: {cause or 'uvicorn stopped'}"
                ) from cause
            await asyncio.sleep(0.01)

    async def _bring_up(self, state: ServerState, engine: EngineCoreLlm | None) -> None:
        """Start the engine (if owned), attach the text and chat layers, then follow the Llm's readiness."""
        if engine is not None:
            await engine.start()
            await self._load_static_loras(state, engine)
        readiness = state.llm.subscribe_readiness()
        await readiness.wait_for(bool)
        self._attach_layers(state)
        if self.config.server.freeze_gc_heap:
            freeze_heap()  # start-up is done: the engine client, tokenizer and layers exist
        if self.config.server.keep_off_engine_cpus:
            keep_off_engine_cpus()  # the engine's workers bound their threads while it started
        background = []
        if engine is None:
            background.append(asyncio.create_task(_follow_adapters(state)))
        elif (interval := engine.stat_log_interval) is not None:
            background.append(asyncio.create_task(_log_stats(engine, interval), name="stats log"))
        try:
            async for _ in readiness:
                state.update_readiness()
        finally:
            for task in background:
                task.cancel()

    def _attach_layers(self, state: ServerState) -> None:
        """The text and chat layers over the ready Llm; a configuration they refuse (a parser the
        tokenizer cannot serve) is a failed start."""
        try:
            state.attach_layers()
        except ValueError as exc:
            raise StartupError(str(exc)) from exc
        self._ready_once = True

    async def _load_static_loras(self, state: ServerState, engine: EngineCoreLlm) -> None:
        cfg = self.config.engine_core
        assert cfg is not None
        for lora_id, module in enumerate(cfg.lora_modules, start=1):
            try:
                loaded = await engine.add_lora(module.request(lora_id))
            except LlmError as exc:
                raise StartupError(f"the LoRA adapter {module.name!r} cannot be loaded: {exc}") from exc
            if not loaded:
                raise StartupError(f"the LoRA adapter {module.name!r} failed to load from {module.path!r}")
            state.lora_modules[module.name] = (module, lora_id)

    async def _drain(self, state: ServerState, http: uvicorn.Server, grpc: GrpcFrontend | None) -> None:
        """Refuse new work on both listeners (503, UNAVAILABLE) while what runs on either ends, within the
        grace; only then close them. Both stay up until both are idle: a listener closed early would
        answer a late client with a refused connection, or gRPC's own CANCELLED, not "go elsewhere"."""
        grace = self.config.server.shutdown_grace_period
        logger.info("draining: up to %.1f s for in-flight requests", grace)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        state.begin_drain()
        idle = [state.load.wait_idle()]
        if grpc is not None:
            await grpc.begin_drain()
            idle.append(grpc.wait_idle())
        try:
            await asyncio.wait_for(asyncio.gather(*idle), grace)
        except TimeoutError:
            logger.warning(
                "%d HTTP request(s) and %d gRPC call(s) still running after %.1f s: cancelling",
                state.load.in_progress,
                grpc.calls_in_progress if grpc is not None else 0,
                grace,
            )
        http.should_exit = True
        if grpc is not None:
            await grpc.stop(max(deadline - loop.time(), 0.0))


def _startup_failure(bring_up: asyncio.Task[None]) -> StartupError:
    """Why the bring-up ended before the Llm was first ready, as the StartupError the start fails with."""
    exc = None if bring_up.cancelled() else bring_up.exception()
    if isinstance(exc, StartupError):
        return exc
    if exc is None:
        return StartupError("the Llm stopped before it was ready")
    logger.error("the server cannot start", exc_info=exc)  # the traceback, for what is not ours
    error = StartupError(f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
    error.__cause__ = exc
    return error


def _log_failure(bring_up: asyncio.Task[None]) -> None:
    """Log once why the bring-up ended after the Llm was ready (the server stays up, unready)."""
    exc = None if bring_up.cancelled() else bring_up.exception()
    if exc is not None:
        logger.error("the Llm's readiness is no longer followed: %s", exc, exc_info=exc)


def _bind(host: str, port: int) -> socket.socket:
    """The HTTP listening socket (as uvicorn binds it), or a StartupError naming the address."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)  # uvicorn's backlog
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        raise StartupError(f"HTTP cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    return sock


def _bind_unix(path: str) -> socket.socket:
    """The HTTP listening socket on a Unix domain socket (`--uds`, as vLLM binds it), or a StartupError."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(path)
        sock.listen(2048)
        sock.set_inheritable(True)
    except OSError as exc:
        sock.close()
        raise StartupError(f"HTTP cannot listen on unix:{path}: {exc.strerror or exc}") from exc
    return sock


#: How often `--enable-ssl-refresh` looks at the certificate files.
SSL_REFRESH_POLL = 1.0


async def _refresh_ssl(config: uvicorn.Config) -> None:
    """Reload the HTTPS certificate chain (and CA certificates) into the live SSL context when their files
    change (vLLM's SSLCertRefresher, `--enable-ssl-refresh`): new connections get the new certificate."""
    ssl_context = config.ssl
    assert ssl_context is not None and config.ssl_certfile is not None
    chain = [str(config.ssl_certfile), str(config.ssl_keyfile or config.ssl_certfile)]
    watched = {"chain": chain, "ca": [str(config.ssl_ca_certs)] if config.ssl_ca_certs else []}

    def stamp(paths: list[str]) -> tuple[tuple[int, int, int], ...]:
        out = []
        for path in paths:
            try:
                st = os.stat(path)
            except OSError:
                out.append((0, 0, 0))
            else:
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
        return tuple(out)

    seen = {name: stamp(paths) for name, paths in watched.items()}
    logger.info("SSL refresh: watching %s", [p for paths in watched.values() for p in paths])
    while True:
        await asyncio.sleep(SSL_REFRESH_POLL)
        for name, paths in watched.items():
            now = stamp(paths)
            if not paths or now == seen[name]:
                continue
            try:
                if name == "chain":
                    ssl_context.load_cert_chain(chain[0], chain[1], config.ssl_keyfile_password)
                    logger.info("Reloading SSL certificate chain")
                else:
                    ssl_context.load_verify_locations(paths[0])
                    logger.info("Reloading SSL CA certificates")
            except (OSError, ValueError) as exc:  # a half-written file: tried again when it changes
                logger.error("SSL refresh failed on a change of %s: %s", paths, exc)
            seen[name] = now


class _ExcludePaths(logging.Filter):
    """Leaves requests to these paths out of the access log (vLLM's --disable-access-log-for-endpoints)."""

    def __init__(self, paths: tuple[str, ...]) -> None:
        super().__init__()
        self.paths = frozenset(paths)

    def filter(self, record: logging.LogRecord) -> bool:
        # uvicorn logs (client, method, full path with query, http version, status)
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            return args[2].split("?", 1)[0] not in self.paths
        return True


def _start_tracing(endpoint: str | None) -> Tracing | None:
    """OpenTelemetry export to `endpoint` (`--otlp-traces-endpoint`); nothing imported without one."""
    if endpoint is None:
        return None
    from vllm_server.tracing import Tracing

    return Tracing.start(endpoint)


#: How often a router re-reads its workers' LoRA adapters in the background (seconds).
ADAPTER_REFRESH_INTERVAL = 10.0


async def _log_stats(engine: EngineCoreLlm, interval: float) -> None:
    """vLLM's stats line every `interval` seconds, as vLLM's API server logs it with stats on (`_force_log`
    in its lifespan: "Engine 000: Avg prompt throughput: ..."; at DEBUG while the engine idles)."""
    while True:
        await asyncio.sleep(interval)
        await engine.do_log_stats()


async def _follow_adapters(state: ServerState) -> None:
    """Keep a provided Llm's adapters current (a router's workers load and unload them at runtime)."""
    while True:
        await asyncio.sleep(ADAPTER_REFRESH_INTERVAL)
        try:
            await state.refresh_adapters()
        except LlmError as exc:
            logger.debug("could not re-read the LoRA adapters: %s", exc)
