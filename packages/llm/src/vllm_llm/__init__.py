"""The Llm boundary: the `Llm` interface, errors, `Watch`, MockLlm, EngineCoreLlm, text and chat layers."""

from vllm_llm._channel import OutputChannel, merge_outputs
from vllm_llm._engine_settings import EngineCoreSettings
from vllm_llm._errors import (
    EngineDead,
    InvalidRequest,
    LlmError,
    PromptTooLong,
    Remote,
    RemoteInvalidRequest,
    Unavailable,
    Unsupported,
)
from vllm_llm._interface import Llm
from vllm_llm._stream import GenerateStream
from vllm_llm.chat import (
    ChatChoice,
    ChatDelta,
    ChatLlm,
    ChatMessage,
    ChatRequest,
    ChatResult,
    ChatStream,
    FunctionCall,
    RenderedChat,
    TextPart,
    ToolCall,
)
from vllm_llm.engine_core import EngineCoreLlm
from vllm_llm.mock import MockLlm
from vllm_llm.text import (
    LogprobCandidate,
    TextChoice,
    TextDelta,
    TextLlm,
    TextRequest,
    TextResult,
    TextSamplingParams,
    TextStream,
    TextTokenizer,
    TextUsage,
    TokenLogprobs,
)
from vllm_llm.watch import Watch, WatchSender

__all__ = [
    "ChatChoice",
    "ChatDelta",
    "ChatLlm",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "EngineCoreLlm",
    "EngineCoreSettings",
    "EngineDead",
    "FunctionCall",
    "GenerateStream",
    "InvalidRequest",
    "Llm",
    "LlmError",
    "LogprobCandidate",
    "MockLlm",
    "OutputChannel",
    "PromptTooLong",
    "Remote",
    "RemoteInvalidRequest",
    "RenderedChat",
    "TextChoice",
    "TextDelta",
    "TextLlm",
    "TextPart",
    "TextRequest",
    "TextResult",
    "TextSamplingParams",
    "TextStream",
    "TextTokenizer",
    "TextUsage",
    "TokenLogprobs",
    "ToolCall",
    "Unavailable",
    "Unsupported",
    "Watch",
    "WatchSender",
    "merge_outputs",
]
