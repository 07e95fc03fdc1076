"""The body of `POST /v1/completions` (vLLM's CompletionRequest) and its lowering to `TextRequest`s."""

from __future__ import annotations

from typing import Any, ClassVar

from vllm_llm import TextRequest
from vllm_llm.wire import LoraRequest
from vllm_server.errors import BadParameter, BadRequest
from vllm_server.http.openai.sampling import SamplingFields
from vllm_server.request_checks import check_max_tokens

__all__ = ["CompletionRequest", "Prompt"]

#: vLLM's VLLM_MAX_COMPLETION_PROMPTS default.
MAX_PROMPTS = 1024

Prompt = str | list[int]


class CompletionRequest(SamplingFields, kw_only=True):
    """OpenAI's completion request with vLLM's extra parameters."""

    #: Fields vLLM's check_logprobs reads before coercion: a string there is refused, not coerced.
    RAW_NUMBERS: ClassVar[tuple[str, ...]] = ("prompt_logprobs", "logprobs")

    prompt: str | list[Any] | None = None
    echo: bool | None = False
    logprobs: int | None = None
    max_tokens: int | None = 16
    suffix: str | None = None
    add_special_tokens: bool = True
    prompt_embeds: str | list[str] | None = None
    """Base64 tensors; refused (see `check_prompt_embeds`)."""

    def __post_init__(self) -> None:
        # vLLM's normalize_null_max_tokens: an explicit null is the default 16.
        if self.max_tokens is None:
            self.max_tokens = 16

    def check(self, max_model_len: int, *, prompt_embeds_enabled: bool | None = None) -> None:
        """vLLM's checks of this request: its validators, then what its serving layer checks
        (`prompt_embeds_enabled`: whether the engine takes them, None when the server does not know)."""
        self.validate()
        if self.suffix:
            raise BadRequest("suffix is not supported by this model", param="suffix")
        self.check_prompt_embeds(prompt_embeds_enabled)
        check_max_tokens(self.max_tokens, "max_tokens", max_model_len)

    def validate(self) -> None:
        """vLLM's validators of this request (its model's, which decide what a body is)."""
        if self.prompt in (None, "") and self.prompt_embeds in (None, []):
            raise BadParameter(
                "Either prompt or prompt_embeds must be provided and non-empty.", param="prompt"
            )
        ids = self.logprob_token_ids
        if ids and not self.use_beam_search:
            if self.echo and self.max_tokens == 0:
                raise BadParameter(
                    "`logprob_token_ids` is not supported when `echo=True` and `max_tokens=0` because no "
                    "output tokens are generated.",
                    param="logprob_token_ids",
                )
            if self.logprobs is None:
                raise BadParameter(
                    "when using `logprob_token_ids`, `logprobs` must be set.", param="logprob_token_ids"
                )
        self.check_common()
        if self.logprobs is not None and self.logprobs < -1:
            raise BadParameter(
                "`logprobs` must be a positive value or -1.", param="logprobs", value=self.logprobs
            )

    def check_prompt_embeds(self, enabled: bool | None) -> None:
        """Prompt embeddings (alone or beside a prompt) are refused: with vLLM's messages where vLLM
        refuses them, else as not supported by this server (it does not decode tensors)."""
        if not self.prompt_embeds:
            return
        if self.echo:
            raise BadRequest("Echo is unsupported with prompt embeds.")
        if self.prompt_logprobs is not None:
            raise BadRequest("prompt_logprobs is not compatible with prompt embeds.")
        if enabled is False:
            raise BadRequest(
                "You must set `--enable-prompt-embeds` to input `prompt_embeds`.", param="prompt_embeds"
            )
        raise BadRequest("prompt_embeds is not supported by this server", param="prompt_embeds")

    @property
    def shown_logprobs(self) -> int | None:
        """How many candidates each logprobs entry shows: all for explicit logprob_token_ids."""
        if self.logprobs is not None and self.logprob_token_ids:
            return -1
        return self.logprobs

    def prompts(self) -> list[Prompt]:
        """The prompts: one text, texts, one token list, or token lists."""
        prompt = self.prompt
        if prompt is None or prompt == "" or prompt == []:
            raise BadParameter(
                "Either prompt or prompt_embeds must be provided and non-empty.", param="prompt"
            )
        if isinstance(prompt, str):
            return [prompt]
        if all(_is_token(t) for t in prompt):
            return [list(prompt)]
        if all(isinstance(p, str) for p in prompt) or all(_is_tokens(p) for p in prompt):
            if len(prompt) > MAX_PROMPTS:
                raise BadParameter(
                    f"prompt list length {len(prompt)} exceeds the maximum allowed count of {MAX_PROMPTS}.",
                    param="prompt",
                )
            return [p if isinstance(p, str) else list(p) for p in prompt]
        raise BadRequest(
            "prompt must be a string, a list of strings, a list of token ids (non-negative integers) or "
            "a list of such lists",
            param="prompt",
        )

    def text_requests(
        self, request_id: str, lora_request: LoraRequest | None, *, session_id: str | None = None
    ) -> list[TextRequest]:
        """One text request per prompt (`f"{request_id}-{i}"`, as vLLM)."""
        echo_only = bool(self.echo) and self.max_tokens == 0
        prompt_logprobs = self.prompt_logprobs
        if prompt_logprobs is None and self.echo:
            prompt_logprobs = self.logprobs
        params = self.text_params(
            # vLLM generates one token when echo asks for none, and reports only the prompt.
            max_tokens=1 if echo_only else self.max_tokens,
            logprobs=self.logprobs,
            prompt_logprobs=prompt_logprobs,
        )
        return [
            TextRequest(
                request_id=f"{request_id}-{i}",
                prompt=prompt,
                params=params,
                add_special_tokens=self.add_special_tokens,
                lora_request=lora_request,
                cache_salt=self.cache_salt,
                priority=self.priority,
                kv_transfer_params=self.kv_transfer_params,
                truncate_prompt_tokens=self.truncate_prompt_tokens,
                truncation_side=self.truncation_side,
                session_id=session_id,
                ec_transfer_params=self.ec_transfer_params or None,
            )
            for i, prompt in enumerate(self.prompts())
        ]


def _is_token(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_tokens(value: object) -> bool:
    return isinstance(value, list) and bool(value) and all(_is_token(t) for t in value)
