"""The Llm boundary: the `Llm` interface, its errors, `Watch`, `MockLlm` and the wire types."""

from vllm_llm._channel import OutputChannel, merge_outputs
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
from vllm_llm.engine_core import EngineCoreLlm, EngineCoreSettings
from vllm_llm.mock import MockLlm
from vllm_llm.watch import Watch, WatchSender

__all__ = [
    "EngineCoreLlm",
    "EngineCoreSettings",
    "EngineDead",
    "GenerateStream",
    "InvalidRequest",
    "Llm",
    "LlmError",
    "MockLlm",
    "OutputChannel",
    "PromptTooLong",
    "Remote",
    "RemoteInvalidRequest",
    "Unavailable",
    "Unsupported",
    "Watch",
    "WatchSender",
    "merge_outputs",
]
