"""The body of `POST /v1/responses` (vLLM's ResponsesRequest), checked and lowered to a `ChatRequest`.

Stateless, as vLLM without VLLM_ENABLE_RESPONSES_API_STORE and as vLLM's Rust frontend: `store` is taken
and turned off (nothing is kept), `previous_response_id` finds no response (vLLM's 404), `background`
needs a store and is refused with vLLM's words.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from vllm_llm import ChatRequest, TextSamplingParams
from vllm_llm.wire import LoraRequest, StructuredOutputs
from vllm_server.errors import BadRequest, NotFound
from vllm_server.http.openai.chat_request import check_chat_template, check_mm_kwargs
from vllm_server.http.openai.sampling import StructuredOutputsParams, logit_bias_ids, structured_outputs
from vllm_server.http.responses.items import continues_final_message, input_messages
from vllm_server.http.responses.tools import (
    FunctionTool,
    chat_tool_choice,
    function_tools,
)
from vllm_server.request_checks import check_max_tokens

__all__ = ["Reasoning", "ResponsesRequest", "TextConfig"]

Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
IncludeItem = Literal[
    "code_interpreter_call.outputs",
    "computer_call_output.output.image_url",
    "file_search_call.results",
    "message.input_image.image_url",
    "message.output_text.logprobs",
    "reasoning.encrypted_content",
]


class Reasoning(msgspec.Struct, kw_only=True):
    """OpenAI's `reasoning`: the effort reaches the chat template (and `enable_thinking` with it); vLLM
    writes no summaries (the reasoning parser's text is the item's content), nor does this server."""

    effort: Effort | None = None
    generate_summary: Literal["auto", "concise", "detailed"] | None = None
    summary: Literal["auto", "concise", "detailed"] | None = None

    def echo(self) -> dict[str, Any]:
        """As the response shows it."""
        return {"effort": self.effort, "generate_summary": self.generate_summary, "summary": self.summary}


class TextFormat(msgspec.Struct, kw_only=True):
    """`text.format`: text, json_object, or json_schema (vLLM's extract_structured_outputs)."""

    type: Literal["text", "json_object", "json_schema"]
    name: str | None = None
    schema: dict[str, Any] | None = None
    description: str | None = None
    strict: bool | None = None

    def echo(self) -> dict[str, Any]:
        """As the response shows it."""
        if self.type != "json_schema":
            return {"type": self.type}
        return {
            "name": self.name,
            "schema": self.schema,
            "type": self.type,
            "description": self.description,
            "strict": self.strict,
        }


class TextConfig(msgspec.Struct, kw_only=True):
    """OpenAI's `text` config."""

    format: TextFormat | None = None
    verbosity: Literal["low", "medium", "high"] | None = None

    def echo(self) -> dict[str, Any]:
        """As the response shows it."""
        return {"format": None if self.format is None else self.format.echo(), "verbosity": self.verbosity}


class ResponsesRequest(msgspec.Struct, kw_only=True):
    """OpenAI's Responses request with vLLM's extra parameters (unknown fields are ignored, as vLLM's)."""

    input: str | list[Any]
    model: str | None = None
    background: bool | None = False
    include: list[IncludeItem] | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tool_calls: int | None = None
    """Shown in the response, as vLLM's (only its built-in tool loop reads it; this server runs none)."""
    metadata: dict[str, str] | None = None
    logit_bias: dict[str, float] | None = None
    parallel_tool_calls: bool | None = True
    previous_response_id: str | None = None
    prompt: dict[str, Any] | None = None
    reasoning: Reasoning | None = None
    include_reasoning: bool = True
    service_tier: Literal["auto", "default", "flex", "scale", "priority"] = "auto"
    store: bool | None = True
    stream: bool | None = False
    temperature: float | None = None
    text: TextConfig | None = None
    tool_choice: str | dict[str, Any] = "auto"
    tools: list[Any] = msgspec.field(default_factory=list)
    top_logprobs: int | None = 0
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    truncation: Literal["auto", "disabled"] | None = "disabled"
    user: str | None = None
    skip_special_tokens: bool = True
    include_stop_str_in_output: bool = False
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    prompt_cache_key: str | None = None
    """Ignored, as vLLM ("This field has not been implemented yet and vLLM will ignore it")."""
    request_id: str | None = None
    session_id: str | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    priority: int = 0
    cache_salt: str | None = None
    enable_response_messages: bool = False
    previous_input_messages: list[Any] | None = None
    structured_outputs: StructuredOutputsParams | None = None
    repetition_penalty: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    ignore_eos: bool = False
    vllm_xargs: dict[str, Any] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    ec_transfer_params: dict[str, Any] | None = None
    chat_template_kwargs: dict[str, Any] | None = None

    # ---- checks ----------------------------------------------------------------------------------------

    def check(
        self, max_model_len: int, *, trust_mm_kwargs: bool = False, trust_chat_template: bool = False
    ) -> list[FunctionTool]:
        """vLLM's validators of this request; the checked function tools."""
        if self.background:
            if self.store is False:
                raise BadRequest("background can only be used when `store` is true", param="background")
            raise BadRequest(
                "This vLLM engine does not support `store=True` and therefore does not support the "
                "background mode. To enable these features, set the environment variable "
                "`VLLM_ENABLE_RESPONSES_API_STORE=1` when launching the vLLM server.",
                param="background",
            )
        if self.prompt is not None:
            raise BadRequest("prompt template is not supported", param="prompt")
        if self.previous_input_messages and self.previous_response_id:
            raise BadRequest(
                "Only one of `previous_input_messages` and `previous_response_id` can be set.",
                param="previous_response_id",
            )
        if self.previous_response_id is not None:
            # Nothing is stored here, so no response is ever found (vLLM's _make_not_found_error).
            raise NotFound(f"Response with id '{self.previous_response_id}' not found.", param="response_id")
        if self.previous_input_messages:
            raise BadRequest(
                "previous_input_messages (Harmony messages) are not supported by this server",
                param="previous_input_messages",
            )
        if self.enable_response_messages:
            raise BadRequest(
                "enable_response_messages is not supported by this server", param="enable_response_messages"
            )
        if self.include and "message.output_text.logprobs" in self.include:
            raise BadRequest(
                "output logprobs are not supported by this server's Responses API", param="include"
            )
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if value is not None and not -2.0 <= value <= 2.0:
                raise BadRequest(f"{name} must be in [-2, 2], got {value}", param=name)
        if self.text is not None and self.text.format is not None and self.structured_outputs is not None:
            raise BadRequest(
                "Cannot specify both structured_outputs and text.format", param="structured_outputs"
            )
        fmt = self.text.format if self.text is not None else None
        if fmt is not None and fmt.type == "json_schema" and fmt.schema is None:
            raise BadRequest("text.format of type json_schema needs a `schema`", param="text")
        if not trust_chat_template:  # vLLM's Responses request has no chat_template of its own
            check_chat_template(None, self.chat_template_kwargs)
        check_max_tokens(self.max_output_tokens, "max_output_tokens", max_model_len)
        if not trust_mm_kwargs:
            check_mm_kwargs(self.mm_processor_kwargs, self.media_io_kwargs)
        if not isinstance(self.tools, list):
            raise BadRequest("tools must be a list", param="tools")
        return function_tools(self.tools)

    @property
    def streaming(self) -> bool:
        """Whether the response is streamed."""
        return bool(self.stream)

    def session(self, header: str | None) -> str | None:
        """vLLM's _get_session_id: the body's session_id, else the X-Session-ID header."""
        if self.session_id:
            return self.session_id
        if header:
            return header
        value = (self.vllm_xargs or {}).get("session_id")
        return value if isinstance(value, str) and value else None

    # ---- lowering --------------------------------------------------------------------------------------

    def structured(self) -> StructuredOutputs | None:
        """`text.format`, else `structured_outputs`, as the wire constraint (vLLM's
        extract_structured_outputs)."""
        fmt = self.text.format if self.text is not None else None
        if fmt is None or fmt.type == "text":
            return structured_outputs(self.structured_outputs, None) if fmt is None else None
        if fmt.type == "json_object":
            return StructuredOutputs(json_object=True)
        return StructuredOutputs(json=fmt.schema)

    def params(self) -> TextSamplingParams:
        """The user-level sampling parameters (vLLM's to_sampling_params)."""
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or ())
        return TextSamplingParams(
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            seed=self.seed,
            max_tokens=self.max_output_tokens,
            stop=stop,
            stop_token_ids=list(self.stop_token_ids or ()),
            ignore_eos=self.ignore_eos,
            include_stop_str_in_output=self.include_stop_str_in_output,
            skip_special_tokens=self.skip_special_tokens,
            logit_bias=logit_bias_ids(self.logit_bias),
            structured_outputs=self.structured(),
            extra_args=self.vllm_xargs or None,
        )

    def chat_request(
        self,
        request_id: str,
        tools: list[FunctionTool],
        tool_choice: str | dict[str, Any],
        lora_request: LoraRequest | None,
        *,
        session_id: str | None = None,
    ) -> ChatRequest:
        """The chat-layer request of this Responses request."""
        continue_final = continues_final_message(self.input)
        return ChatRequest(
            request_id=request_id,
            messages=input_messages(self.instructions, self.input),
            params=self.params(),
            add_generation_prompt=not continue_final,
            continue_final_message=continue_final,
            tools=[t.chat.as_dict() for t in tools] or None,
            tool_choice=chat_tool_choice(tool_choice),
            parallel_tool_calls=self.parallel_tool_calls,
            include_reasoning=self.include_reasoning,
            reasoning_effort=None if self.reasoning is None else self.reasoning.effort,
            chat_template_kwargs=self.chat_template_kwargs,
            lora_request=lora_request,
            cache_salt=self.cache_salt,
            priority=self.priority,
            kv_transfer_params=self.kv_transfer_params,
            mm_processor_kwargs=self.mm_processor_kwargs,
            media_io_kwargs=self.media_io_kwargs,
            session_id=session_id,
            ec_transfer_params=self.ec_transfer_params or None,
        )
