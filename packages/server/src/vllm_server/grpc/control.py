"""The servicer of `vllm.Control` over an engine core the server owns: info, aborts, KV events.

Served only when the server was built from `LlmSource.engine_core` (a provided Llm is opaque: the
service is absent, so calls get UNIMPLEMENTED). Abort goes through the text layer by the ids clients gave
(every choice of an n > 1 request); an empty list is a no-op, as the Rust server's. Errors go through
`map_error` and `context.abort` (UNAVAILABLE while the engine is starting).
"""

from __future__ import annotations

from typing import Any

import grpc

from vllm_llm import EngineCoreLlm
from vllm_server.grpc.guarded import register_proto_service
from vllm_server.grpc.proto import control_pb2 as pb
from vllm_server.grpc.status import ServicerContext, abort_call
from vllm_server.state import ServerState

__all__ = ["CONTROL_SERVICE", "ControlService"]

CONTROL_SERVICE = "vllm.Control"
API_VERSION = "vllm"
#: What a KvEventSource advertises: vLLM's ZMQ publisher sends msgpack event batches, schema 1.
_KV_EVENTS_ENCODING = "msgpack"
_KV_EVENTS_SCHEMA_VERSION = 1


class ControlService:
    """Serves `vllm.Control` from a server's state and its engine core; register with `register(server)`."""

    name = CONTROL_SERVICE
    _state: ServerState
    _engine: EngineCoreLlm

    def __init__(self, state: ServerState, engine: EngineCoreLlm) -> None:
        self._state = state
        self._engine = engine

    def register(self, server: grpc.aio.Server) -> None:
        """Add the service to `server` (from the .proto's service, with guarded request decoding)."""
        register_proto_service(server, self, pb.DESCRIPTOR.services_by_name["Control"])

    async def GetServerInfo(
        self, request: pb.GetServerInfoRequest, context: ServicerContext
    ) -> pb.ServerInfo:
        """The engine's version, parallelism, context length and KV-cache capacity."""
        try:
            return self._server_info()
        except Exception as exc:
            await abort_call(context, exc, service=CONTROL_SERVICE)

    async def GetModelInfo(self, request: pb.GetModelInfoRequest, context: ServicerContext) -> pb.ModelInfo:
        """The served model and its names."""
        try:
            info = self._engine.info()
            names = self._state.served_model_names or (info.served_model_name,)
            return pb.ModelInfo(
                model_id=info.model,
                served_model_name=names[0],
                served_model_aliases=names[1:],
                supports_text_input=True,
                supports_token_ids_input=True,
                supports_multimodal=False,
            )
        except Exception as exc:
            await abort_call(context, exc, service=CONTROL_SERVICE)

    async def Abort(self, request: pb.AbortRequest, context: ServicerContext) -> pb.AbortResponse:
        """Abort requests by the ids their clients gave; an empty list is a no-op."""
        if request.request_ids:
            try:
                await self._state.text().abort(list(request.request_ids))
            except Exception as exc:
                await abort_call(context, exc, service=CONTROL_SERVICE)
        return pb.AbortResponse()

    async def GetKvEventSources(
        self, request: pb.GetKvEventSourcesRequest, context: ServicerContext
    ) -> pb.GetKvEventSourcesResponse:
        """The engines' ZMQ KV-cache event publishers (none when KV events are off)."""
        try:
            sources = self._engine.kv_event_sources()
        except Exception as exc:
            await abort_call(context, exc, service=CONTROL_SERVICE)
        return pb.GetKvEventSourcesResponse(
            sources=[
                _kv_event_source(rank, config)
                for rank, config in sorted(sources.items())
                if config.get("enable_kv_cache_events") and config.get("publisher") == "zmq"
            ]
        )

    def _server_info(self) -> pb.ServerInfo:
        info = self._engine.info()
        config = self._engine.vllm_config
        parallel = config.parallel_config
        return pb.ServerInfo(
            engine_version=info.vllm_version or "",
            api_version=API_VERSION,
            instance_id=str(getattr(config, "instance_id", "") or ""),
            parallelism=pb.ParallelismInfo(
                tensor_parallel_size=parallel.tensor_parallel_size,
                pipeline_parallel_size=parallel.pipeline_parallel_size,
                data_parallel_size=info.data_parallel_size,
                data_parallel_rank=parallel.data_parallel_rank,
                decode_context_parallel_size=parallel.decode_context_parallel_size,
            ),
            max_model_len=info.max_model_len,
            kv_block_size=info.block_size or 0,
            total_kv_blocks=info.num_kv_blocks or 0,
            max_running_requests=info.max_num_seqs or 0,
            max_batched_tokens=info.max_num_batched_tokens or 0,
        )


def _kv_event_source(rank: int, config: dict[str, Any]) -> pb.KvEventSource:
    return pb.KvEventSource(
        transport="zmq",
        endpoint=str(config.get("endpoint") or ""),
        topic=str(config.get("topic") or ""),
        replay_endpoint=str(config.get("replay_endpoint") or ""),
        data_parallel_rank=rank,
        encoding=_KV_EVENTS_ENCODING,
        schema_version=_KV_EVENTS_SCHEMA_VERSION,
        buffer_steps=int(config.get("buffer_steps") or 0),
        hwm=int(config.get("hwm") or 0),
        max_queue_size=int(config.get("max_queue_size") or 0),
    )
