"""Image chat end to end on the tiny LLaVA, with vLLM's own server as the oracle.

The same greedy image chat gives the same output from vLLM's server, from our worker (media prepared in
the worker's chat layer) and through our router (media prepared in the router, features over gRPC); a
repeated image hits the worker's multimodal cache as it hits vLLM's; bad media get a 400 with a clear
message and leave nothing in flight.
"""

from __future__ import annotations

import asyncio
import base64
import http.server
import io
import json
import logging
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import pytest_asyncio
from openai import AsyncOpenAI, BadRequestError
from PIL import Image

from tests.multimodal.conftest import LIMIT
from tests.support.servers import RunningServer, start_server
from tests.support.stat_log import ServerLines, next_record, stat_lines, template
from vllm_frontend_testing.processes import ServerProcess

pytestmark = pytest.mark.asyncio(loop_scope="session")


def png(seed: int, size: tuple[int, int] = (40, 50)) -> bytes:
    """A deterministic random RGB image as PNG bytes."""
    pixels = np.random.default_rng(seed).integers(0, 255, (*size, 3), dtype=np.uint8)
    out = io.BytesIO()
    Image.fromarray(pixels).save(out, "PNG")
    return out.getvalue()


def data_url(data: bytes, mime: str = "image/png") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def image_message(*urls: str, text: str = "What is in the picture?") -> list[Any]:
    parts: list[dict[str, Any]] = [{"type": "image_url", "image_url": {"url": u}} for u in urls]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": text}]}]


def client(base_url: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=f"{base_url}/v1", api_key="unused", max_retries=0, timeout=300)


async def chat(base_url: str, messages: list[Any], **extra: Any) -> tuple[str | None, list[int], Any]:
    """Content, sampled token ids (from logprobs' token strings' bytes) and usage of a greedy chat."""
    async with client(base_url) as c:
        response = await c.chat.completions.create(
            model="llava", messages=messages, temperature=0.0, max_tokens=12, logprobs=True, **extra
        )
    choice = response.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    tokens = [entry.token for entry in choice.logprobs.content]
    return choice.message.content, tokens, response.usage


class Media(http.server.ThreadingHTTPServer):
    """A local media host: /ok.png serves an image, /hang never answers until released."""

    def __init__(self, image: bytes) -> None:
        self.image = image
        self.release = threading.Event()
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(http.server.BaseHTTPRequestHandler):
    server: Media

    def do_GET(self) -> None:
        if self.path == "/hang":
            self.server.release.wait()
            return
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(self.server.image)))
        self.end_headers()
        self.wfile.write(self.server.image)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def media_host() -> Iterator[Media]:
    server = Media(png(7))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()
    thread.join()


async def test_the_same_image_chat_as_vllm_from_the_worker_and_through_the_router(
    llava_vllm: ServerProcess, llava_worker: RunningServer, llava_router: RunningServer
) -> None:
    for messages in (image_message(data_url(png(1))), image_message(data_url(png(2)), data_url(png(3)))):
        theirs = await chat(llava_vllm.base_url, messages)
        ours = await chat(llava_worker.base_url, messages)
        routed = await chat(llava_router.base_url, messages)
        assert ours == theirs
        assert routed == theirs
        assert theirs[2].prompt_tokens > 4 * len(messages[0]["content"])  # placeholders expanded


async def test_an_image_fetched_over_http_is_the_same_item_as_its_bytes(
    llava_worker: RunningServer, llava_router: RunningServer, media_host: Media
) -> None:
    inline = await chat(llava_router.base_url, image_message(data_url(media_host.image)))
    fetched = await chat(llava_router.base_url, image_message(f"{media_host.url}/ok.png"))
    assert fetched == inline


def _counter(text: str, name: str) -> float:
    return sum(float(m.group(1)) for m in re.finditer(rf"^{re.escape(name)}\{{[^}}]*\}} (\S+)$", text, re.M))


async def _mm_cache(base_url: str) -> tuple[float, float]:
    async with httpx.AsyncClient(base_url=base_url) as http:
        text = (await http.get("/metrics")).text
    return _counter(text, "vllm:mm_cache_queries_total"), _counter(text, "vllm:mm_cache_hits_total")


async def test_a_repeated_image_hits_the_worker_cache_as_it_hits_vllms(
    llava_vllm: ServerProcess, llava_worker: RunningServer, llava_router: RunningServer
) -> None:
    messages = image_message(data_url(png(1234)))
    deltas = []
    for base, via in (
        (llava_vllm.base_url, llava_vllm.base_url),
        (llava_worker.base_url, llava_router.base_url),
    ):
        before = await _mm_cache(base)
        first = await chat(via, messages)
        second = await chat(via, messages)
        assert first == second
        after = await _mm_cache(base)
        deltas.append((after[0] - before[0], after[1] - before[1]))
    assert deltas[1] == deltas[0] == (2.0, 1.0)  # two lookups, the second a hit: no tensor crossed


async def test_the_stats_line_carries_the_multimodal_cache_hit_rate_as_vllms(
    llava_vllm: ServerProcess, llava_worker: RunningServer, llava_router: RunningServer
) -> None:
    # Each server logs vLLM's stats line every 2 s (tests/conftest.py); with images through its cache it
    # ends in "MM cache hit rate: ...%", the cache's per-request figures since it started.
    messages = image_message(data_url(png(4321)))
    theirs_printed = ServerLines(llava_vllm)
    with stat_lines(logging.INFO) as kept:
        for via in (llava_vllm.base_url, llava_router.base_url):
            assert await chat(via, messages) == await chat(via, messages)
        done = time.time()
        theirs = await theirs_printed.wait(lambda line: "MM cache hit rate" in line)
        # The session's text-only worker logs through the same logger: its lines have no such part.
        ours = await next_record(kept, done, lambda record: "MM cache hit rate" in record.getMessage())
    assert template(ours.getMessage()) == template(theirs)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def routed(llava_router: RunningServer) -> AsyncIterator[AsyncOpenAI]:
    async with client(llava_router.base_url) as c:
        yield c


def _bad_cases(media_dir: Path, media_host: Media) -> dict[str, tuple[list[Any], str]]:
    inside = media_dir / "ok.png"
    inside.write_bytes(png(5))
    big = png(6, size=(300, 300))
    return {
        "corrupt bytes": (image_message(data_url(png(8)[:60])), "image"),
        "not an image": (image_message(data_url(b"just some text, not pixels")), "image"),
        "too many pixels": (image_message(data_url(big)), "pixels"),
        "outside the allowed domains": (
            image_message(f"http://localhost:{media_host.server_address[1]}/ok.png"),
            "allowed domains",
        ),
        "outside the allowed directory": (image_message("file:///etc/hostname"), "allowed-local-media-path"),
        "a fetch that times out": (image_message(f"{media_host.url}/hang"), "timed out"),
        "more images than the limit": (
            image_message(*(data_url(png(20 + i)) for i in range(LIMIT + 1))),
            f"At most {LIMIT} image(s) may be provided in one prompt",
        ),
        "image embeds": (
            [{"role": "user", "content": [{"type": "image_embeds", "image_embeds": "AAAA"}]}],
            "image_embeds",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "corrupt bytes",
        "not an image",
        "too many pixels",
        "outside the allowed domains",
        "outside the allowed directory",
        "a fetch that times out",
        "more images than the limit",
        "image embeds",
    ],
)
async def test_bad_media_get_a_400_and_leave_nothing_in_flight(
    case: str,
    routed: AsyncOpenAI,
    llava_worker: RunningServer,
    media_dir: Path,
    media_host: Media,
) -> None:
    messages, expected = _bad_cases(media_dir, media_host)[case]
    with pytest.raises(BadRequestError) as raised:
        await routed.chat.completions.create(model="llava", messages=messages, max_tokens=4)
    assert raised.value.status_code == 400
    assert expected.lower() in str(raised.value.message).lower()
    engine = llava_worker.state.engine
    assert engine is not None and engine.num_in_flight == 0


async def test_a_local_file_under_the_allowed_directory_is_read(
    llava_router: RunningServer, media_dir: Path
) -> None:
    path = media_dir / "local.png"
    path.write_bytes(png(9))
    from_file = await chat(llava_router.base_url, image_message(path.as_uri()))
    inline = await chat(llava_router.base_url, image_message(data_url(png(9))))
    assert from_file == inline


async def test_a_text_only_model_refuses_images_as_vllm_does(worker: RunningServer) -> None:
    async with client(worker.base_url) as c:
        with pytest.raises(BadRequestError) as raised:
            await c.chat.completions.create(
                model="tiny", messages=image_message(data_url(png(1))), max_tokens=4
            )
    assert "At most 0 image(s) may be provided in one prompt." in str(raised.value.message)


async def test_a_router_without_torch_or_vllm_prepares_images(
    llava_worker: RunningServer, llava_router: RunningServer
) -> None:
    """Media prepared where neither torch nor vLLM can be imported: transformers' processor runs on
    numpy; the answer equals the router's own (which runs in this process, beside an engine)."""
    url = data_url(png(11))
    script = Path(__file__).with_name("router_without_torch.py")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(script), llava_worker.grpc_target, url, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 0
    answer = json.loads(out.decode().strip().splitlines()[-1])
    assert answer["loaded"] == ["transformers"]
    expected = await chat(llava_router.base_url, image_message(url, text="What is it?"))
    assert answer["content"] == expected[0]


async def test_a_request_larger_than_the_grpc_message_limit_gets_a_typed_error(
    llava_worker: RunningServer, llava_dir: Path
) -> None:
    """The caller refuses before sending (InvalidRequest, a 400), rather than the call failing."""
    from vllm_llm import ChatLlm, ChatMessage, ChatRequest, InvalidRequest, TextLlm, TextPart
    from vllm_llm.chat import ImageUrlPart, MediaUrl
    from vllm_remote_llm import RemoteLlm

    remote = await RemoteLlm.connect(llava_worker.grpc_target, max_message_bytes=10_000)
    try:
        chat_llm = ChatLlm(TextLlm(remote))
        image = ImageUrlPart(image_url=MediaUrl(url=data_url(png(12))))
        messages = [ChatMessage(role="user", content=[image, image, TextPart(text="Two?")])]
        with pytest.raises(InvalidRequest, match="10000-byte gRPC message limit"):
            await chat_llm.generate(ChatRequest(request_id="big", messages=messages))
    finally:
        await remote.shutdown()
    engine = llava_worker.state.engine
    assert engine is not None and engine.num_in_flight == 0


async def test_tokenize_counts_the_expanded_placeholders_as_vllm(
    llava_vllm: ServerProcess, llava_router: RunningServer
) -> None:
    body = {"model": "llava", "messages": image_message(data_url(png(13)), data_url(png(14)))}
    answers = []
    for base in (llava_vllm.base_url, llava_router.base_url):
        async with httpx.AsyncClient(base_url=base, timeout=120) as http:
            response = await http.post("/tokenize", json=body)
        assert response.status_code == 200, response.text
        answers.append((response.json()["count"], response.json()["tokens"]))
    assert answers[1] == answers[0]


async def test_prompt_tokens_details_count_the_image_placeholders(
    llava_worker: RunningServer, llava_dir: Path
) -> None:
    """--enable-prompt-tokens-details on a router over the LLaVA worker: a chat's usage carries its image
    tokens (vLLM's multimodal_tokens: the placeholder lengths summed by modality, here every expanded
    image token of the prompt), whole and streamed; a text-only chat has none (null, left out streamed)."""
    from vllm_remote_llm import RemoteLlm
    from vllm_server.config import ServerConfig
    from vllm_server.source import LlmSource

    image_token = json.loads((llava_dir / "config.json").read_text())["image_token_index"]
    remote = await RemoteLlm.connect(llava_worker.grpc_target)
    config = ServerConfig(
        port=0, grpc_port=None, limit_mm_per_prompt={"image": LIMIT}, enable_prompt_tokens_details=True
    )
    router = await start_server(config, LlmSource.provided(remote))
    try:
        async with httpx.AsyncClient(base_url=router.base_url, timeout=300) as http:
            body = {"model": "llava", "max_tokens": 2, "temperature": 0, "return_token_ids": True}
            two = {**body, "messages": image_message(data_url(png(31)), data_url(png(32)))}
            whole = (await http.post("/v1/chat/completions", json=two)).json()
            images = whole["prompt_token_ids"].count(image_token)
            assert images > 0
            assert whole["usage"]["prompt_tokens_details"]["multimodal_tokens"] == {"image": images}
            streamed = {**two, "stream": True, "stream_options": {"include_usage": True}}
            async with http.stream("POST", "/v1/chat/completions", json=streamed) as response:
                lines = [line async for line in response.aiter_lines() if line.startswith("data: {")]
            usage = json.loads(lines[-1].removeprefix("data: "))["usage"]
            assert usage["prompt_tokens_details"]["multimodal_tokens"] == {"image": images}
            text = {**body, "messages": [{"role": "user", "content": "No picture."}]}
            details = (await http.post("/v1/chat/completions", json=text)).json()["usage"][
                "prompt_tokens_details"
            ]
            assert details["multimodal_tokens"] is None
    finally:
        await router.stop()
        await remote.shutdown()
