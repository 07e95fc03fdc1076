"""Runtime LoRA loading (`/v1/load_lora_adapter`, `/v1/unload_lora_adapter`), over an owned engine core."""

from __future__ import annotations

import asyncio
import re

from fastapi import Response
from pydantic import BaseModel

from vllm_llm import EngineCoreLlm, EngineDead, LlmError
from vllm_server.config import LoraModule
from vllm_server.errors import InvalidUserInput, NotFound
from vllm_server.http.route import Handler
from vllm_server.state import ServerState


class LoadLoraAdapter(BaseModel):
    """vLLM's LoadLoRAAdapterRequest."""

    lora_name: str
    lora_path: str
    load_inplace: bool = False
    is_3d_lora_weight: bool = False


class UnloadLoraAdapter(BaseModel):
    """vLLM's UnloadLoRAAdapterRequest."""

    lora_name: str
    lora_int_id: int | None = None


def load(state: ServerState, engine: EngineCoreLlm) -> Handler:
    """Load LoRA adapters at runtime; loaded adapters are served as models.

    Refused as vLLM refuses them, in its order and words: no name or path, a base model's name, a name
    already loaded (unless `load_inplace`), 400 "InvalidUserInput"; a path the engine finds no adapter at,
    404 "NotFoundError"; anything else the engine fails on (files that are no adapter), 500 with the
    engine's message (paths left out). Loads are one at a time, so two loads of one name cannot both
    pass the "already loaded" check."""
    lock = asyncio.Lock()

    async def load(body: LoadLoraAdapter) -> Response:
        """Load an adapter and serve it under `lora_name`."""
        name, path = body.lora_name, body.lora_path
        async with lock:
            if not name or not path:
                raise InvalidUserInput("Both 'lora_name' and 'lora_path' must be provided.")
            if name in state.served_model_names:
                raise InvalidUserInput(f"The lora adapter '{name}' conflicts with a served base model.")
            if name in state.lora_modules and not body.load_inplace:
                raise InvalidUserInput(
                    f"The lora adapter '{name}' has already been loaded. If you want to load the adapter "
                    "in place, set 'load_inplace' to True."
                )
            lora_id = state.lora_modules[name][1] if name in state.lora_modules else _next_id(state)
            module = LoraModule(name=name, path=path, is_3d_lora_weight=body.is_3d_lora_weight)
            lora = module.request(lora_id, load_inplace=body.load_inplace)
            try:
                loaded = await engine.add_lora(lora)
            except EngineDead:
                raise
            except LlmError as exc:
                engine_message = str(exc.__cause__ or exc)
                not_found = f"Loading lora {name} failed: No adapter found for {path}"
                if not_found in engine_message:
                    raise NotFound(not_found) from exc
                raise LlmError(_without_paths(engine_message)) from exc
            if not loaded:
                raise LlmError(f"the engine did not load the LoRA adapter '{name}'")
            state.lora_modules[name] = (module, lora_id)
        return Response(f"Success: LoRA adapter '{name}' added successfully.", media_type="text/plain")

    return load


def _without_paths(message: str) -> str:
    """An engine's error message without the file paths and source locations in it (as vLLM leaves them
    out of an error body): each becomes `<path>`."""
    message = re.sub(r'\s*File "[^"]*", line \d+, in \S+', "", message)
    return re.sub(r"(?<![\w.])(?:/[\w.\-]+)+", "<path>", message).strip()


def unload(state: ServerState, engine: EngineCoreLlm) -> Handler:
    """Unload LoRA adapters at runtime."""

    async def unload(body: UnloadLoraAdapter) -> Response:
        """Unload an adapter."""
        if not body.lora_name:
            raise InvalidUserInput("'lora_name' needs to be provided to unload a LoRA adapter.")
        entry = state.lora_modules.get(body.lora_name)
        if entry is None:
            raise NotFound(f"The lora adapter '{body.lora_name}' cannot be found.")
        await engine.remove_lora(entry[1])
        del state.lora_modules[body.lora_name]
        return Response(
            f"Success: LoRA adapter '{body.lora_name}' removed successfully.", media_type="text/plain"
        )

    return unload


def _next_id(state: ServerState) -> int:
    used: set[int] = {i for _, i in state.lora_modules.values()}
    return next(i for i in range(1, len(used) + 2) if i not in used)
