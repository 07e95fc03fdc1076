"""The body of `POST /v1/chat/completions` (vLLM's ChatCompletionRequest), lowered to a `ChatRequest`."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from vllm_llm import ChatMessage, ChatRequest, NamedToolChoice, TextPart, ToolChoice
from vllm_llm.wire import LoraRequest
from vllm_server.errors import BadRequest
from vllm_server.http.openai.sampling import SamplingFields
from vllm_server.http.openai.tools import ChatTool, tool_dicts
from vllm_server.request_checks import check_max_tokens

__all__ = ["ChatCompletionRequest", "check_generation_prompt"]


class ChatCompletionRequest(SamplingFields, kw_only=True):
    """OpenAI's chat completion request with vLLM's extra parameters."""

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
    thinking_token_budget: int | None = None
    echo: bool = False
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    add_special_tokens: bool = False
    documents: list[dict[str, str]] | None = None
    chat_template: str | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    mm_processor_kwargs: dict[str, Any] | None = None

    @property
    def num_top_logprobs(self) -> int:
        """top_logprobs (null is 0)."""
        return self.top_logprobs or 0

    @property
    def output_token_limit(self) -> tuple[int | None, str]:
        """max_completion_tokens, else max_tokens, with the name the client used."""
        if self.max_completion_tokens is not None:
            return self.max_completion_tokens, "max_completion_tokens"
        return self.max_tokens, "max_tokens"

    def check(self, max_model_len: int) -> None:
        """vLLM's validators of this request."""
        self.check_common()
        k = self.top_logprobs
        if k is not None:
            if k < -1:
                raise BadRequest("`top_logprobs` must be a positive value or -1.", param="top_logprobs")
            if (k == -1 or k > 0) and not self.logprobs:
                raise BadRequest(
                    "when using `top_logprobs`, `logprobs` must be set to true.", param="top_logprobs"
                )
        if self.chat_template is not None:
            raise BadRequest(
                "Chat template is passed with request, but --trust-request-chat-template is not set. "
                "Refused request with untrusted chat template.",
                param="chat_template",
            )
        self._check_tools()
        self._check_thinking_token_budget()
        check_generation_prompt(self.add_generation_prompt, self.continue_final_message)
        check_max_tokens(*self.output_token_limit, max_model_len)

    @property
    def effective_tool_choice(self) -> str | dict[str, Any] | None:
        """tool_choice as vLLM resolves an absent one."""
        if self.tool_choice is msgspec.UNSET:
            return "auto" if self.tools else "none"
        return self.tool_choice

    def _check_tools(self) -> None:
        if self.tools == []:
            raise BadRequest(
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
            raise BadRequest("When using `tool_choice`, `tools` must be set.", param="tool_choice")
        if isinstance(choice, str):
            if choice not in ("auto", "required"):
                raise BadRequest(
                    f'Invalid value for `tool_choice`: {choice}! Only named tools, "none", "auto" or '
                    '"required" are supported.',
                    param="tool_choice",
                )
            return
        usage = 'Correct usage: `{"type": "function", "function": {"name": "my_function"}}`'
        function = choice.get("function")
        if not isinstance(function, dict):
            raise BadRequest(
                f"Invalid value for `function`: `{function}` in `tool_choice`! {usage}",
                param="tool_choice.function",
            )
        if "name" not in function:
            raise BadRequest(
                f"Expected field `name` in `function` in `tool_choice`! {usage}",
                param="tool_choice.function.name",
            )
        name = function["name"]
        if not isinstance(name, str) or not name:
            raise BadRequest(
                f"Invalid `name` in `function`: `{name}` in `tool_choice`! {usage}",
                param="tool_choice.function.name",
            )
        if not any(tool.function.name == name for tool in self.tools):
            raise BadRequest(
                "The tool specified in `tool_choice` does not match any of the specified `tools`",
                param="tool_choice",
            )

    def _check_thinking_token_budget(self) -> None:
        budget = self.thinking_token_budget
        if budget is not None and budget < -1:
            raise BadRequest(
                "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.",
                param="thinking_token_budget",
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

    def chat_request(self, request_id: str, lora_request: LoraRequest | None) -> ChatRequest:
        """The chat-layer request."""
        prompt_logprobs = self.prompt_logprobs
        if prompt_logprobs is None and self.echo:
            prompt_logprobs = self.num_top_logprobs
        params = self.text_params(
            max_tokens=self.output_token_limit[0],
            logprobs=self.num_top_logprobs if self.logprobs else None,
            prompt_logprobs=prompt_logprobs,
        )
        params.thinking_token_budget = self.thinking_token_budget
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
            chat_template_kwargs=self.chat_template_kwargs,
            add_special_tokens=self.add_special_tokens,
            lora_request=lora_request,
            cache_salt=self.cache_salt,
            priority=self.priority,
            kv_transfer_params=self.kv_transfer_params,
            mm_processor_kwargs=self.mm_processor_kwargs,
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
