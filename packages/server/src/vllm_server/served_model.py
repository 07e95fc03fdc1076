"""Which model a request names: a served name of the base model or a LoRA adapter, else 404 as vLLM."""

from __future__ import annotations

from typing import NamedTuple

from vllm_llm import LlmError
from vllm_llm.wire import LoraRequest
from vllm_server.errors import NotFound
from vllm_server.state import ServerState

__all__ = ["ServedModel", "resolve_model"]


class ServedModel(NamedTuple):
    """The name responses report and the adapter to apply (None: the base model)."""

    name: str
    lora_request: LoraRequest | None


async def resolve_model(state: ServerState, requested: str | None) -> ServedModel:
    """The served model `requested` names (None or "": the primary name); `NotFound` if unknown.

    A name that is not served yet may be an adapter a router's worker loaded since it last looked: the
    router re-reads its workers' adapters once before answering 404."""
    try:
        return _resolve(state, requested)
    except NotFound:
        try:
            refreshed = await state.refresh_adapters()
        except LlmError:  # no worker answered: the name is still unknown
            refreshed = False
        if not refreshed:
            raise
    return _resolve(state, requested)


def _resolve(state: ServerState, requested: str | None) -> ServedModel:
    names = state.served_model_names
    if not requested or requested in names:
        # vLLM reports the primary name whichever alias was asked for.
        return ServedModel(names[0], None)
    entry = state.lora_modules.get(requested)
    if entry is not None:
        module, lora_int_id = entry
        return ServedModel(requested, module.request(lora_int_id))
    raise NotFound(
        f"The model `{requested}` does not exist. Valid aliases: {', '.join(names)}.", param="model"
    )
