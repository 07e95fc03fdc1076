"""Facts about the server: the model list, versions, load, the flat config and Prometheus metrics."""

from __future__ import annotations

import contextlib
import time
from typing import Any

from fastapi import Response

from vllm_llm import LlmError
from vllm_server.http.route import Handler
from vllm_server.state import ServerState

_CREATED = int(time.time())


def models(state: ServerState) -> Handler:
    """The OpenAI model list over `state`."""

    async def models() -> dict[str, Any]:
        """The served model names (and LoRA adapters), OpenAI style."""
        state.text()
        with contextlib.suppress(LlmError):  # a router lists what its workers served when last asked
            await state.refresh_adapters()
        info = state.llm.info()
        root = state.served_model_names[0]
        cards = [_card(name, info.model, None, info.max_model_len) for name in state.served_model_names]
        cards += [
            _card(name, module.path, root, info.max_model_len)
            for name, (module, _) in state.lora_modules.items()
        ]
        return {"object": "list", "data": cards}

    return models


def version(state: ServerState) -> Handler:
    """The versions over `state`."""

    async def version() -> dict[str, Any]:
        """The engine's vLLM version, vLLM's body (no field of ours beside it)."""
        try:
            engine_version = state.llm.info().vllm_version
        except Exception:
            engine_version = None
        return {"version": engine_version}

    return version


def server_load(state: ServerState) -> Handler:
    """The load over `state`."""

    tracking = state.config.server.enable_server_load_tracking

    async def server_load() -> dict[str, int]:
        """Inference requests in progress on this server; 0 unless it tracks them, as vLLM's."""
        return {"server_load": state.load.server_load if tracking else 0}

    return server_load


def server_info(state: ServerState) -> Handler:
    """The flat config over `state`."""

    async def server_info() -> dict[str, Any]:
        """The server's configuration as one flat mapping."""
        info: dict[str, Any] = {"config": state.config.flat()}
        try:
            llm_info = state.llm.info()
            info["llm_info"] = {f: getattr(llm_info, f) for f in llm_info.__struct_fields__}
        except Exception:
            info["llm_info"] = None
        info["engine_core"] = state.engine is not None
        return info

    return server_info


def metrics(state: ServerState) -> Handler:
    """The Prometheus metrics over `state`."""

    async def metrics() -> Response:
        """Prometheus metrics (vLLM's `vllm:*` names; ours as `vllm_frontend:*`)."""
        m = state.metrics
        m.healthy.labels(m.model_name).set(float(state.alive))
        m.ready.labels(m.model_name).set(float(state.subscribe_readiness().value))
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return metrics


def _card(name: str, root: str, parent: str | None, max_model_len: int) -> dict[str, Any]:
    return {
        "id": name,
        "object": "model",
        "created": _CREATED,
        "owned_by": "vllm",
        "root": root,
        "parent": parent,
        "max_model_len": max_model_len,
        "permission": [],
    }
