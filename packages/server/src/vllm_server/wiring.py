"""The one place the server's parts are wired: Llm → text and chat layers → state → app."""

from __future__ import annotations

from vllm_llm import EngineCoreLlm, GenerateStream, Llm
from vllm_llm.delegating import DelegatingLlm
from vllm_llm.wire import GenerateRequest
from vllm_server.config import FrontendConfig
from vllm_server.metrics import Metrics
from vllm_server.state import ServerState


def build_state(config: FrontendConfig, llm: Llm, *, engine: EngineCoreLlm | None = None) -> ServerState:
    """The server state over `llm`; `engine` is the engine core the server owns, if any.

    The state's Llm records each engine request's timings in the server's metrics (`Metrics.tap`), so
    every way in that goes through it (the HTTP routes, `vllm.Inference`) records them once.
    """
    names = config.server.served_model_name
    metrics = Metrics(names[0] if names else "", llm.info, engine=engine)
    return ServerState(config=config, llm=MetricsLlm(llm, metrics), engine=engine, metrics=metrics)


class MetricsLlm(DelegatingLlm):
    """Forwards to `inner`; each stream's final `timings` are recorded in `metrics` on the way."""

    def __init__(self, inner: Llm, metrics: Metrics) -> None:
        super().__init__(inner)
        self.metrics = metrics
        if getattr(inner, "refresh_info", None) is None:
            # A server re-reads the adapters of an Llm that can refresh them (a router); one that cannot
            # (a mock, an engine) must not look as if it could.
            self.refresh_info = None  # type: ignore[assignment,method-assign]

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Generate on the inner Llm, recording the timings."""
        return self.metrics.tap(await self.inner.generate(request), request)
