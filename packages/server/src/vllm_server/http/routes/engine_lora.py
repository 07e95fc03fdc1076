"""Runtime LoRA loading (`/v1/load_lora_adapter`, `/v1/unload_lora_adapter`), over an owned engine core."""

from __future__ import annotations

from fastapi import Response
from pydantic import BaseModel

from vllm_llm import EngineCoreLlm
from vllm_llm.wire import LoraRequest
from vllm_server.config import LoraModule
from vllm_server.errors import BadRequest, NotFound
from vllm_server.http.route import Handler
from vllm_server.state import ServerState


class LoadLoraAdapter(BaseModel):
    """vLLM's LoadLoRAAdapterRequest."""

    lora_name: str
    lora_path: str
    load_inplace: bool = False


class UnloadLoraAdapter(BaseModel):
    """vLLM's UnloadLoRAAdapterRequest."""

    lora_name: str
    lora_int_id: int | None = None


def load(state: ServerState, engine: EngineCoreLlm) -> Handler:
    """Load LoRA adapters at runtime; loaded adapters are served as models."""

    async def load(body: LoadLoraAdapter) -> Response:
        """Load an adapter and serve it under `lora_name`."""
        if body.lora_name in state.lora_modules and not body.load_inplace:
            raise BadRequest(f"the LoRA adapter {body.lora_name!r} is already loaded", param="lora_name")
        if body.lora_name in state.served_model_names:
            raise BadRequest(f"{body.lora_name!r} is the base model's name", param="lora_name")
        lora_id = (
            state.lora_modules[body.lora_name][1] if body.lora_name in state.lora_modules else _next_id(state)
        )
        lora = LoraRequest(body.lora_name, lora_id, body.lora_path, None, body.load_inplace)
        if not await engine.add_lora(lora):
            raise BadRequest(
                f"the LoRA adapter {body.lora_name!r} could not be loaded from {body.lora_path!r}"
            )
        state.lora_modules[body.lora_name] = (LoraModule(name=body.lora_name, path=body.lora_path), lora_id)
        return Response(
            f"Success: LoRA adapter '{body.lora_name}' added successfully.", media_type="text/plain"
        )

    return load


def unload(state: ServerState, engine: EngineCoreLlm) -> Handler:
    """Unload LoRA adapters at runtime."""

    async def unload(body: UnloadLoraAdapter) -> Response:
        """Unload an adapter."""
        entry = state.lora_modules.get(body.lora_name)
        if entry is None:
            raise NotFound(f"the LoRA adapter {body.lora_name!r} is not loaded", param="lora_name")
        await engine.remove_lora(entry[1])
        del state.lora_modules[body.lora_name]
        return Response(
            f"Success: LoRA adapter '{body.lora_name}' removed successfully.", media_type="text/plain"
        )

    return unload


def _next_id(state: ServerState) -> int:
    used: set[int] = {i for _, i in state.lora_modules.values()}
    return next(i for i in range(1, len(used) + 2) if i not in used)
