"""Run as a script: a router's chat layer over RemoteLlm, in an interpreter where torch and vLLM cannot be
imported (as in a router-only install), answers an image chat; prints what it answered and which of
torch / vllm / transformers got loaded, as JSON."""

from __future__ import annotations

import sys

for _name in ("torch", "torchvision", "vllm"):
    sys.modules[_name] = None  # type: ignore[assignment]  # import fails; find_spec says "not installed"

import asyncio  # noqa: E402
import json  # noqa: E402

from vllm_llm import ChatLlm, ChatMessage, ChatRequest, TextLlm, TextPart, TextSamplingParams  # noqa: E402
from vllm_llm.chat import ImageUrlPart, MediaUrl  # noqa: E402
from vllm_remote_llm import RemoteLlm  # noqa: E402


async def main(target: str, url: str) -> None:
    remote = await RemoteLlm.connect(target)
    try:
        chat = ChatLlm(TextLlm(remote))
        message = ChatMessage(
            role="user", content=[ImageUrlPart(image_url=MediaUrl(url=url)), TextPart(text="What is it?")]
        )
        result = await chat.complete(
            ChatRequest(
                request_id="no-torch",
                messages=[message],
                params=TextSamplingParams(temperature=0.0, max_tokens=12),
            )
        )
        loaded = sorted(m for m in ("torch", "vllm", "transformers") if sys.modules.get(m) is not None)
        print(json.dumps({"content": result.choices[0].content, "loaded": loaded}))
    finally:
        await remote.shutdown()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
