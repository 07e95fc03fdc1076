"""The one place the server's parts are wired: Llm → text and chat layers → state → app."""

from __future__ import annotations

from vllm_llm import EngineCoreLlm, Llm
from vllm_server.config import FrontendConfig
from vllm_server.metrics import Metrics
from vllm_server.state import ServerState


def build_state(config: FrontendConfig, llm: Llm, *, engine: EngineCoreLlm | None = None) -> ServerState:
    """The server state over `llm`; `engine` is the engine core the server owns, if any."""
    names = config.server.served_model_name
    metrics = Metrics(
        names[0] if names else "",
        lambda: engine.scheduler_stats if engine is not None else None,
        engine.multimodal_cache_stats if engine is not None else None,
        engine.prefix_cache_totals if engine is not None else None,
        engine.prompt_tokens_by_source if engine is not None else None,
    )
    return ServerState(config=config, llm=llm, engine=engine, metrics=metrics)
