"""The HTTP route table: every method and path next to its handler, the engine-core gates in one place.

Each module here makes handlers (closures over the state or the engine core, built once, so a request
pays no lookup); `route_table` is only wiring, as vLLM's Rust `server/src/routes.rs`.
"""

from __future__ import annotations

from vllm_server.http import sagemaker_standards
from vllm_server.http.route import Route
from vllm_server.http.routes import (
    anthropic_messages,
    engine_admin,
    engine_kv_events,
    engine_lora,
    generate,
    health,
    info,
    openai_chat,
    openai_chat_batch,
    openai_completions,
    openai_responses,
    sagemaker,
    tokenize,
    tokenizer_info,
)
from vllm_server.state import ServerState

__all__ = ["route_table"]


def route_table(state: ServerState) -> list[Route]:
    """Every route the HTTP API serves over `state`."""
    server = state.config.server
    routes = [
        # Always: probes, facts, OpenAI-compatible inference and tokens in / tokens out.
        Route("GET", "/health", health.health(state)),
        Route("GET", "/ready", health.ready(state)),
        Route("GET", "/v1/models", info.models(state)),
        Route("GET", "/version", info.version(state)),
        Route("GET", "/load", info.server_load(state)),
        Route("GET", "/server_info", info.server_info(state)),
        Route("GET", "/metrics", info.metrics(state)),
        # `counted`: the inference routes `/load` counts (vLLM's load_aware_call routes).
        Route("POST", "/v1/completions", openai_completions.create_completion(state), counted=True),
        Route("POST", "/v1/chat/completions", openai_chat.create_chat_completion(state), counted=True),
        Route(
            "POST",
            "/v1/chat/completions/batch",
            openai_chat_batch.create_batch_chat_completion(state),
            counted=True,
        ),
        Route("POST", "/v1/messages", anthropic_messages.create_message(state), counted=True),
        Route("POST", "/v1/messages/count_tokens", anthropic_messages.count_tokens(state), counted=True),
        Route("POST", "/v1/responses", openai_responses.create_response(state), counted=True),
        Route("POST", "/tokenize", tokenize.tokenize(state)),
        Route("POST", "/detokenize", tokenize.detokenize(state)),
        Route("POST", "/inference/v1/generate", generate.generate(state), counted=True),
        # SageMaker's, through its package as under vLLM (`sagemaker_standards`: transforms, overrides).
        Route(
            "POST",
            "/invocations",
            sagemaker_standards.invocation_handler(sagemaker.invocations(state)),
            counted=True,
        ),
        # SageMaker's probe (GET or POST), as vLLM's: the same answer as /health.
        Route("GET", "/ping", sagemaker_standards.ping_handler(health.health(state))),
        Route("POST", "/ping", health.health(state)),
    ]
    if server.enable_tokenizer_info_endpoint:  # vLLM's flag; may expose the chat template
        routes.append(Route("GET", "/tokenizer_info", tokenizer_info.tokenizer_info(state)))

    # Only over an engine core the server owns (LlmSource.engine_core): 404 for a provided Llm.
    engine = state.engine
    if engine is None:
        return routes
    routes.append(Route("GET", "/kv_event_sources", engine_kv_events.kv_event_sources(engine)))
    if server.dev_mode:
        routes += [
            Route("POST", "/reset_prefix_cache", engine_admin.reset_prefix_cache(engine)),
            Route("POST", "/sleep", engine_admin.sleep(engine)),
            Route("POST", "/wake_up", engine_admin.wake_up(engine)),
            Route("GET", "/is_sleeping", engine_admin.is_sleeping(engine)),
            Route("POST", "/pause", engine_admin.pause(engine)),
            Route("POST", "/resume", engine_admin.resume(engine)),
            Route("GET", "/is_paused", engine_admin.is_paused(engine)),
            Route("POST", "/abort_requests", engine_admin.abort_requests(engine)),
            Route("POST", "/collective_rpc", engine_admin.collective_rpc(engine)),
            Route("POST", "/checkpoint_prepare", engine_admin.checkpoint_prepare(engine)),
            Route("POST", "/checkpoint_restore", engine_admin.checkpoint_restore(engine)),
        ]
    engine_core = state.config.engine_core
    if engine_core is not None and engine_core.profiler is not None:  # as vLLM: with a profiler
        routes += [
            Route("POST", "/start_profile", engine_admin.start_profile(engine)),
            Route("POST", "/stop_profile", engine_admin.stop_profile(engine)),
        ]
    if server.enable_runtime_lora:
        routes += [
            Route("POST", "/v1/load_lora_adapter", engine_lora.load(state, engine)),
            Route("POST", "/v1/unload_lora_adapter", engine_lora.unload(state, engine)),
        ]
    return routes
