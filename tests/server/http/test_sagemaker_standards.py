"""SageMaker's hosting standards on a served frontend, as vLLM's server takes them: a customer script
(`SAGEMAKER_MODEL_PATH` + `CUSTOM_SCRIPT_FILENAME`) with its middlewares and handler overrides, the
middlewares and handlers environment variables name, and the adapter header on `/invocations`.

vLLM's own tests of the same (`serve/sagemaker/test_sagemaker_middleware_integration.py`) run in `make
conformance`, on vLLM's server and ours; these run on `vllm-frontend serve --mock` as a user starts it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx

from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend

MOCK = ("--mock", "--grpc-port", "-1", "--served-model-name", "tiny")
CHAT = {"model": "tiny", "messages": [{"role": "user", "content": "Hello"}], "max_tokens": 3}
COMPLETION = {"model": "tiny", "prompt": "Hello", "max_tokens": 3}

DECORATED = """
from fastapi import Request, Response
from model_hosting_container_standards.common.fastapi.middleware import (
    custom_middleware, input_formatter, output_formatter,
)

seen = []


@input_formatter
async def pre(request):
    seen.append(request.url.path)
    return request


@custom_middleware("throttle")
async def throttle(request, call_next):
    response = await call_next(request)
    response.headers["x-throttle"] = "applied"
    response.headers["x-order"] = response.headers.get("x-order", "") + "throttle,"
    return response


@output_formatter
async def post(response):
    response.headers["x-order"] = response.headers.get("x-order", "") + "post,"
    response.headers["x-pre-saw"] = ",".join(seen)
    return response
"""

NAMED = """
from fastapi import Request, Response


async def env_throttle(request, call_next):
    response = await call_next(request)
    response.headers["x-env-throttle"] = "applied"
    return response


async def env_post(response):
    response.headers["x-env-post"] = "applied"
    return response


async def ping():
    return Response(status_code=200, content=b"customer ping", headers={"x-customer-ping": "yes"})


async def custom_sagemaker_invocation_handler(request: Request):
    body = await request.json()
    return Response(content=b"customer invocation of " + body["prompt"].encode())
"""


@asynccontextmanager
async def _served(tmp_path: Path, script: str, **env: str) -> AsyncIterator[httpx.AsyncClient]:
    (tmp_path / "customer.py").write_text(script, encoding="utf-8")
    environ = {
        **os.environ,
        "SAGEMAKER_MODEL_PATH": str(tmp_path),
        "CUSTOM_SCRIPT_FILENAME": "customer.py",
        **env,
    }
    front = await Frontend.start(*MOCK, env=environ)
    try:
        assert "listening: HTTP on" in front.log_tail(200)  # the package left our INFO lines on
        async with httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE) as http:
            yield http
    finally:
        await front.stop(10)


async def test_a_customer_scripts_middlewares_wrap_every_route(tmp_path: Path) -> None:
    async with _served(tmp_path, DECORATED) as http:
        answers = {
            "/ping": await http.get("/ping"),
            "/v1/chat/completions": await http.post("/v1/chat/completions", json=CHAT),
            "/invocations": await http.post("/invocations", json=CHAT),
            "/v1/completions": await http.post("/v1/completions", json=COMPLETION),
        }
        for path, response in answers.items():
            assert response.status_code == 200, (path, response.text)
            assert response.headers["x-throttle"] == "applied", path
            # The pre/post-processing runs inside the throttle (vLLM's order), before and after the route.
            assert response.headers["x-order"] == "post,throttle,", path
            assert response.headers["x-pre-saw"].split(",")[-1] == path
        streamed = await http.post("/v1/chat/completions", json={**CHAT, "stream": True})
        assert streamed.status_code == 200 and "data: [DONE]" in streamed.text
        assert streamed.headers["x-throttle"] == "applied"


async def test_middlewares_and_handlers_named_by_environment_variables(tmp_path: Path) -> None:
    named = {
        "CUSTOM_FASTAPI_MIDDLEWARE_THROTTLE": "customer.py:env_throttle",
        "CUSTOM_POST_PROCESS": "customer.py:env_post",
        "CUSTOM_FASTAPI_PING_HANDLER": "customer.py:ping",
    }
    async with _served(tmp_path, NAMED, **named) as http:
        ping = await http.get("/ping")
        assert ping.status_code == 200 and ping.content == b"customer ping"
        assert ping.headers["x-customer-ping"] == "yes"
        assert ping.headers["x-env-throttle"] == "applied" and ping.headers["x-env-post"] == "applied"
        # The customer script's invocation handler, found by its name, serves /invocations.
        invoked = await http.post("/invocations", json={"prompt": "hi"})
        assert invoked.status_code == 200 and invoked.content == b"customer invocation of hi"
        # The other routes stay ours, inside the customer's middlewares.
        health = await http.get("/health")
        assert health.status_code == 200 and health.headers["x-env-throttle"] == "applied"


async def test_invocations_take_the_model_from_the_adapter_header(tmp_path: Path) -> None:
    async with _served(tmp_path, "") as http:
        served = await http.post("/invocations", json={**COMPLETION, "model": "whatever"})
        assert served.status_code == 200 and served.json()["model"] == "tiny"
        named = await http.post(
            "/invocations", json=COMPLETION, headers={"X-Amzn-SageMaker-Adapter-Identifier": "absent"}
        )
        assert named.status_code == 404 and "absent" in named.json()["error"]["message"]
        # A body that is no JSON object meets the transforms' TypeError: a 400 with Python's words.
        listed = await http.post(
            "/invocations", content=b"[1, 2]", headers={"content-type": "application/json"}
        )
        assert listed.status_code == 400
        assert listed.json()["error"]["message"] == "list indices must be integers or slices, not str"
