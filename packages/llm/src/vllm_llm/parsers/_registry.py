"""The one table of parser names (vLLM's `--tool-call-parser` and `--reasoning-parser` names) and the
classes behind them, imported on first use. Adding a parser is one module and one line here."""

from __future__ import annotations

import importlib

from vllm_llm.parsers._base import ReasoningParser, ToolParser

__all__ = ["REASONING_PARSERS", "TOOL_PARSERS", "reasoning_parser_class", "tool_parser_class"]

_TOOL = "vllm_llm.parsers.tool"
_REASONING = "vllm_llm.parsers.reasoning"

#: --tool-call-parser NAME → "module:Class" (aliases as in vLLM's table point at the same class).
TOOL_PARSERS: dict[str, str] = {
    "hermes": f"{_TOOL}.hermes:HermesToolParser",
    "qwen3_json": f"{_TOOL}.hermes:HermesToolParser",
    "llama3_json": f"{_TOOL}.llama_json:Llama3JsonToolParser",
    "llama4_json": f"{_TOOL}.llama_json:Llama3JsonToolParser",
    "internlm": f"{_TOOL}.internlm:InternLm2ToolParser",
    "jamba": f"{_TOOL}.jamba:JambaToolParser",
    "pythonic": f"{_TOOL}.pythonic:PythonicToolParser",
    "llama4_pythonic": f"{_TOOL}.llama4_pythonic:Llama4PythonicToolParser",
    "xlam": f"{_TOOL}.xlam:XlamToolParser",
    "mistral": f"{_TOOL}.mistral:MistralToolParser",
    "granite": f"{_TOOL}.granite:GraniteToolParser",
    "qwen3_coder": f"{_TOOL}.qwen3_xml:Qwen3XmlToolParser",
    "qwen3_xml": f"{_TOOL}.qwen3_xml:Qwen3XmlToolParser",
    "glm45": f"{_TOOL}.glm:GlmToolParser",
    "glm47": f"{_TOOL}.glm:GlmToolParser",
    "deepseek_v3": f"{_TOOL}.deepseek_v3:DeepSeekV3ToolParser",
    "deepseek_v31": f"{_TOOL}.deepseek_v31:DeepSeekV31ToolParser",
    "kimi_k2": f"{_TOOL}.kimi_k2:KimiK2ToolParser",
}

#: --reasoning-parser NAME → "module:Class".
REASONING_PARSERS: dict[str, str] = {
    "deepseek_r1": f"{_REASONING}.deepseek_r1:DeepSeekR1ReasoningParser",
    "deepseek_v3": f"{_REASONING}.deepseek_v3:DeepSeekV3ReasoningParser",
    "qwen3": f"{_REASONING}.qwen3:Qwen3ReasoningParser",
    "glm45": f"{_REASONING}.glm:GlmReasoningParser",
    "glm47": f"{_REASONING}.glm:GlmReasoningParser",
    "minimax_m2": f"{_REASONING}.minimax_m2:MiniMaxM2ReasoningParser",
    "mistral": f"{_REASONING}.mistral:MistralReasoningParser",
    "granite": f"{_REASONING}.granite:GraniteReasoningParser",
}


def _load(path: str) -> type:
    module, _, name = path.partition(":")
    cls: type = getattr(importlib.import_module(module), name)
    return cls


def tool_parser_class(name: str) -> type[ToolParser]:
    """The tool parser registered as `name`; raises ValueError with vLLM's start-up message."""
    path = TOOL_PARSERS.get(name)
    if path is None:
        raise ValueError(
            f"invalid tool call parser: {name} (chose from {{ {','.join(sorted(TOOL_PARSERS))} }})"
        )
    cls = _load(path)
    assert issubclass(cls, ToolParser), path
    return cls


def reasoning_parser_class(name: str) -> type[ReasoningParser]:
    """The reasoning parser registered as `name`; raises ValueError with vLLM's start-up message."""
    path = REASONING_PARSERS.get(name)
    if path is None:
        raise ValueError(
            f"invalid reasoning parser: {name} (chose from {{ {','.join(sorted(REASONING_PARSERS))} }})"
        )
    cls = _load(path)
    assert issubclass(cls, ReasoningParser), path
    return cls
