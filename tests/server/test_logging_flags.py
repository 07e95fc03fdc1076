"""vLLM's output-log, error-stack and tokenizer-info flags on a `vllm-frontend serve --mock` process.

The expected log lines are vLLM's own: its `RequestLogger.log_outputs`
(vllm/entrypoints/serve/utils/request_logger.py) is run here on the values each response carries, and
its messages must be the ones the process wrote, level for level. The /tokenizer_info body is compared
with vLLM's `TokenizerInfo` over the tokenizer vLLM's server would load.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend, free_port, frontend_argv, until

#: The mock: no engine, the tiny model's tokenizer, no gRPC.
MOCK = ("--mock", "--grpc-port", "-1", "--served-model-name", "tiny")
#: The request and output log at DEBUG, texts and ids cut at 5.
LOGGED = ("--enable-log-requests", "--enable-log-outputs", "--max-log-len", "5", "--log-level", "debug")
MESSAGES: Any = [{"role": "user", "content": "hi"}]
#: A process log line: `<date> <time> LEVEL logger: message`.
_LINE = re.compile(r"^\S+ \S+ (?P<level>[A-Z]+) vllm_server\.request_log: (?P<message>.*)$")

#: One call of vLLM's `RequestLogger.log_outputs`: its keyword arguments.
Call = dict[str, Any]


#: The OpenAI client of each served process (closed with it).
_CLIENTS: dict[int, openai.AsyncOpenAI] = {}


@asynccontextmanager
async def _served(*args: str) -> AsyncIterator[Frontend]:
    front = await Frontend.start(*MOCK, *args)
    try:
        yield front
    finally:
        client = _CLIENTS.pop(id(front), None)
        if client is not None:
            await client.close()
        await front.stop(10)


def _openai(front: Frontend) -> openai.AsyncOpenAI:
    client = _CLIENTS.get(id(front))
    if client is None:
        client = _CLIENTS[id(front)] = openai.AsyncOpenAI(
            base_url=f"{front.base_url}/v1", api_key="none", timeout=PATIENCE
        )
    return client


def vllm_output_lines(calls: Sequence[Call], *, max_log_len: int | None) -> list[tuple[str, str]]:
    """(level, message) of each line vLLM's own RequestLogger writes for `calls`, at DEBUG."""
    from vllm.entrypoints.serve.utils.request_logger import RequestLogger, logger

    lines: list[tuple[str, str]] = []

    class Capture(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append((record.levelname, record.getMessage()))

    handler, level = Capture(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        request_logger = RequestLogger(max_log_len=max_log_len)
        del lines[:]  # its start-up notice, if any
        for call in calls:
            request_logger.log_outputs(**call)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    return lines


def output_lines(front: Frontend, request_id: str) -> list[tuple[str, str]]:
    """(level, message) of the process's output-log lines about `request_id`, in order."""
    found = []
    for line in front.log:
        match = _LINE.match(line)
        if match and match["message"].startswith(f"Generated response {request_id}"):
            found.append((match["level"], match["message"]))
    return found


async def logged(front: Frontend, request_id: str, count: int) -> list[tuple[str, str]]:
    """The output-log lines of `request_id`, once there are `count` of them."""

    async def arrived() -> bool:
        return len(output_lines(front, request_id)) >= count

    await until(arrived, within=PATIENCE, what=f"{count} output-log lines of {request_id}")
    return output_lines(front, request_id)


# ---- --enable-log-outputs / --enable-log-deltas ---------------------------------------------------------


async def test_a_whole_chat_completion_logs_its_output_as_vllm() -> None:
    async with _served(*LOGGED) as front:
        done = await _openai(front).chat.completions.create(
            model="tiny", messages=MESSAGES, max_tokens=8, extra_body={"return_token_ids": True}
        )
        choice = done.choices[0]
        token_ids = choice.token_ids  # type: ignore[attr-defined]
        assert choice.message.content and len(choice.message.content) > 5 and len(token_ids) > 5  # cut
        call: Call = {
            "request_id": done.id,
            "outputs": choice.message.content,
            "output_token_ids": token_ids,
            "finish_reason": choice.finish_reason,
        }
        expected = vllm_output_lines([call], max_log_len=5)
        assert await logged(front, done.id, len(expected)) == expected


async def _streamed_deltas(front: Frontend) -> tuple[str, list[Call]]:
    """A streamed chat completion: its id, and vLLM's log calls for each delta with content."""
    stream = await _openai(front).chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        max_tokens=6,
        stream=True,
        extra_body={"return_token_ids": True},
    )
    request_id = ""
    calls: list[Call] = []
    whole = ""
    async for chunk in stream:
        request_id = chunk.id
        for choice in chunk.choices:
            content = choice.delta.content
            if content:  # the role chunk's "" is no delta of output
                whole += content
                delta: Call = {
                    "request_id": chunk.id,
                    "outputs": content,
                    "output_token_ids": getattr(choice, "token_ids", None),  # vLLM's field
                    "finish_reason": choice.finish_reason,
                    "is_streaming": True,
                    "delta": True,
                }
                calls.append(delta)
    complete: Call = {
        "request_id": request_id,
        "outputs": whole,
        "output_token_ids": None,
        "finish_reason": "streaming_complete",
        "is_streaming": True,
        "delta": False,
    }
    return request_id, [*calls, complete]


async def test_a_streamed_chat_completion_logs_each_delta_then_the_whole_text_as_vllm() -> None:
    async with _served(*LOGGED) as front:
        request_id, calls = await _streamed_deltas(front)
        assert len(calls) > 2
        expected = vllm_output_lines(calls, max_log_len=5)
        assert any("(streaming delta)" in m for _, m in expected)
        assert "(streaming complete)" in expected[-1][1]
        assert await logged(front, request_id, len(expected)) == expected


async def test_no_enable_log_deltas_logs_only_the_whole_streamed_text() -> None:
    async with _served(*LOGGED, "--no-enable-log-deltas") as front:
        request_id, calls = await _streamed_deltas(front)
        expected = vllm_output_lines(calls[-1:], max_log_len=5)
        got = await logged(front, request_id, len(expected))
        await asyncio.sleep(0.2)  # a delta line would have come before the whole text's
        assert got == expected == output_lines(front, request_id)


async def test_tokens_out_logs_the_token_ids_as_vllm() -> None:
    async with (
        _served(*LOGGED) as front,
        httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as http,
    ):
        body = {"model": "tiny", "token_ids": [1, 2, 3], "sampling_params": {"max_tokens": 7}}
        done = (await http.post("/inference/v1/generate", json=body)).json()
        choice = done["choices"][0]
        call: Call = {
            "request_id": done["request_id"],
            "outputs": "",
            "output_token_ids": choice["token_ids"],
            "finish_reason": choice["finish_reason"],
        }
        expected = vllm_output_lines([call], max_log_len=5)
        assert await logged(front, done["request_id"], len(expected)) == expected


async def test_outputs_are_not_logged_by_default_nor_at_info_their_ids() -> None:
    async with _served("--enable-log-requests") as front:
        done = await _openai(front).chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=3)
        await front.stop(10)
        assert any(f"Received request {done.id}" in line for line in front.log), front.log_tail()
        assert output_lines(front, done.id) == []
    async with _served("--enable-log-requests", "--enable-log-outputs") as front:
        done = await _openai(front).chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=3)
        call: Call = {
            "request_id": done.id,
            "outputs": done.choices[0].message.content,
            "output_token_ids": [],
            "finish_reason": done.choices[0].finish_reason,
        }
        info = [line for line in vllm_output_lines([call], max_log_len=None) if line[0] == "INFO"]
        assert await logged(front, done.id, 1) == info  # the whole text, uncut; no DEBUG ids at INFO


async def test_a_response_and_a_message_log_their_outputs_as_vllm() -> None:
    async with _served("--enable-log-requests", "--enable-log-outputs", "--max-log-len", "5") as front:
        async with httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as c:
            body = {"model": "tiny", "input": "hi", "max_output_tokens": 8}
            response = (await c.post("/v1/responses", json=body)).json()
            body = {"model": "tiny", "messages": MESSAGES, "max_tokens": 8}
            message = (await c.post("/v1/messages", json=body)).json()
        calls: list[Call] = [
            {  # vLLM's Responses: the final text and finish reason
                "request_id": response["id"],
                "outputs": response["output"][-1]["content"][0]["text"],
                "output_token_ids": None,
                "finish_reason": "length",
            },
            {  # vLLM's messages: the chat completion's log, under the message's id
                "request_id": message["id"],
                "outputs": message["content"][0]["text"],
                "output_token_ids": None,
                "finish_reason": "length",
            },
        ]
        for call in calls:
            expected = [line for line in vllm_output_lines([call], max_log_len=5) if line[0] == "INFO"]
            assert await logged(front, call["request_id"], 1) == expected


async def test_log_outputs_without_log_requests_is_refused_as_vllm() -> None:
    proc = await asyncio.create_subprocess_exec(
        *frontend_argv("serve", *MOCK, "--port", str(free_port()), "--enable-log-outputs"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, process_group=0,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), PATIENCE)
    text = out.decode()
    assert proc.returncode == 1, text[-2000:]
    assert "Error: --enable-log-outputs requires --enable-log-requests" in text  # vLLM's TypeError text


# ---- --log-error-stack -------------------------------------------------------------------------------


def _stack_lines(front: Frontend) -> list[str]:
    return [line for line in front.log if "caught. Request id:" in line]


async def test_log_error_stack_logs_an_invalid_bodys_stack_as_vllm() -> None:
    bad = {"model": "tiny", "messages": MESSAGES, "max_tokens": "many"}
    async with _served("--log-error-stack") as front, httpx.AsyncClient(base_url=front.base_url) as c:
        got = await c.post("/v1/chat/completions", json=bad, timeout=PATIENCE)
        assert got.status_code == 400
        await c.get("/no/such/route", timeout=PATIENCE)  # Starlette's 404: FastAPI's handler, no line
        await front.stop(10)
    lines = _stack_lines(front)
    assert len(lines) == 1 and " ERROR " in lines[0], front.log_tail()
    assert lines[0].endswith("RequestValidationError caught. Request id: None")  # vLLM's words
    log = list(front.log)
    after = log[log.index(lines[0]) + 1 :]
    assert after and after[0].startswith("Traceback (most recent call last):"), front.log_tail()


async def test_error_stacks_are_not_logged_by_default() -> None:
    bad = {"model": "tiny", "messages": MESSAGES, "max_tokens": "many"}
    async with _served() as front, httpx.AsyncClient(base_url=front.base_url) as c:
        assert (await c.post("/v1/chat/completions", json=bad, timeout=PATIENCE)).status_code == 400
        await front.stop(10)
    assert _stack_lines(front) == [], front.log_tail()


# ---- --enable-tokenizer-info-endpoint ------------------------------------------------------------------


def vllm_tokenizer_info(model_dir: Path, chat_template: str | None) -> dict[str, Any]:
    """vLLM's own /tokenizer_info body for `model_dir`'s tokenizer: loaded as vLLM's server loads it (its
    `get_tokenizer`, then its renderer's thread pool), reported by its `TokenizerInfo`."""
    import copy

    from vllm.entrypoints.serve.tokenize.serving import TokenizerInfo
    from vllm.tokenizers import get_tokenizer
    from vllm.tokenizers.hf import maybe_make_thread_pool

    tokenizer = copy.copy(get_tokenizer(str(model_dir), runner_type="generate", tokenizer_mode="auto"))
    maybe_make_thread_pool(tokenizer, 2)  # the renderer's: renderer_num_workers (1) + 1 copies
    info: dict[str, Any] = json.loads(json.dumps(TokenizerInfo(tokenizer, chat_template).to_dict()))
    return info  # as its JSONResponse sends it: the added tokens' ids as strings


async def test_tokenizer_info_is_vllms_body(tiny_model_dir: Path, tmp_path: Path) -> None:
    template = tmp_path / "template.jinja"
    template.write_text("{% for m in messages %}{{ m.content }}{% endfor %}")
    for extra in ((), ("--chat-template", str(template))):
        expected = vllm_tokenizer_info(tiny_model_dir, template.read_text() if extra else None)
        args = ("--enable-tokenizer-info-endpoint", "--tokenizer", str(tiny_model_dir), *extra)
        async with _served(*args) as front, httpx.AsyncClient(base_url=front.base_url) as c:
            got = await c.get("/tokenizer_info", timeout=PATIENCE)
            assert got.status_code == 200, got.text
            assert got.json() == expected
            assert got.json()["tokenizer_class"] == "TokenizerPoolCachedTokenizersBackend"


async def test_no_tokenizer_info_route_without_the_flag() -> None:
    async with _served() as front, httpx.AsyncClient(base_url=front.base_url) as c:
        got = await c.get("/tokenizer_info", timeout=PATIENCE)
    assert got.status_code == 404
    assert got.json()["error"]["code"] == 404
