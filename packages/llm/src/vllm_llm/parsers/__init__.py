"""Tool-call and reasoning parsers at the caller, selected by vLLM's names (`--tool-call-parser`,
`--reasoning-parser`) and equal to vLLM 0.32's on the same output (see `_base` for the interfaces and
`_registry` for the table of names)."""

from vllm_llm.parsers._base import (
    ExtractedToolCalls,
    MessageDelta,
    ParsedCall,
    ReasoningParser,
    ReasoningStep,
    ToolCallDelta,
    ToolParser,
    random_tool_call_id,
)
from vllm_llm.parsers._compose import ChatParser, NamedToolChoice, ParsedMessage, ToolChoice
from vllm_llm.parsers._registry import (
    REASONING_PARSERS,
    TOOL_PARSERS,
    reasoning_parser_class,
    tool_parser_class,
)

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "ChatParser",
    "ExtractedToolCalls",
    "MessageDelta",
    "NamedToolChoice",
    "ParsedCall",
    "ParsedMessage",
    "ReasoningParser",
    "ReasoningStep",
    "ToolCallDelta",
    "ToolChoice",
    "ToolParser",
    "random_tool_call_id",
    "reasoning_parser_class",
    "tool_parser_class",
]
