"""The sampling fields completions and chat share (vLLM's names and defaults), as `TextSamplingParams`.

`response_format` (json_schema / json_object / structural_tag) and `structured_outputs` become the wire
`StructuredOutputs`, response_format overriding as vLLM's `structured_outputs_from_response_format`. The
removed `guided_*` fields are ignored, as vLLM 0.32 ignores them.

Fields vLLM 0.32 takes and ignores on these routes are taken and ignored here too (each says where vLLM
shows it): `user`, `watermarking` (no engine here has a watermark config), `length_penalty` (beam
search only), `routed_experts_prompt_start` (no routed-expert output), `return_token_offsets`,
`mm_payload`, `return_mm_kwargs` (render routes only).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

import msgspec

from vllm_llm import TextSamplingParams
from vllm_llm.wire import RepetitionDetection, StructuredOutputs
from vllm_server.errors import BadParameter, BadRequest

__all__ = [
    "JsonSchemaFormat",
    "ResponseFormat",
    "SamplingFields",
    "StreamOptions",
    "StructuredOutputsParams",
    "logit_bias_ids",
]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
#: The ranges vLLM's pydantic fields declare (`Field(ge=..., le=...)`): a value outside is refused as
#: pydantic refuses it, from the validation handler (`validation.validation_issue`).
Int64 = Annotated[int, msgspec.Meta(ge=_INT64_MIN, le=_INT64_MAX)]
Truncation = Annotated[int, msgspec.Meta(ge=-1, le=_INT64_MAX)]
NonNegative = Annotated[int, msgspec.Meta(ge=0)]
Positive = Annotated[int, msgspec.Meta(ge=1)]

_CACHE_SALT_FORBIDDEN = frozenset("@/\\\x00")
_MAX_CACHE_SALT = 128


class StreamOptions(msgspec.Struct, kw_only=True):
    """OpenAI's stream_options."""

    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class JsonSchemaFormat(msgspec.Struct, kw_only=True):
    """response_format.json_schema."""

    name: str = ""
    description: str | None = None
    schema: dict[str, Any] | None = None
    strict: bool | None = None


class ResponseFormat(msgspec.Struct, kw_only=True):
    """response_format: text, json_object, json_schema, or a structural tag (kept as given)."""

    type: Literal["text", "json_object", "json_schema", "structural_tag"]
    json_schema: JsonSchemaFormat | None = None
    structures: list[dict[str, Any]] | None = None
    triggers: list[str] | None = None
    format: Any = None


class StructuredOutputsParams(msgspec.Struct, kw_only=True):
    """vLLM's user-facing StructuredOutputsParams."""

    json: str | dict[str, Any] | None = None
    regex: str | None = None
    choice: list[str] | None = None
    grammar: str | None = None
    json_object: bool | None = None
    disable_any_whitespace: bool = False
    disable_additional_properties: bool = False
    whitespace_pattern: str | None = None
    structural_tag: str | None = None


class SamplingFields(msgspec.Struct, kw_only=True):
    """Request fields of /v1/completions and /v1/chat/completions alike (unknown fields are ignored)."""

    model: str | None = None
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None
    n: int | None = 1
    presence_penalty: float | None = None
    seed: Int64 | None = None
    stop: str | list[str] | None = None
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    temperature: float | None = None
    top_p: float | None = None
    user: str | None = None
    """Ignored, as vLLM ("NOTE this will be ignored by vLLM", chat_completion/protocol.py)."""
    use_beam_search: bool = False
    top_k: int | None = None
    min_p: float | None = None
    repetition_penalty: float | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    min_tokens: int = 0
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    allowed_token_ids: list[int] | None = None
    prompt_logprobs: int | None = None
    bad_words: list[str] | None = None
    response_format: ResponseFormat | None = None
    structured_outputs: StructuredOutputsParams | None = None
    priority: Int64 = 0
    request_id: str | None = None
    cache_salt: str | None = None
    kv_transfer_params: dict[str, Any] | None = None
    vllm_xargs: dict[str, Any] | None = None
    repetition_detection: RepetitionDetection | None = None
    return_token_ids: bool | None = None
    stream_interval: Positive | None = None
    thinking_token_budget: int | None = None
    truncate_prompt_tokens: Truncation | None = None
    truncation_side: Literal["left", "right"] | None = None
    logprob_token_ids: list[int] | None = None
    session_id: str | None = None
    ec_transfer_params: dict[str, Any] | None = None
    return_tokens_as_token_ids: bool | None = None
    watermarking: bool | None = None
    """Ignored: vLLM applies it only on an engine with a watermark config (VllmConfig.
    _check_supports_watermarking returns False without one), which no engine of this server has: a worker
    refuses `--watermark-config` (`engine_flags.UNSUPPORTED`)."""
    length_penalty: float = 1.0
    """Ignored: vLLM reads it only for beam search (to_beam_search_params), refused here."""
    routed_experts_prompt_start: NonNegative = 0
    """Ignored: vLLM reads it only with --enable-return-routed-experts, which this server lacks."""
    return_token_offsets: bool | None = False
    """Ignored, as vLLM: "ignored on regular generation endpoints" (its field description)."""
    mm_payload: Literal["tensors", "none"] = "tensors"
    """Ignored, as vLLM: "Ignored on regular generation endpoints" (its field description)."""
    return_mm_kwargs: bool | None = None
    """Ignored, as vLLM: a deprecated alias of mm_payload."""

    @property
    def streaming(self) -> bool:
        """Whether the response is streamed."""
        return bool(self.stream)

    def usage_options(self, force: bool = False) -> tuple[bool, bool]:
        """(include_usage, continuous_usage_stats), as vLLM's should_include_usage: both when the server
        forces usage (--enable-force-include-usage), else as stream_options asks."""
        if force:
            return True, True
        options = self.stream_options
        if options is None or not options.include_usage:
            return False, False
        return True, bool(options.continuous_usage_stats)

    def tokens_as_ids(self, server_default: bool) -> bool:
        """Whether logprob tokens read "token_id:N": the request's choice, else the server's flag."""
        given = self.return_tokens_as_token_ids
        return server_default if given is None else given

    def session(self, header: str | None) -> str | None:
        """vLLM's _get_session_id: the body's session_id, else the X-Session-ID header, else
        vllm_xargs["session_id"] (a non-empty string)."""
        if self.session_id:
            return self.session_id
        if header:
            return header
        value = (self.vllm_xargs or {}).get("session_id")
        return value if isinstance(value, str) and value else None

    def check_common(self) -> None:
        """vLLM's request-level validators shared by both APIs."""
        if self.stream_options is not None and not self.stream:
            raise BadParameter(
                "Stream options can only be defined when `stream=True`.", param="stream_options"
            )
        if self.logprob_token_ids and self.use_beam_search:
            raise BadParameter(
                "`logprob_token_ids` is not supported with beam search.", param="logprob_token_ids"
            )
        if self.use_beam_search:
            raise BadRequest("beam search is not supported by this server", param="use_beam_search")
        k = self.prompt_logprobs
        if k is not None:
            if self.stream and (k > 0 or k == -1):
                raise BadParameter(
                    "`prompt_logprobs` are not available when `stream=True`.", param="prompt_logprobs"
                )
            if k < -1:
                raise BadParameter(
                    "`prompt_logprobs` must be a positive value or -1.", param="prompt_logprobs", value=k
                )
        _check_cache_salt(self.cache_salt)
        budget = self.thinking_token_budget
        if budget is not None and budget < -1:
            raise BadParameter(
                "`thinking_token_budget` must be a non-negative integer or -1 for unlimited.",
                param="thinking_token_budget",
                value=budget,
            )
        rf = self.response_format
        if rf is not None and rf.type == "json_schema" and rf.json_schema is None:
            raise BadParameter(
                "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
                param="response_format",
            )
        so = self.structured_outputs
        if so is not None and sum(x is not None for x in (so.json, so.regex, so.choice)) > 1:
            raise BadParameter(
                "You can only use one kind of constraints for structured outputs ('json', 'regex' or "
                "'choice').",
                param="structured_outputs",
            )

    def text_params(
        self, *, max_tokens: int | None, logprobs: int | None, prompt_logprobs: int | None
    ) -> TextSamplingParams:
        """The user-level sampling parameters of this request."""
        stop = [self.stop] if isinstance(self.stop, str) else list(self.stop or ())
        return TextSamplingParams(
            n=1 if self.n is None else self.n,
            temperature=self.temperature,
            top_p=self.top_p,
            top_k=self.top_k,
            min_p=self.min_p,
            repetition_penalty=self.repetition_penalty,
            presence_penalty=self.presence_penalty,
            frequency_penalty=self.frequency_penalty,
            seed=self.seed,
            max_tokens=max_tokens,
            min_tokens=self.min_tokens,
            stop=stop,
            stop_token_ids=list(self.stop_token_ids or ()),
            ignore_eos=self.ignore_eos,
            include_stop_str_in_output=self.include_stop_str_in_output,
            skip_special_tokens=self.skip_special_tokens,
            spaces_between_special_tokens=self.spaces_between_special_tokens,
            logprobs=logprobs,
            prompt_logprobs=prompt_logprobs,
            logit_bias=logit_bias_ids(self.logit_bias),
            allowed_token_ids=self.allowed_token_ids,
            bad_words=list(self.bad_words or ()),
            structured_outputs=structured_outputs(self.structured_outputs, self.response_format),
            repetition_detection=self.repetition_detection,
            extra_args=self.vllm_xargs or None,
            stream_interval=self.stream_interval,
            thinking_token_budget=self.thinking_token_budget,
            logprob_token_ids=self.logprob_token_ids or None,
        )


def structured_outputs(
    params: StructuredOutputsParams | None, response_format: ResponseFormat | None
) -> StructuredOutputs | None:
    """The wire constraint of `structured_outputs` with `response_format` applied over it."""
    fields: dict[str, Any] = {}
    if params is not None:
        fields = {f: getattr(params, f) for f in params.__struct_fields__}
    if response_format is not None and response_format.type != "text":
        for kind in ("json", "json_object", "structural_tag"):
            fields.pop(kind, None)
        if response_format.type == "json_object":
            fields["json_object"] = True
        elif response_format.type == "json_schema":
            assert response_format.json_schema is not None
            fields["json"] = response_format.json_schema.schema
        else:
            fields["structural_tag"] = json.dumps(_drop_none(msgspec.to_builtins(response_format)))
    if not any(v is not None for k, v in fields.items() if k in _KINDS):
        return None
    return StructuredOutputs(**{k: v for k, v in fields.items() if v is not None})


_KINDS = frozenset({"json", "regex", "choice", "grammar", "json_object", "structural_tag"})


def logit_bias_ids(bias: dict[str, float] | None) -> dict[int, float] | None:
    """logit_bias keyed by token id; a key that is not an integer is refused, every such key named in
    one message (vLLM's SamplingParams.from_optional)."""
    if bias is None:
        return None
    ids: dict[int, float] = {}
    bad: list[str] = []
    for token, value in bias.items():
        try:
            ids[int(token)] = value
        except ValueError:
            bad.append(token)
    if bad:
        raise BadParameter(
            f"logit_bias contains key(s) that cannot be converted to integer token IDs: {bad!r}",
            param="logit_bias",
            value=bad,
        )
    return ids


def _check_cache_salt(salt: str | None) -> None:
    if salt is None:
        return
    if not salt:
        raise BadParameter(
            "Parameter 'cache_salt' must be a non-empty string if provided.", param="cache_salt"
        )
    if len(salt) > _MAX_CACHE_SALT or any(c in _CACHE_SALT_FORBIDDEN for c in salt):
        raise BadParameter(
            "Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\\\', "
            "or NUL.",
            param="cache_salt",
        )


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    return value
