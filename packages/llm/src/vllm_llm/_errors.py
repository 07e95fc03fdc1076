"""The errors of the Llm layer: one base class, variants with data, never stringly typed.

LlmError
├── InvalidRequest(param, message)        the caller sent something wrong (HTTP 400)
│   ├── InvalidParameter(param, value)     ... as vLLM's VLLMValidationError: its message ends with
│   │                                      ` (parameter=..., value=...)`
│   └── PromptTooLong(max_model_len, prompt_len)
├── Unsupported(message)                   valid, but this Llm cannot do it
├── Unavailable(message)                   not now: starting, paused, draining, unreachable (503)
│   └── AdmissionRefused(reason)           a queue limit refused it before it reached the engine
├── RemoteInvalidRequest(message)          a remote server said INVALID_ARGUMENT
│   └── RemoteNotFound(message)            ... NOT_FOUND: it serves no such model or adapter (404)
├── Remote(code, message)                  a remote server failed otherwise
└── EngineDead(message)                    the engine died; permanent
"""

from __future__ import annotations

from typing import Literal, get_args

#: The queue limits an Llm may refuse a request by, named as vLLM names them (its flags and the `reason`
#: label of `vllm:admission_rejections`).
AdmissionReason = Literal["max_num_queued_reqs", "max_num_queued_tokens"]
ADMISSION_REASONS: tuple[AdmissionReason, ...] = get_args(AdmissionReason)


class LlmError(Exception):
    """Base class of every error the Llm layer raises."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidRequest(LlmError):
    """The request is invalid; `param` names the offending parameter when there is one."""

    def __init__(self, message: str, *, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class InvalidParameter(InvalidRequest):
    """A bad parameter worded as vLLM's VLLMValidationError words it: the message, then
    ` (parameter=PARAM, value=VALUE)`, the value left out when it is None (vLLM's `__str__`)."""

    def __init__(self, message: str, *, param: str, value: object = None) -> None:
        super().__init__(with_parameter(message, param, value), param=param)
        self.value = value


def with_parameter(message: str, param: str, value: object = None) -> str:
    """`message` as vLLM's VLLMValidationError words it: then ` (parameter=PARAM, value=VALUE)`, the
    value left out when it is None (vLLM's `__str__`)."""
    extras = f"parameter={param}" if value is None else f"parameter={param}, value={value}"
    return f"{message} ({extras})"


class PromptTooLong(InvalidRequest):
    """The prompt leaves no room to generate within the model's context."""

    def __init__(self, *, max_model_len: int, prompt_len: int) -> None:
        super().__init__(
            f"the prompt has {prompt_len} tokens, but the model's context is {max_model_len} tokens "
            "and at least one must be generated",
            param="prompt",
        )
        self.max_model_len = max_model_len
        self.prompt_len = prompt_len


class TooManyMediaItems(InvalidRequest):
    """More items of a modality than one prompt may hold (vLLM's validate_num_items and message)."""

    def __init__(self, modality: str, *, limit: int, supported: bool) -> None:
        message = f"At most {limit} {modality}(s) may be provided in one prompt."
        if supported:
            message += " Set `--limit-mm-per-prompt` to increase this limit."
        super().__init__(message, param=modality)


class Unsupported(LlmError):
    """A valid request that this Llm cannot serve."""


class NoTokenizer(LlmError):
    """The text layer has no tokenizer: the Llm names none (token-only by design) and none was given.

    The server's fault, not the request's: text routes answer it with 501, token routes still serve.
    """


class Unavailable(LlmError):
    """The Llm cannot take the request now (starting, paused, draining, unreachable)."""


class AdmissionRefused(Unavailable):
    """A queue limit refused the request before it reached the engine: `reason` names the limit
    (vLLM's QueueOverflowError and MaxQueuedTokensError, with their messages); retry later or elsewhere."""

    _MESSAGES: dict[str, str] = {
        "max_num_queued_reqs": "The engine is currently busy and cannot accept new requests. "
        "Please try again later or on a different instance.",
        "max_num_queued_tokens": "The engine has reached its prefill token backlog limit. "
        "Please try again later or on a different instance.",
    }

    def __init__(self, reason: AdmissionReason) -> None:
        super().__init__(self._MESSAGES[reason])
        self.reason: AdmissionReason = reason


class RemoteInvalidRequest(LlmError):
    """A remote server rejected the request as invalid."""


class RemoteNotFound(RemoteInvalidRequest):
    """A remote server serves no model or LoRA adapter of the name (and id) the request gives."""


class Remote(LlmError):
    """A remote server failed with status `code`."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


class EngineDead(LlmError):
    """The engine died: every open stream and every later call fails with this."""
