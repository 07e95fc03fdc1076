"""Which public gRPC services a server serves: `vllm.Inference` always, `vllm.Control` over its own engine."""

from __future__ import annotations

from vllm_server.grpc.control import ControlService
from vllm_server.grpc.inference import InferenceService
from vllm_server.state import ServerState

__all__ = ["public_services"]


def public_services(state: ServerState) -> list[InferenceService | ControlService]:
    """The services to register (each has `name` for its health status and `register(server)`).

    Control drives the engine-core client, so it exists only over an engine core the server owns
    (`LlmSource.engine_core`); over a provided Llm it is absent (UNIMPLEMENTED, no health status).
    """
    services: list[InferenceService | ControlService] = [InferenceService(state)]
    if state.engine is not None:
        services.append(ControlService(state, state.engine))
    return services
