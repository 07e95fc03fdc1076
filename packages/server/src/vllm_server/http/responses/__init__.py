"""The OpenAI Responses API (`POST /v1/responses`, stateless) over the chat layer, as vLLM 0.32 serves it
for a non-Harmony model.

A body is decoded and checked (`request`), its input items become chat messages (`items`) and its function
tools chat tools (`tools`); the chat stream's parsed deltas become the response's output items and
streaming events (`events`, `objects`, `output`).
"""

from vllm_server.http.responses.output import ResponsesOutput
from vllm_server.http.responses.request import ResponsesRequest
from vllm_server.http.responses.tools import resolve_tool_choice

__all__ = ["ResponsesOutput", "ResponsesRequest", "resolve_tool_choice"]
