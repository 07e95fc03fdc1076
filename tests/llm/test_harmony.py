"""Harmony (gpt-oss) in the chat layer, with vLLM 0.32's own Harmony rendering and HarmonyParser as the
oracle: a MockLlm whose LlmInfo says model_type gpt_oss, over a tokenizer with Harmony's vocabulary,
replays Harmony-encoded outputs."""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio
from openai_harmony import HarmonyEncodingName, load_harmony_encoding  # type: ignore[import-untyped]

from tests.support.harmony_model import CALL, ENDOFTEXT, RETURN, build_harmony_model
from vllm_llm import EngineCoreLlm, InvalidRequest, MockLlm, ParserOptions
from vllm_llm.chat import ChatLlm, ChatMessage, ChatRequest
from vllm_llm.text import TextLlm, TextSamplingParams, TextTokenizer
from vllm_llm.wire import WIRE_REVISION, LlmInfo, ModelDtype

ENCODING = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "The weather in a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}},
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}},
    },
]
CONVERSATIONS: dict[str, dict[str, Any]] = {
    "user": {"messages": [{"role": "user", "content": "hi"}]},
    "system_and_effort": {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}],
        "reasoning_effort": "high",
    },
    "tool_round_trip": {
        "tools": TOOLS,
        "reasoning_effort": "low",
        "messages": [
            {
                "role": "developer",
                "content": [{"type": "text", "text": "Use "}, {"type": "text", "text": "tools."}],
            },
            {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
            {
                "role": "assistant",
                "content": "Checking.",
                "reasoning": "I need the tool.",
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        ],
    },
    "multi_turn_drops_old_analysis": {
        "messages": [
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b", "reasoning": "r1"},
            {"role": "user", "content": "c"},
            {"role": "assistant", "content": "d", "reasoning": "r2"},
            {"role": "user", "content": "e"},
            {"role": "system", "content": "late system"},
        ],
    },
}
OUTPUTS: dict[str, str] = {
    "reasoning_then_final": "<|channel|>analysis<|message|>The user greets me.<|end|>"
    "<|start|>assistant<|channel|>final<|message|>Hello there!",
    "tool_call": "<|channel|>analysis<|message|>Need the weather.<|end|><|start|>assistant"
    '<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{"city":  "Paris"}<|call|>',
    "preamble_and_legacy_header_call": "<|channel|>commentary<|message|>Let me check.<|end|>"
    "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>{}<|call|>",
    "bare_recipient_non_json": "<|channel|>commentary to=get_weather <|constrain|>text"
    "<|message|>Paris<|call|>",
    "final_only": "<|channel|>final<|message|>Just content, no reasoning.",
    "cut_in_a_header": "<|channel|>analysis<|message|>Thinking.<|end|><|start|>assistant<|channel|>fin",
    "builtin_recipient_ignored": "<|channel|>analysis to=python code<|message|>print(1)<|call|>",
}


def _ids(text: str) -> list[int]:
    ids: list[int] = ENCODING.encode(text, allowed_special="all")
    return ids


@pytest.fixture(scope="module")
def harmony_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_harmony_model(tmp_path_factory.mktemp("harmony"))


@pytest.fixture(autouse=True)
def _pinned_date(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_SYSTEM_START_DATE", "2025-06-01")  # read by vLLM's renderer and ours


@functools.cache
def harmony_tokenizer(model_dir: Path) -> TextTokenizer:
    return TextTokenizer.from_dir(model_dir)  # 200k tokens: loaded once


def harmony_info(model_dir: Path) -> LlmInfo:
    tokenizer = harmony_tokenizer(model_dir)
    return LlmInfo(
        model=str(model_dir),
        served_model_name="gpt-oss-tiny",
        tokenizer=str(model_dir),
        dtype=ModelDtype.BFLOAT16,
        max_model_len=4096,
        vocab_size=tokenizer.vocab_size,
        eos_token_id=RETURN,
        eos_token_ids=[ENDOFTEXT, CALL],
        wire_revision=WIRE_REVISION,
        model_type="gpt_oss",
    )


@pytest_asyncio.fixture
async def mock(harmony_dir: Path) -> AsyncIterator[MockLlm]:
    llm = MockLlm(info=harmony_info(harmony_dir), step_interval=0.0)
    yield llm
    await llm.shutdown()


def _chat(mock: MockLlm, *, tools: bool = True) -> ChatLlm:
    parsers = ParserOptions(enable_auto_tool_choice=True, tool_call_parser="openai") if tools else None
    return ChatLlm(_text(mock), parsers=parsers)


def _text(mock: MockLlm) -> TextLlm:
    return TextLlm(mock, tokenizer=harmony_tokenizer(Path(mock.info().tokenizer)))


def _request(body: dict[str, Any], **extra: Any) -> ChatRequest:
    return ChatRequest(
        request_id="r",
        messages=msgspec.convert(body["messages"], list[ChatMessage]),
        tools=body.get("tools"),
        reasoning_effort=body.get("reasoning_effort"),
        params=TextSamplingParams(max_tokens=extra.pop("max_tokens", 200), temperature=0.0),
        **({"tool_choice": "auto" if body.get("tools") else "none"} | extra),
    )


# ---- the oracle ----------------------------------------------------------------------------------------


def vllm_render(body: dict[str, Any]) -> list[int]:
    """vLLM's OnlineRenderer._make_request_with_harmony on the same request."""
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
    from vllm.renderers.online_renderer import OnlineRenderer

    request: Any = ChatCompletionRequest.model_validate({"model": "m", **body})
    renderer: Any = OnlineRenderer.__new__(OnlineRenderer)  # the method reads only these attributes
    renderer.renderer = None
    renderer.supports_browsing = renderer.supports_code_interpreter = False
    _, (engine_input,) = renderer._make_request_with_harmony(request, request.tools is not None)
    ids: list[int] = engine_input["prompt_token_ids"]
    return ids


@functools.cache
def _hf_tokenizer(model_dir: Path) -> Any:
    from transformers import PreTrainedTokenizerFast

    fast: Any = PreTrainedTokenizerFast
    return fast(tokenizer_file=str(model_dir / "tokenizer.json"))


class VllmHarmony:
    """vLLM's HarmonyParser as its chat serving composes it for gpt-oss (openai_gptoss + openai)."""

    def __init__(self, model_dir: Path, *, tools: bool, include_reasoning: bool = True) -> None:
        from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
        from vllm.parser.parser_manager import ParserManager

        cls = ParserManager.get_parser(
            tool_parser_name="openai" if tools else None,
            reasoning_parser_name="openai_gptoss",
            enable_auto_tools=tools,
            is_harmony=True,
        )
        assert cls is not None
        self.tokenizer = _hf_tokenizer(model_dir)
        self.cls: Any = cls
        self.request: Any = ChatCompletionRequest.model_validate(
            {
                "model": "m",
                "messages": [{"role": "user", "content": "x"}],
                "tools": TOOLS,
                "include_reasoning": include_reasoning,
            }
        )

    def whole(self, token_ids: list[int]) -> tuple[Any, ...]:
        parser = self.cls(self.tokenizer, self.request.tools)
        reasoning, content, calls = parser.parse(
            self.tokenizer.decode(token_ids),
            self.request,
            enable_auto_tools=True,
            model_output_token_ids=token_ids,
        )
        if not self.request.include_reasoning:
            reasoning = None
        return (
            reasoning,
            content,
            [(c.name, c.arguments) for c in calls or []],
            parser.count_reasoning_tokens(token_ids),
        )

    def streamed(self, chunks: list[tuple[list[int], bool]]) -> list[tuple[Any, ...] | None]:
        parser = self.cls(self.tokenizer, self.request.tools)
        out = []
        for ids, finished in chunks:
            delta = parser.parse_delta(
                self.tokenizer.decode(ids), ids, self.request, prompt_token_ids=[], finished=finished
            )
            out.append(_vllm_delta(delta))
        return out


def _vllm_delta(delta: Any) -> tuple[Any, ...] | None:
    if delta is None:
        return None
    calls = [
        (
            c.index,
            c.id is not None,
            c.function.name if c.function else None,
            c.function.arguments if c.function else None,
        )
        for c in delta.tool_calls or []
    ]
    return delta.content, delta.reasoning, calls


# ---- rendering -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CONVERSATIONS))
def test_rendering_equals_vllms_harmony_rendering(name: str, mock: MockLlm) -> None:
    body = CONVERSATIONS[name]
    rendered = _chat(mock).render(_request(body))
    assert rendered.prompt_token_ids == vllm_render(body)
    assert rendered.prompt == ENCODING.decode(rendered.prompt_token_ids)


def test_the_system_message_carries_effort_date_and_the_developer_message_the_tools(mock: MockLlm) -> None:
    prompt = _chat(mock).render(_request(CONVERSATIONS["tool_round_trip"])).prompt or ""
    assert "Reasoning: low" in prompt and "Current date: 2025-06-01" in prompt
    assert "<|start|>developer<|message|># Instructions\n\nUse tools." in prompt
    assert "type get_weather = (_: {\ncity: string,\n}) => any;" in prompt
    # a prior call in gpt-oss's legacy header shape, its result from the function
    assert "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>" in prompt
    assert "<|start|>functions.get_weather<|channel|>commentary to=assistant<|message|>sunny<|end|>" in prompt


def test_a_non_gpt_oss_model_keeps_its_chat_template(tiny_model_dir: Path) -> None:
    from tests.support.mock import tiny_mock

    chat = ChatLlm(TextLlm(tiny_mock(tiny_model_dir)))
    assert not chat.harmony
    assert "<|start|>" not in (chat.render(_request(CONVERSATIONS["user"])).prompt or "")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "none"}, "reasoning_effort"),
        ({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "minimal"}, "reasoning_effort"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "messages"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "retrieval"}]}, "tools"),
    ],
)
def test_bad_input_is_an_invalid_request(body: dict[str, Any], param: str, mock: MockLlm) -> None:
    with pytest.raises(InvalidRequest) as caught:
        _chat(mock).render(_request(body))
    assert caught.value.param == param


# ---- parsing -------------------------------------------------------------------------------------------


async def _whole(chat: ChatLlm, mock: MockLlm, output: str, **extra: Any) -> tuple[Any, ...]:
    mock.script = _ids(output)
    result = await chat.complete(_request(CONVERSATIONS["tool_round_trip"], **extra))
    choice = result.choices[0]
    calls = [(c.function.name, c.function.arguments) for c in choice.tool_calls]
    assert all(c.id and c.id.startswith("chatcmpl-tool-") for c in choice.tool_calls)
    return (
        choice.reasoning,
        choice.content,
        calls,
        choice.reasoning_tokens,
        choice.token_ids,
        choice.finish_reason,
    )


@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("tools", [True, False], ids=["openai_tools", "no_tool_parser"])
async def test_whole_output_parses_as_vllm_parses_it(
    output: str, tools: bool, mock: MockLlm, harmony_dir: Path
) -> None:
    reasoning, content, calls, reasoning_tokens, token_ids, finish = await _whole(
        _chat(mock, tools=tools), mock, OUTPUTS[output]
    )
    theirs = VllmHarmony(harmony_dir, tools=tools).whole(token_ids)
    assert (reasoning, content, calls, reasoning_tokens) == theirs
    assert finish == ("tool_calls" if calls else "stop")  # vLLM: auto tools called


async def test_the_tool_call_is_read_from_the_commentary_channel(mock: MockLlm) -> None:
    reasoning, content, calls, _, token_ids, finish = await _whole(_chat(mock), mock, OUTPUTS["tool_call"])
    assert (reasoning, content, calls, finish) == (
        "Need the weather.",
        None,
        [("get_weather", json.dumps({"city": "Paris"}))],
        "tool_calls",
    )
    assert token_ids[-1] == CALL  # <|call|> ended it: an eos id of gpt-oss's generation config


async def test_include_reasoning_false_hides_the_analysis(mock: MockLlm, harmony_dir: Path) -> None:
    reasoning, content, *_ = await _whole(
        _chat(mock), mock, OUTPUTS["reasoning_then_final"], include_reasoning=False
    )
    assert (reasoning, content) == (None, "Hello there!")


def _chunks(token_ids: list[int], every: int) -> Iterator[tuple[list[int], bool]]:
    for start in range(0, len(token_ids), every):
        yield token_ids[start : start + every], start + every >= len(token_ids)


@pytest.mark.parametrize("output", list(OUTPUTS))
@pytest.mark.parametrize("include_reasoning", [True, False])
async def test_streamed_output_parses_as_vllm_parses_it(
    output: str, include_reasoning: bool, mock: MockLlm, harmony_dir: Path
) -> None:
    mock.script = _ids(OUTPUTS[output])
    stream = await _chat(mock).generate(_request(CONVERSATIONS["user"], include_reasoning=include_reasoning))
    ours: list[tuple[Any, ...] | None] = []
    chunks: list[tuple[list[int], bool]] = []
    async for delta in stream:
        chunks.append((delta.token_ids, delta.finish_reason is not None))
        parsed = (
            delta.content,
            delta.reasoning,
            [(c.index, c.id is not None, c.name, c.arguments) for c in delta.tool_calls],
        )
        ours.append(None if parsed == (None, None, []) else parsed)
    assert len(chunks) > 3  # one token per delta
    theirs = VllmHarmony(harmony_dir, tools=True, include_reasoning=include_reasoning).streamed(chunks)
    assert ours == theirs


async def test_streamed_tool_call_deltas_assemble_to_the_call(mock: MockLlm) -> None:
    mock.script = _ids(OUTPUTS["tool_call"])
    stream = await _chat(mock).generate(_request(CONVERSATIONS["tool_round_trip"]))
    reasoning, arguments, names, finish = "", "", [], None
    async for delta in stream:
        reasoning += delta.reasoning or ""
        for call in delta.tool_calls:
            names += [call.name] if call.name else []
            arguments += call.arguments or ""
        finish = delta.finish_reason or finish
    assert (reasoning, names, json.loads(arguments), finish) == (
        "Need the weather.",
        ["get_weather"],
        {"city": "Paris"},
        "tool_calls",
    )


# ---- selection and refusals ----------------------------------------------------------------------------


async def test_reasoning_is_on_by_default_and_the_wire_gets_vllms_reasoning_fields(mock: MockLlm) -> None:
    mock.script = _ids(OUTPUTS["reasoning_then_final"])
    chat = _chat(mock, tools=False)
    result = await chat.complete(_request(CONVERSATIONS["user"]))
    assert result.choices[0].reasoning == "The user greets me."
    sent = mock.requests[-1]
    assert sent.reasoning_ended is True  # vLLM: openai_gptoss ends reasoning at the prompt
    assert sent.sampling_params.structured_outputs is None


def test_another_formats_parser_is_refused_at_start(mock: MockLlm) -> None:
    with pytest.raises(ValueError, match="Harmony requires GptOssToolParser, got HermesToolParser"):
        ChatLlm(_text(mock), parsers=ParserOptions(enable_auto_tool_choice=True, tool_call_parser="hermes"))
    with pytest.raises(ValueError, match="Harmony requires GptOssReasoningParser"):
        ChatLlm(_text(mock), parsers=ParserOptions(reasoning_parser="deepseek_r1"))


def test_the_harmony_parsers_are_refused_for_another_model(tiny_model_dir: Path) -> None:
    from tests.support.mock import tiny_mock

    with pytest.raises(ValueError, match="--reasoning-parser openai_gptoss"):
        ChatLlm(TextLlm(tiny_mock(tiny_model_dir)), parsers=ParserOptions(reasoning_parser="openai_gptoss"))


@pytest.mark.parametrize(
    "extra",
    [
        {"tool_choice": "required"},
        {"parallel_tool_calls": False},
    ],
)
async def test_constraints_vllm_builds_as_harmony_tags_are_refused(
    extra: dict[str, Any], mock: MockLlm
) -> None:
    with pytest.raises(InvalidRequest):
        await _chat(mock).generate(_request(CONVERSATIONS["tool_round_trip"], **extra))


async def test_an_engine_reports_its_models_type(engine_llm: EngineCoreLlm) -> None:
    """The worker's LlmInfo carries the HF config's model_type (a router adopts it and selects the format)."""
    assert engine_llm.info().model_type == "llama"
    assert not ChatLlm(TextLlm(engine_llm)).harmony
