"""`ChatLlm`: chat messages in, assistant deltas out, over a `TextLlm`.

Messages are rendered with the tokenizer's chat template (tokenizer_config.json "chat_template" or
chat_template.jinja) in transformers' sandboxed Jinja environment, then tokenized without special tokens
(the template writes them), as vLLM's chat serving does. Messages reach the template as vLLM hands them over:
content as a string or as OpenAI-style parts, whichever the template reads (`content_format`, detected from
the template when "auto"); assistant tool-call arguments as objects; reasoning as `reasoning` and
`reasoning_content`.

With parsers configured (`ParserOptions`: vLLM's `--enable-auto-tool-choice`, `--tool-call-parser`,
`--reasoning-parser`), replies carry `reasoning` and `tool_calls` parsed from the output here, at the caller;
`tool_choice` is refused, constrained and applied as vLLM 0.32 does.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

import msgspec

from vllm_llm._errors import InvalidRequest, TooManyMediaItems
from vllm_llm.chat._content_format import detect_content_format
from vllm_llm.chat._forwarded import (
    Forwarded,
    check_forwarded_length,
    check_forwarded_vocab,
    split_forwarded,
)
from vllm_llm.chat._harmony import (
    HarmonyParser,
    check_harmony_request,
    harmony_encoding,
    render_harmony,
    uses_harmony,
)
from vllm_llm.chat._parsing import ParserOptions, Parsing
from vllm_llm.chat._template import render_chat_template
from vllm_llm.parsers import (
    ChatParser,
    MessageDelta,
    NamedToolChoice,
    ParsedCall,
    ToolCallDelta,
    ToolChoice,
    random_tool_call_id,
)
from vllm_llm.text import (
    TextDelta,
    TextLlm,
    TextRequest,
    TextSamplingParams,
    TextStream,
    TextUsage,
    TokenLogprobs,
)
from vllm_llm.text._lowering import check_truncation, truncate_prompt
from vllm_llm.wire import LlmInfo, LoraRequest, MultiModalFeature

if TYPE_CHECKING:
    from vllm_llm.multimodal import MediaOptions, MultiModalOptions, MultiModalProcessor

__all__ = [
    "AudioUrlPart",
    "ChatChoice",
    "ChatDelta",
    "ChatLlm",
    "ChatMessage",
    "ChatRequest",
    "ChatResult",
    "ChatStream",
    "ContentFormat",
    "ContentPart",
    "FunctionCall",
    "ImageEmbedsPart",
    "ImageUrlPart",
    "InputAudio",
    "InputAudioPart",
    "MediaPart",
    "MediaUrl",
    "NamedToolChoice",
    "ParserOptions",
    "RenderedChat",
    "TextPart",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "VideoUrlPart",
]

ContentFormat = Literal["auto", "openai", "string"]
ChatFinishReason = Literal["stop", "length", "abort", "error", "repetition", "tool_calls"]
#: Variables the template does not take from chat_template_kwargs: given by the request itself, or (as
#: vLLM's resolve_chat_template_kwargs drops them) `chat_template` and `tokenize`.
_RESERVED = frozenset(
    {"messages", "tools", "documents", "add_generation_prompt", "chat_template", "tokenize"}
)
#: vLLM's merge_kwargs: a request's chat_template_kwargs value of None or "auto" leaves a default as it is.
_UNSET_KWARGS: tuple[object, ...] = (None, "auto")


class TextPart(msgspec.Struct, kw_only=True, tag_field="type", tag="text"):
    """A text part of a message's content."""

    text: str


class MediaUrl(msgspec.Struct, kw_only=True):
    """Where a media item is: a ``data:`` URL, an ``http(s)`` URL or a ``file:`` URL."""

    url: str
    detail: str | None = None


class ImageUrlPart(msgspec.Struct, kw_only=True, tag_field="type", tag="image_url"):
    """An image of a message's content (``uuid``: the client's own cache key for it, as vLLM's)."""

    image_url: MediaUrl
    uuid: str | None = None


class AudioUrlPart(msgspec.Struct, kw_only=True, tag_field="type", tag="audio_url"):
    """An audio clip by URL."""

    audio_url: MediaUrl
    uuid: str | None = None


class InputAudio(msgspec.Struct, kw_only=True):
    """Base64 audio data and its format."""

    data: str
    format: str


class InputAudioPart(msgspec.Struct, kw_only=True, tag_field="type", tag="input_audio"):
    """An audio clip given inline."""

    input_audio: InputAudio
    uuid: str | None = None


class VideoUrlPart(msgspec.Struct, kw_only=True, tag_field="type", tag="video_url"):
    """A video by URL."""

    video_url: MediaUrl
    uuid: str | None = None


class ImageEmbedsPart(msgspec.Struct, kw_only=True, tag_field="type", tag="image_embeds"):
    """Precomputed image embeddings (vLLM takes them only with ``--enable-mm-embeds``)."""

    image_embeds: str | dict[str, str]
    uuid: str | None = None


MediaPart = ImageUrlPart | AudioUrlPart | InputAudioPart | VideoUrlPart | ImageEmbedsPart
ContentPart = TextPart | ImageUrlPart | AudioUrlPart | InputAudioPart | VideoUrlPart | ImageEmbedsPart
_MODALITY_OF: dict[type[Any], str] = {
    ImageUrlPart: "image",
    AudioUrlPart: "audio",
    InputAudioPart: "audio",
    VideoUrlPart: "video",
    ImageEmbedsPart: "image",
}


class FunctionCall(msgspec.Struct, kw_only=True):
    """The function a tool call invokes; `arguments` is a JSON object text (or the object)."""

    name: str
    arguments: str | dict[str, Any] = ""


class ToolCall(msgspec.Struct, kw_only=True, tag_field="type", tag="function"):
    """An assistant's call of a function tool."""

    function: FunctionCall
    id: str | None = None


class ChatMessage(msgspec.Struct, kw_only=True):
    """One chat message (OpenAI's shape); None fields are not shown to the template."""

    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    reasoning: str | None = None
    reasoning_content: str | None = None
    """Deprecated name of `reasoning` (accepted, as vLLM accepts it)."""


class ChatRequest(msgspec.Struct, kw_only=True):
    """A conversation to continue, with sampling parameters and rendering options."""

    request_id: str
    messages: list[ChatMessage]
    params: TextSamplingParams = msgspec.field(default_factory=TextSamplingParams)
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    tools: list[dict[str, Any]] | None = None
    """JSON schemas of the tools, as given to the template."""
    tool_choice: ToolChoice | None = "none"
    """None is an explicit null (vLLM treats it as `auto` when parsing)."""
    parallel_tool_calls: bool | None = True
    include_reasoning: bool = True
    reasoning_effort: str | None = None
    documents: list[dict[str, Any]] | None = None
    chat_template: str | None = None
    """A template to use instead of the tokenizer's."""
    chat_template_kwargs: dict[str, Any] | None = None
    add_special_tokens: bool = False
    lora_request: LoraRequest | None = None
    cache_salt: str | None = None
    priority: int = 0
    data_parallel_rank: int | None = None
    trace_headers: dict[str, str] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    """The engine's KV transfer parameters; `prompt_token_ids` in them is the prompt, forwarded by a
    prefill stage (taken instead of rendering the messages, as vLLM's decode stage takes it)."""
    use_forwarded_prompt: bool = True
    """False: render the messages even when `kv_transfer_params` forwards prompt ids (vLLM's `echo`)."""
    arrival_time: float | None = None
    mm_processor_kwargs: dict[str, Any] | None = None
    """Options of the model's HF processor for this request's media (vLLM's mm_processor_kwargs)."""
    media_io_kwargs: dict[str, dict[str, Any]] | None = None
    """Media loading options by modality, over the server's (vLLM's media_io_kwargs): for images
    `image_mode` and `rgba_background_color`."""
    truncate_prompt_tokens: int | None = None
    """Keep only this many tokens of the rendered prompt (see `TextRequest.truncate_prompt_tokens`)."""
    truncation_side: Literal["left", "right"] | None = None
    session_id: str | None = None
    ec_transfer_params: dict[str, Any] | None = None


class RenderedChat(msgspec.Struct, kw_only=True, frozen=True):
    """The rendered prompt and its tokens."""

    prompt: str | None
    """None for forwarded prompt ids (nothing was rendered)."""
    prompt_token_ids: list[int]


class ChatDelta(msgspec.Struct, kw_only=True):
    """New assistant content of one choice; the role comes on each choice's first delta."""

    index: int
    content: str | None
    """The new content; None when a parser holds everything back (or it is all reasoning or calls)."""
    token_ids: list[int]
    text: str = ""
    """The raw new text, before any parser."""
    reasoning: str | None = None
    tool_calls: list[ToolCallDelta] = msgspec.field(default_factory=list)
    role: str | None = None
    logprobs: list[TokenLogprobs] | None = None
    finish_reason: ChatFinishReason | None = None
    stop_reason: int | str | None = None
    prompt_logprobs: list[TokenLogprobs | None] | None = None
    kv_transfer_params: dict[str, Any] | None = None
    usage: TextUsage | None = None
    """Only on the last delta of the stream."""


class ChatChoice(msgspec.Struct, kw_only=True):
    """One whole assistant reply."""

    index: int
    role: str
    content: str | None
    token_ids: list[int]
    logprobs: list[TokenLogprobs] | None
    finish_reason: ChatFinishReason | None
    stop_reason: int | str | None
    reasoning: str | None = None
    tool_calls: list[ToolCall] = msgspec.field(default_factory=list)
    reasoning_tokens: int = 0


class ChatResult(msgspec.Struct, kw_only=True):
    """A whole chat request."""

    request_id: str
    prompt: RenderedChat
    choices: list[ChatChoice]
    usage: TextUsage


class _ChoiceParse:
    """The parsing of one choice: its parser and what it streamed."""

    def __init__(self, parser: ChatParser) -> None:
        self.parser = parser
        self.tools_streamed = False

    def feed(self, d: TextDelta) -> MessageDelta | None:
        """Parse one text delta. While a stop string holds text back, the parser reads the released
        steps instead (whole tokens: an id-keyed `</think>` arrives with its text), joined as one delta."""
        finished = d.finish_reason is not None
        if d.token_steps is None:
            return self.parser.feed(d.text, d.token_ids, finished=finished)
        if not d.token_steps:
            return self.parser.feed("", [], finished=True) if finished else None
        last = len(d.token_steps) - 1
        return _joined(
            [
                self.parser.feed(text, ids, finished=finished and i == last)
                for i, (text, ids) in enumerate(d.token_steps)
            ]
        )


class ChatStream:
    """The deltas of one chat request; closing it aborts what is left."""

    def __init__(
        self,
        prompt: RenderedChat,
        role: str,
        text: TextStream,
        *,
        request: ChatRequest | None = None,
        parser: Callable[[], ChatParser | None] = lambda: None,
        probe: ChatParser | None = None,
        multimodal_tokens: dict[str, int] | None = None,
    ) -> None:
        self.prompt = prompt
        self.role = role
        self.multimodal_tokens = multimodal_tokens or {}
        """The prompt's media placeholder tokens by modality (vLLM's multimodal_tokens of its usage)."""
        self._text = text
        self._request = request
        self._new_parser = parser
        self._started: set[int] = set()
        self._parses: dict[int, _ChoiceParse | None] = {}
        self._probe = probe
        """One of the request's parsers (None: no parsing), asked only pure questions (reasoning tokens)."""
        self._parsing = self._probe is not None
        self._counts_reasoning = self._probe is not None and self._probe.reasoning is not None
        self.parse_deltas = True
        """False: deltas carry the raw text as content; the caller parses each choice whole at its end
        (`parse_choice`), as vLLM does for a non-streaming request."""

    @property
    def request_id(self) -> str:
        """The request id."""
        return self._text.request_id

    def __aiter__(self) -> ChatStream:
        return self

    def _parse_of(self, index: int) -> _ChoiceParse | None:
        if index not in self._parses:
            parser = self._new_parser()
            if parser is not None:
                parser.start(self.prompt.prompt_token_ids)
            self._parses[index] = _ChoiceParse(parser) if parser is not None else None
        return self._parses[index]

    async def __anext__(self) -> ChatDelta:
        d = await self._text.__anext__()
        first = d.index not in self._started
        self._started.add(d.index)
        delta = ChatDelta(
            index=d.index,
            content=d.text,
            text=d.text,
            token_ids=d.token_ids,
            role=self.role if first else None,
            logprobs=d.logprobs,
            finish_reason=d.finish_reason,
            stop_reason=d.stop_reason,
            prompt_logprobs=d.prompt_logprobs,
            kv_transfer_params=d.kv_transfer_params,
            usage=d.usage,
        )
        parse = self._parse_of(d.index) if self.parse_deltas else None
        if parse is None:
            return delta
        parsed = parse.feed(d)
        delta.content = parsed.content if parsed is not None else None
        delta.reasoning = parsed.reasoning if parsed is not None else None
        calls = parsed.tool_calls if parsed is not None else []
        if self._request is not None and self._request.parallel_tool_calls is False:
            calls = [c for c in calls if c.index == 0]  # vLLM's maybe_filter_parallel_tool_calls
        delta.tool_calls = calls
        parse.tools_streamed = parse.tools_streamed or bool(calls)
        named = self._request is not None and isinstance(self._request.tool_choice, NamedToolChoice)
        if parse.tools_streamed and not named and d.finish_reason == "stop":
            delta.finish_reason = "tool_calls"
        return delta

    async def aclose(self) -> None:
        """Close the stream; unfinished choices are aborted."""
        await self._text.aclose()

    async def __aenter__(self) -> ChatStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    @property
    def parsing(self) -> bool:
        """Whether parsers run over this request's output."""
        return self._parsing

    @property
    def counts_reasoning_tokens(self) -> bool:
        """Whether usage reports reasoning tokens (a reasoning parser is configured)."""
        return self._counts_reasoning

    def count_reasoning_tokens(self, token_ids: Sequence[int]) -> int:
        """The reasoning tokens among one choice's output tokens."""
        return self._probe.count_reasoning_tokens(token_ids) if self._probe is not None else 0

    async def collect(self) -> ChatResult:
        """Read the stream to its end and assemble the replies (parsed whole, as vLLM parses them)."""
        self.parse_deltas = False
        result = await self._text.collect()
        choices = [
            self.parse_choice(c.index, c.text, c.token_ids, c.logprobs, c.finish_reason, c.stop_reason)
            for c in result.choices
        ]
        return ChatResult(
            request_id=result.request_id, prompt=self.prompt, choices=choices, usage=result.usage
        )

    def parse_choice(
        self,
        index: int,
        text: str,
        token_ids: list[int],
        logprobs: list[TokenLogprobs] | None,
        finish_reason: str | None,
        stop_reason: int | str | None,
    ) -> ChatChoice:
        """One whole reply from its raw output, parsed as vLLM's chat_completion_full_generator does."""
        choice = ChatChoice(
            index=index,
            role=self.role,
            content=text,
            token_ids=token_ids,
            logprobs=logprobs,
            finish_reason=finish_reason,  # type: ignore[arg-type]
            stop_reason=stop_reason,
        )
        parser = self._new_parser()
        request = self._request
        if parser is None or request is None:
            return choice
        parsed = parser.parse_tokens(token_ids) if isinstance(parser, HarmonyParser) else parser.parse(text)
        choice.reasoning = parsed.reasoning
        choice.content = parsed.content
        choice.reasoning_tokens = parser.count_reasoning_tokens(token_ids)
        if not request.include_reasoning:
            choice.logprobs = None  # vLLM hides per-token metadata with the reasoning
        forced = isinstance(request.tool_choice, NamedToolChoice) or request.tool_choice == "required"
        calls: list[ParsedCall] = []
        if forced:
            choice.content = parsed.content or ""
            calls = parsed.tool_calls or []
        elif parser.tools is not None and request.tools and request.tool_choice in ("auto", None):
            calls = parsed.tool_calls or []
        if request.parallel_tool_calls is False:
            calls = calls[:1]
        choice.tool_calls = [
            ToolCall(
                id=call.id or random_tool_call_id(),
                function=FunctionCall(name=call.name, arguments=call.arguments),
            )
            for call in calls
        ]
        auto_called = bool(calls) and not forced
        if auto_called or (request.tool_choice == "required" and finish_reason == "stop"):
            choice.finish_reason = "tool_calls"
        return choice


class ChatLlm:
    """Chat over a `TextLlm` (see the module docstring)."""

    def __init__(
        self,
        text: TextLlm,
        *,
        chat_template: str | None = None,
        content_format: ContentFormat = "auto",
        response_role: str = "assistant",
        parsers: ParserOptions | None = None,
        multimodal: MultiModalOptions | None = None,
        default_template_kwargs: Mapping[str, Any] | None = None,
        exclude_tools_when_tool_choice_none: bool = False,
    ) -> None:
        """`default_template_kwargs` and `exclude_tools_when_tool_choice_none` are vLLM's
        --default-chat-template-kwargs and --exclude-tools-when-tool-choice-none."""
        self.text = text
        self._chat_template = chat_template
        self._default_kwargs = dict(default_template_kwargs or {})
        self._exclude_tools_when_none = exclude_tools_when_tool_choice_none
        self._content_format = content_format
        self._response_role = response_role
        self.parsers = parsers or ParserOptions()
        self.harmony = uses_harmony(text.info())
        """Whether the model speaks Harmony (gpt-oss): rendered and parsed by `chat._harmony`, as vLLM."""
        self._parsing = Parsing(self.parsers, harmony=self.harmony)
        self._parsing.check_tokenizer(text.tokenizer, text.info().model)
        self._formats: dict[str, Literal["openai", "string"]] = {}
        self._media = _media_processor(text.info(), multimodal)

    def render(self, request: ChatRequest) -> RenderedChat:
        """The prompt text and token ids of `request`'s conversation (or the prompt ids its
        kv_transfer_params forward); raises `InvalidRequest`."""
        ids = self._forwarded(request).prompt_token_ids
        if ids is not None:
            return RenderedChat(prompt=None, prompt_token_ids=ids)
        return self._render_messages(request)

    def _render_messages(self, request: ChatRequest) -> RenderedChat:
        tools = self.template_tools(request)
        if self.harmony:
            self._placeholders(request.messages)  # media: refused as for any text-only model
            ids = render_harmony(request, include_tools=tools is not None)
            return RenderedChat(prompt=harmony_encoding().decode(ids), prompt_token_ids=ids)
        tokenizer = self.text.tokenizer
        # vLLM's preprocess_chat always merges the defaults (they hold its own `tokenize` at least).
        kwargs = _with_defaults(self._default_kwargs, self._request_kwargs(request))
        template = request.chat_template or self._chat_template or _kwargs_template(kwargs)
        if template is None:
            template = tokenizer.get_chat_template(has_tools=bool(tools))
        content_format = self._format_of(template)
        variables = {**tokenizer.special_tokens_map, **kwargs}
        placeholder = self._placeholders(request.messages)
        prompt = render_chat_template(
            template,
            [_message_dict(m, content_format, placeholder) for m in request.messages],
            tools=tools,
            documents=request.documents,
            add_generation_prompt=request.add_generation_prompt,
            continue_final_message=request.continue_final_message,
            variables={k: v for k, v in variables.items() if k not in _RESERVED},
        )
        ids = tokenizer.encode(prompt, add_special_tokens=request.add_special_tokens)
        return RenderedChat(prompt=prompt, prompt_token_ids=ids)

    async def render_with_media(self, request: ChatRequest) -> RenderedChat:
        """`render`, with the media loaded and processed: each placeholder expanded to as many tokens as
        its item's embeddings (what the engine gets, and what vLLM's /tokenize counts)."""
        rendered, _ = await self._prepare_media(request, self.render(request))
        return rendered

    def template_tools(self, request: ChatRequest) -> list[dict[str, Any]] | None:
        """The tools the template gets: the request's, or none when its tool_choice is "none" and the
        server excludes them then (vLLM's --exclude-tools-when-tool-choice-none; the parsers still get
        the request's tools, as vLLM's)."""
        if self._exclude_tools_when_none and request.tool_choice == "none":
            return None
        return request.tools

    def template_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        """The chat_template_kwargs the parsers (and the engine's reasoning parser) get, as vLLM's
        effective_chat_template_kwargs: the request's (`_request_kwargs`) over the server's
        --default-chat-template-kwargs, where a request's None or "auto" leaves the default; without
        defaults, the request's as they are (vLLM's with_defaults merges nothing then)."""
        given = self._request_kwargs(request)
        return _with_defaults(self._default_kwargs, given) if self._default_kwargs else given

    @staticmethod
    def _request_kwargs(request: ChatRequest) -> dict[str, Any]:
        """The request's side of the template's variables, as vLLM's build_chat_params: its
        chat_template_kwargs, overridden by `reasoning_effort` when set, and `enable_thinking` following
        it unless the request chose."""
        given = request.chat_template_kwargs or {}
        kwargs = dict(given)
        if request.reasoning_effort is not None:
            kwargs["reasoning_effort"] = request.reasoning_effort
            if "enable_thinking" not in given:
                kwargs["enable_thinking"] = request.reasoning_effort != "none"
        return kwargs

    def _placeholders(self, messages: Sequence[ChatMessage]) -> Callable[[str], str]:
        """Check the request's media against the model and its limits (vLLM's order and messages);
        return the placeholder text of each modality."""
        counts: dict[str, int] = {}
        for part in _media_parts(messages):
            if isinstance(part, ImageEmbedsPart):
                raise InvalidRequest(
                    "image_embeds input is not supported by this server (vLLM takes it only with "
                    "`--enable-mm-embeds`)",
                    param="messages",
                )
            modality = _MODALITY_OF[type(part)]
            counts[modality] = counts.get(modality, 0) + 1
            if self._media is None:
                raise TooManyMediaItems(modality, limit=0, supported=False)
            self._media.check_count(modality, counts[modality])
        media = self._media
        return media.placeholder if media is not None else _no_placeholder

    async def _prepare_media(
        self, request: ChatRequest, rendered: RenderedChat
    ) -> tuple[RenderedChat, list[MultiModalFeature] | None]:
        """Load the request's media, run the model's processor and expand the prompt's placeholders."""
        parts = [p for p in _media_parts(request.messages) if isinstance(p, ImageUrlPart)]
        if not parts or self._media is None:
            return rendered, None
        from vllm_llm.multimodal import MediaItem, load_image

        media = self._media
        options = _media_options(media.options.media, request.media_io_kwargs)
        images = await asyncio.gather(*(load_image(p.image_url.url, options) for p in parts))
        prepared = await media.prepare(
            rendered.prompt_token_ids,
            [MediaItem("image", image, p.uuid) for p, image in zip(parts, images, strict=True)],
            request.mm_processor_kwargs,
        )
        expanded = RenderedChat(prompt=rendered.prompt, prompt_token_ids=prepared.prompt_token_ids)
        return expanded, prepared.mm_features

    def _format_of(self, template: str) -> Literal["openai", "string"]:
        if self._content_format != "auto":
            return self._content_format
        found = self._formats.get(template)
        if found is None:
            found = self._formats[template] = detect_content_format(template)
        return found

    async def generate(self, request: ChatRequest) -> ChatStream:
        """Render, tokenize and submit `request`; return the stream of its deltas."""
        parsing = self._parsing
        parsing.check_tool_choice(request.tool_choice)
        max_model_len = self.text.info().max_model_len
        # vLLM checks the truncation first (its TokenizeParams), then the forwarded ids
        check_truncation(request.truncate_prompt_tokens, request.truncation_side, max_model_len=max_model_len)
        forwarded = self._forwarded(request)
        mm_features: list[MultiModalFeature] | None = None
        if forwarded.prompt_token_ids is not None:
            rendered = self._forwarded_prompt(request, forwarded.prompt_token_ids)
        else:
            rendered, mm_features = await self._prepare_media(request, self._render_messages(request))
            rendered = self._truncated(request, rendered, mm_features)
        tokenizer = self.text.tokenizer
        kwargs = self.template_kwargs(request)
        params = request.params
        if self.harmony:
            check_harmony_request(request, parsing.tool_parser, params.structured_outputs)
        if parsing.active:
            params = msgspec.structs.replace(
                params,
                structured_outputs=parsing.constraint(
                    request.tools, request.tool_choice, request.parallel_tool_calls, params.structured_outputs
                ),
            )
            if parsing.keeps_special_tokens(request.tools, request.tool_choice):
                params = msgspec.structs.replace(params, skip_special_tokens=False)

        def parser() -> ChatParser | None:
            return parsing.choice_parser(
                tokenizer, request.tools, request.tool_choice, request.include_reasoning, kwargs
            )

        probe = parser()
        text = await self.text.generate(
            TextRequest(
                request_id=request.request_id,
                prompt=rendered.prompt_token_ids,
                params=params,
                lora_request=request.lora_request,
                cache_salt=request.cache_salt,
                priority=request.priority,
                data_parallel_rank=request.data_parallel_rank,
                trace_headers=request.trace_headers,
                kv_transfer_params=forwarded.kv_transfer_params,
                arrival_time=request.arrival_time,
                mm_features=mm_features,
                reasoning_ended=_reasoning_ended(probe, rendered.prompt_token_ids, request.include_reasoning),
                reasoning_parser_kwargs=(
                    {"chat_template_kwargs": kwargs} if parsing.reasoning_parser is not None else None
                ),
                session_id=request.session_id,
                ec_transfer_params=request.ec_transfer_params,
            )
        )
        return ChatStream(
            rendered,
            self._role(request),
            text,
            request=request,
            parser=parser,
            probe=probe,
            multimodal_tokens=_multimodal_tokens(mm_features or ()),
        )

    def _forwarded(self, request: ChatRequest) -> Forwarded:
        """`request`'s kv_transfer_params split; the forwarded ids are ignored where vLLM renders the
        messages anyway: media in them, or the caller's `use_forwarded_prompt` False."""
        use = request.use_forwarded_prompt and not _media_parts(request.messages)
        forwarded = split_forwarded(request.kv_transfer_params, use=use)
        if forwarded.prompt_token_ids is not None:
            tokenizer = self.text.tokenizer
            limit = max(tokenizer.max_token_id, self.text.info().vocab_size - 1)
            check_forwarded_vocab(forwarded.prompt_token_ids, limit)
        return forwarded

    def _forwarded_prompt(self, request: ChatRequest, ids: list[int]) -> RenderedChat:
        """Forwarded ids as the prompt, checked against the context (`check_forwarded_length`)."""
        info = self.text.info()
        check_forwarded_length(
            ids, request.truncate_prompt_tokens, info.max_model_len, multimodal=info.supports_multimodal
        )
        return RenderedChat(prompt=None, prompt_token_ids=ids)

    def _truncated(
        self, request: ChatRequest, rendered: RenderedChat, mm_features: list[MultiModalFeature] | None
    ) -> RenderedChat:
        """The rendered prompt cut to `truncate_prompt_tokens` (vLLM truncates the templated tokens)."""
        ids = truncate_prompt(
            rendered.prompt_token_ids,
            request.truncate_prompt_tokens,
            request.truncation_side,
            max_model_len=self.text.info().max_model_len,
            max_tokens=request.params.max_tokens,
        )
        if len(ids) == len(rendered.prompt_token_ids):
            return rendered
        if mm_features:
            raise InvalidRequest(
                "truncate_prompt_tokens that cuts a prompt with media is not supported by this server",
                param="truncate_prompt_tokens",
            )
        return RenderedChat(prompt=rendered.prompt, prompt_token_ids=ids)

    async def complete(self, request: ChatRequest) -> ChatResult:
        """Generate and collect the whole result."""
        return await (await self.generate(request)).collect()

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort chat requests by id."""
        await self.text.abort(request_ids)

    def _role(self, request: ChatRequest) -> str:
        # vLLM: the response role when a generation prompt is added, else the last message's role.
        if request.add_generation_prompt or not request.messages:
            return self._response_role
        return request.messages[-1].role


def _multimodal_tokens(features: Sequence[MultiModalFeature]) -> dict[str, int]:
    """Placeholder tokens by modality, as vLLM's _count_mm_tokens sums its mm_placeholders."""
    counts: dict[str, int] = {}
    for feature in features:
        counts[feature.modality] = counts.get(feature.modality, 0) + feature.length
    return counts


def _joined(deltas: list[MessageDelta | None]) -> MessageDelta | None:
    """Parsed steps as one delta: content and reasoning joined, one tool-call piece per call index."""
    parts = [d for d in deltas if d is not None]
    if len(parts) <= 1:
        return parts[0] if parts else None
    calls: dict[int, ToolCallDelta] = {}  # fresh pieces: a parser may keep the ones it returned
    for piece in (c for d in parts for c in d.tool_calls):
        into = calls.setdefault(piece.index, ToolCallDelta(index=piece.index))
        into.id = into.id if into.id is not None else piece.id
        into.name = into.name if into.name is not None else piece.name
        if piece.arguments is not None:
            into.arguments = (into.arguments or "") + piece.arguments
    return MessageDelta(
        content=_joined_text([d.content for d in parts]),
        reasoning=_joined_text([d.reasoning for d in parts]),
        tool_calls=list(calls.values()),
    )


def _joined_text(texts: list[str | None]) -> str | None:
    """The pieces joined; None when every piece is None."""
    given = [t for t in texts if t is not None]
    return "".join(given) if given else None


def _reasoning_ended(
    parser: ChatParser | None, prompt_token_ids: Sequence[int], include_reasoning: bool
) -> bool | None:
    """vLLM's resolve_reasoning_ended: True constrains from the first token; None lets the engine decide."""
    if not include_reasoning:
        return True
    if parser is not None and parser.reasoning is not None:
        return parser.reasoning.is_reasoning_end(prompt_token_ids)
    return None


def _with_defaults(defaults: Mapping[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """`given` over `defaults`, as vLLM's merge_kwargs: a given None or "auto" is no value."""
    return {**defaults, **{k: v for k, v in given.items() if v not in _UNSET_KWARGS}}


def _kwargs_template(kwargs: Mapping[str, Any]) -> str | None:
    """A template in chat_template_kwargs: vLLM hands `chat_template` of the kwargs to the tokenizer when
    neither the request nor the server gives one (a server refuses it unless it trusts requests'
    templates)."""
    template = kwargs.get("chat_template")
    return template if isinstance(template, str) else None


def _no_placeholder(modality: str) -> str:
    raise AssertionError("media reached rendering for a model without media")


def _string_content(placeholders: list[str], texts: list[str]) -> str:
    """vLLM's _get_full_multimodal_text_prompt: the texts, one per line, after the placeholders the
    text does not already hold (one per line)."""
    text = "\n".join(texts)
    missing: list[str] = []
    for placeholder in dict.fromkeys(placeholders):
        missing += [placeholder] * max(0, placeholders.count(placeholder) - text.count(placeholder))
    return "\n".join([*missing, text]) if text else "\n".join(missing)


def _media_parts(messages: Sequence[ChatMessage]) -> list[MediaPart]:
    """The media parts of all messages, in prompt order."""
    return [
        part
        for message in messages
        if isinstance(message.content, list)
        for part in message.content
        if not isinstance(part, TextPart)
    ]


def _message_dict(
    message: ChatMessage,
    content_format: Literal["openai", "string"],
    placeholder: Callable[[str], str] = _no_placeholder,
) -> dict[str, Any]:
    """The message as vLLM's parse_chat_messages hands it to the template: media parts become
    ``{"type": modality}`` parts, or (string content) their placeholders before the text, one per line."""
    content = message.content
    items = [content] if isinstance(content, str) else list(content or [])
    parts = [p if isinstance(p, str) else p.text for p in items if isinstance(p, str | TextPart)]
    modalities = [_MODALITY_OF[type(p)] for p in items if not isinstance(p, str | TextPart)]
    data: dict[str, Any] = {"role": message.role}
    if content_format == "openai":
        data["content"] = [
            {"type": "text", "text": p if isinstance(p, str) else p.text}
            if isinstance(p, str | TextPart)
            else {"type": _MODALITY_OF[type(p)]}
            for p in items
        ]
    else:
        data["content"] = _string_content([placeholder(m) for m in modalities], parts)
    if message.role == "assistant":
        if message.tool_calls:  # vLLM's _postprocess_messages drops an empty list
            data["tool_calls"] = [_call_dict(c) for c in message.tool_calls]
        reasoning = message.reasoning if message.reasoning is not None else message.reasoning_content
        if reasoning is not None:
            data["reasoning"] = data["reasoning_content"] = reasoning
    elif message.role == "tool":
        if message.tool_call_id is not None:
            data["tool_call_id"] = message.tool_call_id
        if isinstance(data["content"], list):
            data["content"] = "\n".join(parts)
    if message.name is not None:
        data["name"] = message.name
    return data


def _call_dict(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {} if call.id is None else {"id": call.id}
    out["type"] = "function"
    out["function"] = {"name": call.function.name, "arguments": _arguments(call.function.arguments)}
    return out


def _arguments(arguments: object) -> dict[str, Any]:
    """A tool call's arguments as an object, as vLLM's `_postprocess_messages` (invalid JSON: {})."""
    if not arguments:
        return {}
    parsed: object = arguments
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            parsed = None
    return parsed if isinstance(parsed, dict) else {}


def _media_options(options: MediaOptions, io_kwargs: dict[str, dict[str, Any]] | None) -> MediaOptions:
    """The server's media options with the request's image options over them (vLLM's merge_kwargs;
    other keys go to custom media loaders in vLLM, which this server has none of)."""
    image = (io_kwargs or {}).get("image") or {}
    changes: dict[str, Any] = {}
    if "image_mode" in image:
        changes["image_mode"] = image["image_mode"]
    if "rgba_background_color" in image:
        colour = image["rgba_background_color"]
        changes["rgba_background_color"] = tuple(colour) if isinstance(colour, list) else colour
    if not changes:
        return options
    try:
        return dataclasses.replace(options, **changes)
    except ValueError as exc:
        raise InvalidRequest(str(exc), param="media_io_kwargs") from exc


def _media_processor(info: LlmInfo, options: MultiModalOptions | None) -> MultiModalProcessor | None:
    """The caller-side multimodal processor of a model that takes media (needs vllm-llm[multimodal])."""
    if not info.supports_multimodal:
        return None
    try:
        from vllm_llm.multimodal import MultiModalOptions, load_processor
    except ImportError as exc:
        raise ImportError(
            f"the model {info.model!r} takes multimodal inputs, which are prepared here: install "
            f"vllm-llm[multimodal] ({exc})"
        ) from exc
    return load_processor(info, options or MultiModalOptions())
