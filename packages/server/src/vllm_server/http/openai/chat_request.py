"""The body of `POST /v1/chat/completions` (vLLM's ChatCompletionRequest), lowered to a `ChatRequest`."""

from __future__ import annotations

from typing import Any, ClassVar, Literal

import msgspec

from vllm_llm import ChatMessage, ChatRequest, NamedToolChoice, TextPart, ToolChoice
from vllm_llm.wire import LoraRequest
from vllm_server.errors import BadParameter, BadRequest
from vllm_server.http.openai.sampling import SamplingFields
from vllm_server.http.openai.tools import ChatTool, tool_dicts
from vllm_server.request_checks import check_max_tokens

__all__ = ["ChatCompletionRequest", "check_chat_template", "check_generation_prompt", "check_mm_kwargs"]


class ChatCompletionRequest(SamplingFields, kw_only=True):
    """OpenAI's chat completion request with vLLM's extra parameters."""

    #: Fields vLLM's check_logprobs reads before coercion: a string there is refused, not coerced.
    RAW_NUMBERS: ClassVar[tuple[str, ...]] = ("prompt_logprobs", "top_logprobs")

    messages: list[ChatMessage]
    logprobs: bool | None = False
    top_logprobs: int | None = 0
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    tools: list[ChatTool] | None = None
    tool_choice: str | dict[str, Any] | msgspec.UnsetType | None = msgspec.UNSET
    """Absent: "auto" when tools are given, else "none" (vLLM's check_tool_usage)."""
    parallel_tool_calls: bool | None = True
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"] | None = None
    include_reasoning: bool = True
    echo: bool = False
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    documents: list[dict[str, str]] | None = None
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    return_prompt_text: bool | None = None

    @property
    def num_top_logprobs(self) -> int:
        """top_logprobs (null is 0)."""
        return self.top_logprobs or 0

    @property
    def shown_top_logprobs(self) -> int:
        """How many candidates each logprobs entry shows: all of them for explicit logprob_token_ids
        (vLLM's return_all), else top_logprobs."""
        return -1 if self.logprob_token_ids else self.num_top_logprobs

    @property
    def output_token_limit(self) -> tuple[int | None, str]:
        """max_completion_tokens, else max_tokens, with the name the client used."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    def check(
        self, max_model_len: int, *, trust_mm_kwargs: bool = False, trust_chat_template: bool = False
    ) -> None:
        """vLLM's checks of this request: its validators, then what its serving layer checks."""
        self.validate()
        if not trust_chat_template:
            check_chat_template(self.chat_template, self.chat_template_kwargs)
        check_max_tokens(*self.output_token_limit, max_model_len)
        if not trust_mm_kwargs:
            check_mm_kwargs(self.mm_processor_kwargs, self.media_io_kwargs)

    def validate(self) -> None:
        """vLLM's validators of this request (its model's, which decide what a body is)."""
        if self.logprob_token_ids and not self.logprobs and not self.use_beam_search:
            raise BadParameter(
                "when using `logprob_token_ids`, `logprobs` must be set to true.", param="logprob_token_ids"
            )
        self.check_common()
        k = self.top_logprobs
        if k is not None:
            if k < -1:
                raise BadParameter(
                    "`top_logprobs` must be a positive value or -1.", param="top_logprobs", value=k
                )
            if (k == -1 or k > 0) and not self.logprobs:
                raise BadParameter(
                    "when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs"
                )
        self._check_tools()
        check_generation_prompt(self.add_generation_prompt, self.continue_final_message)

    @property
    def effective_tool_choice(self) -> str | dict[str, Any] | None:
        """tool_choice as vLLM resolves an absent one."""
        if self.tool_choice is msgspec.UNSET:
            return "auto" if self.tools else "none"
        return self.tool_choice

    def _check_tools(self) -> None:
        if self.tools == []:
            raise BadParameter(
                "`tools` must not be an empty array. Either provide at least one tool or omit the field "
                "entirely.",
                param="tools",
            )
        choice = self.effective_tool_choice
        so = self.structured_outputs
        constrained = so is not None and any(x is not None for x in (so.json, so.regex, so.choice))
        if constrained and choice not in ("none", "auto", "required"):
            raise BadRequest("You can only either use constraints for structured outputs or tools, not both.")
        if choice is None or choice == "none":
            return
        if not self.tools:
            raise BadParameter("When using `tool_choice`, `tools` must be set.", param="tool_choice")
        if isinstance(choice, str):
            if choice not in ("auto", "required"):
                raise BadParameter(
                    f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or '
                    '"required" are supported.',
                    param="tool_choice",
                )
            return
        usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
        function = choice.get("function")
        if not isinstance(function, dict):
            raise BadParameter(
                f"Invalid value for `function`: `{function}` in `tool_choice`! {usage}",
                param="tool_choice.function",
            )
        if "name" not in function:
            raise BadParameter(
                f"Expected field `name` in `function` in `tool_choice`! {usage}",
                param="tool_choice.function.name",
            )
        name = function["name"]
        if not isinstance(name, str) or not name:
            raise BadParameter(
                f"Invalid `name` in `function`: `{name}` in `tool_choice`! {usage}",
                param="tool_choice.function.name",
            )
        if not any(tool.function.name == name for tool in self.tools):
            raise BadParameter(
                "The tool specified in `tool_choice` does not match any of the specified `tools`",
                param="tool_choice",
            )

    @property
    def chat_tool_choice(self) -> ToolChoice | None:
        """tool_choice for the chat layer."""
        choice = self.effective_tool_choice
        if isinstance(choice, dict):
            return NamedToolChoice(name=choice["function"]["name"])
        if choice in ("none", "auto", "required"):
            return choice  # type: ignore[return-value]
        return None

    def chat_request(
        self, request_id: str, lora_request: LoraRequest | None, *, session_id: str | None = None
    ) -> ChatRequest:
        """The chat-layer request (`session_id` as `session` resolved it)."""
        prompt_logprobs = self.prompt_logprobs
        if prompt_logprobs is None and self.echo:
            prompt_logprobs = self.num_top_logprobs
        params = self.text_params(
            max_tokens=self.output_token_limit[0],
            logprobs=self.num_top_logprobs if self.logprobs else None,
            prompt_logprobs=prompt_logprobs,
        )
        return ChatRequest(
            request_id=request_id,
            messages=self.messages,
            params=params,
            add_generation_prompt=self.add_generation_prompt,
            continue_final_message=self.continue_final_message,
            tools=tool_dicts(self.tools),
            tool_choice=self.chat_tool_choice,
            parallel_tool_calls=self.parallel_tool_calls,
            include_reasoning=self.include_reasoning,
            reasoning_effort=self.reasoning_effort,
            documents=self.documents,
            chat_template=self.chat_template,
            chat_template_kwargs=self.chat_template_kwargs,
            add_special_tokens=self.add_special_tokens,
            lora_request=lora_request,
            cache_salt=self.cache_salt,
            priority=self.priority,
            kv_transfer_params=self.kv_transfer_params,
            # vLLM renders the messages for `echo`, whatever prompt ids a prefill stage forwarded
            use_forwarded_prompt=not self.echo,
            mm_processor_kwargs=self.mm_processor_kwargs,
            media_io_kwargs=self.media_io_kwargs,
            truncate_prompt_tokens=self.truncate_prompt_tokens,
            truncation_side=self.truncation_side,
            session_id=session_id,
            ec_transfer_params=self.ec_transfer_params or None,
        )

    def echoed_content(self, role: str) -> str:
        """What `echo` prepends: the last message's content when it has the response's role."""
        if not self.echo or not self.messages or self.messages[-1].role != role:
            return ""
        content = self.messages[-1].content
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        return "\n".join(part.text for part in content if isinstance(part, TextPart))


def check_generation_prompt(add_generation_prompt: bool, continue_final_message: bool) -> None:
    """vLLM's check_generation_prompt."""
    if add_generation_prompt and continue_final_message:
        raise BadRequest(
            "Cannot set both `continue_final_message` and `add_generation_prompt` to True.",
            param="continue_final_message",
        )


def check_chat_template(chat_template: str | None, chat_template_kwargs: dict[str, Any] | None) -> None:
    """vLLM's validate_chat_template for a server without --trust-request-chat-template: a request that
    brings a template (`chat_template`, or a non-null `chat_template` in its chat_template_kwargs) is
    refused, 400 BadRequestError with no param."""
    if chat_template is not None or (chat_template_kwargs or {}).get("chat_template") is not None:
        raise BadRequest(
            "Chat template is passed with request, but --trust-request-chat-template is not set. "
            "Refused request with untrusted chat template."
        )


def check_mm_kwargs(
    mm_processor_kwargs: dict[str, Any] | None, media_io_kwargs: dict[str, dict[str, Any]] | None
) -> None:
    """vLLM's validate_request_mm_kwargs for a server without --trust-request-mm-kwargs."""
    if mm_processor_kwargs:
        raise BadParameter(
            "Per-request mm_processor_kwargs are disabled by default because they can change multimodal "
            "preprocessing resource usage. Start the server with --trust-request-mm-kwargs only when "
            "clients are trusted.",
            param="mm_processor_kwargs",
        )
    if media_io_kwargs:
        raise BadParameter(
            "Per-request media_io_kwargs are disabled by default because they can change multimodal media "
            "loading resource usage. Start the server with --trust-request-mm-kwargs only when clients are "
            "trusted.",
            param="media_io_kwargs",
        )
