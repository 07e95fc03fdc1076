"""No unsafe deserialization on any port, no stack traces in error bodies, limits and keys on every route.

TLS and mTLS on gRPC and HTTPS are covered by tests/server/test_security.py and
tests/server/grpc/internal/test_security.py; this module adds what they do not.
"""

from __future__ import annotations

import ast
import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest
import pytest_asyncio
from fastapi import APIRouter, FastAPI
from fastapi.responses import StreamingResponse
from starlette.routing import Route

from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer
from vllm_llm.wire import METHODS, TENSOR_EXT_CODE, GenerateOutput, LlmInfo, MethodSpec, Tensor, decoder
from vllm_server.config import ServerConfig
from vllm_server.grpc.guarded import Undecodable
from vllm_server.grpc.llm_service import _request_decoder
from vllm_server.http.middleware import OPEN_PATHS
from vllm_server.server import Server
from vllm_server.source import LlmSource
from vllm_server.state import ServerState

ROOT = Path(__file__).resolve().parents[2]
SCANNED = [
    ROOT / "packages/server/src/vllm_server",
    ROOT / "packages/remote_llm/src/vllm_remote_llm",
    ROOT / "packages/llm/src/vllm_llm/wire",
]
UNSAFE_MODULES = {"pickle", "cPickle", "cloudpickle", "dill", "marshal", "shelve", "joblib", "jsonpickle"}
UNSAFE_CALLS = {"eval", "exec", "compile", "__import__"}
#: `cli.py` loads the optional `bench` subcommand by a constant name (not input-driven).
ALLOWED_CALLS = {("cli.py", "__import__")}


def _sources() -> Iterator[Path]:
    for base in SCANNED:
        yield from sorted(base.rglob("*.py"))


def _findings(path: Path) -> Iterator[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name.split(".")[0] for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [(node.module or "").split(".")[0]]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in UNSAFE_CALLS:
            if (path.name, node.func.id) not in ALLOWED_CALLS:
                yield f"{path.relative_to(ROOT)}:{node.lineno} calls {node.func.id}()"
            continue
        elif (
            isinstance(node, ast.Attribute)
            and node.attr in ("loads", "load")
            and isinstance(node.value, ast.Name)
        ):
            if node.value.id in UNSAFE_MODULES or (node.value.id == "yaml" and node.attr == "load"):
                yield f"{path.relative_to(ROOT)}:{node.lineno} uses {node.value.id}.{node.attr}"
            continue
        else:
            continue
        for name in names:
            if name in UNSAFE_MODULES:
                yield f"{path.relative_to(ROOT)}:{node.lineno} imports {name}"


def test_no_unsafe_deserialization_in_the_serving_packages() -> None:
    sources = list(_sources())
    assert len(sources) > 20
    findings = [f for path in sources for f in _findings(path)]
    assert findings == []


def test_the_scan_finds_what_it_looks_for(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import pickle\nfrom cloudpickle import loads\nimport marshal as m\n"
        "x = eval('1')\npickle.loads(b'')\n"
    )
    found = list(_findings_in(bad))
    assert len(found) == 5, found


def _findings_in(path: Path) -> Iterator[str]:
    global ROOT
    saved, ROOT = ROOT, path.parent
    try:
        yield from _findings(path)
    finally:
        ROOT = saved


FOREIGN = msgspec.msgpack.Ext(1, b"\x80\x04K\x01.")  # vLLM's CUSTOM_TYPE_PICKLE, pickling the int 1


_VALID = {"request_id": "r", "prompt_token_ids": [1], "sampling_params": {}}
#: Per method, bodies that carry a foreign Ext where the request type reads it (unknown fields are
#: skipped by msgspec without being decoded, so they never materialize anything).
FOREIGN_BODIES: dict[str, list[object]] = {
    "Generate": [
        {**_VALID, "kv_transfer_params": {"x": [FOREIGN]}},
        {**_VALID, "sampling_params": {"extra_args": {"x": FOREIGN}}},
        {**_VALID, "request_id": FOREIGN},
        FOREIGN,
    ],
    "Info": [FOREIGN],
    "Abort": [{"request_ids": [FOREIGN]}, FOREIGN],
    "GenerateMux": [
        {"generate": [{**_VALID, "request_id": FOREIGN}]},
        {"generate": [{**_VALID, "sampling_params": {"extra_args": {"x": FOREIGN}}}]},
        {"cancel": [FOREIGN]},
        FOREIGN,
    ],
}


@pytest.mark.parametrize("method", METHODS, ids=[m.name for m in METHODS])
def test_request_decoders_reject_foreign_extension_types(method: MethodSpec[Any, Any]) -> None:
    """The server's request decoders refuse an Ext other than the tensor's, even in an `any` value."""
    decode = _request_decoder(method.request_type)
    valid = {
        "Generate": _VALID,
        "Info": {},
        "Abort": {"request_ids": ["r"]},
        "GenerateMux": {"generate": [_VALID], "cancel": ["r"]},
    }[method.name]
    assert not isinstance(decode(msgspec.msgpack.encode(valid)), Undecodable)
    for value in FOREIGN_BODIES[method.name]:
        assert isinstance(decode(msgspec.msgpack.encode(value)), Undecodable), value


def test_typed_decoders_reject_foreign_extensions_in_typed_fields() -> None:
    """Typed fields never take a foreign Ext: tensors check their code, other fields their type."""
    bad_tensor = msgspec.msgpack.encode(["float32", [1], msgspec.msgpack.Ext(1, b"\x00" * 4)])
    with pytest.raises(msgspec.ValidationError, match="extension type"):
        decoder(Tensor).decode(bad_tensor)
    good = msgspec.msgpack.encode(["float32", [1], msgspec.msgpack.Ext(TENSOR_EXT_CODE, b"\x00" * 4)])
    assert decoder(Tensor).decode(good).raw == b"\x00" * 4
    with pytest.raises(msgspec.ValidationError):
        decoder(GenerateOutput).decode(msgspec.msgpack.encode({"request_id": FOREIGN, "token_ids": []}))
    with pytest.raises(msgspec.ValidationError):
        decoder(LlmInfo).decode(msgspec.msgpack.encode({"model": FOREIGN}))


# ---- no stack traces, limits and keys on HTTP ------------------------------------------------------

KEY = "k3y"


APPS: list[FastAPI] = []


def _failing_routes(app: FastAPI, state: ServerState) -> None:
    APPS.append(app)
    r = APIRouter()

    @r.post("/test/raise")
    async def boom() -> None:
        raise RuntimeError("secret internal detail at /srv/app.py line 42")

    @r.post("/test/raise-in-stream")
    async def boom_later() -> StreamingResponse:
        async def frames() -> AsyncIterator[bytes]:
            yield b"data: {}\n\n"
            raise RuntimeError("secret internal detail")

        return StreamingResponse(frames(), media_type="text/event-stream")

    app.include_router(r)


@pytest_asyncio.fixture
async def keyed(tiny_model_dir: Path) -> AsyncIterator[RunningServer]:
    """A server with an API key, a 64 KiB body limit and two routes that fail unexpectedly."""
    llm = tiny_mock(tiny_model_dir)
    config = ServerConfig(port=0, grpc_port=None, api_key=KEY, max_request_body_bytes=64 << 10)
    server = Server(config, LlmSource.provided(llm)).router_extension(_failing_routes)
    shutdown = asyncio.Event()
    task = asyncio.create_task(server.serve(shutdown))
    await asyncio.wait_for(server.listening.wait(), 30)
    running = RunningServer(server, shutdown, task)
    await running.wait_ready()
    yield running
    await running.stop()
    await llm.shutdown()


async def test_an_unexpected_exception_is_a_generic_500(keyed: RunningServer) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=keyed.base_url, headers=headers) as http:
        response = await http.post("/test/raise")
        assert response.status_code == 500
        assert response.json() == {
            "error": {
                "message": "internal server error",
                "type": "InternalServerError",
                "param": None,
                "code": 500,
            }
        }
        assert "secret" not in response.text and "Traceback" not in response.text
        received: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):  # the stream is cut, nothing of the error leaks
            await _read_stream(http, "/test/raise-in-stream", received)
        assert received and not any("secret" in c or "Traceback" in c for c in received)
        assert (await http.get("/v1/models")).status_code == 200  # still serving


async def _read_stream(http: httpx.AsyncClient, path: str, into: list[str]) -> None:
    async with http.stream("POST", path) as stream:
        async for chunk in stream.aiter_text():
            into.append(chunk)


async def test_every_route_but_the_probes_needs_the_key(keyed: RunningServer) -> None:
    app = APPS[-1]
    guarded = [
        (method, route.path)
        for route in app.routes
        if isinstance(route, Route) and route.path not in OPEN_PATHS
        for method in sorted(route.methods or ())
        if method != "HEAD"
    ]
    assert len(guarded) > 8
    async with httpx.AsyncClient(base_url=keyed.base_url) as http:
        for method, path in guarded:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": KEY}):
                response = await http.request(method, path.replace("{", "").replace("}", ""), headers=headers)
                assert response.status_code == 401, (method, path, headers, response.text[:200])
                assert response.json()["error"]["type"] == "AuthenticationError"
        for path in sorted(OPEN_PATHS):
            assert (await http.get(path)).status_code != 401


async def test_a_chunked_body_over_the_limit_is_413(keyed: RunningServer) -> None:
    """No Content-Length to trust: the limit is enforced as the body streams in."""

    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"model": "tiny", "prompt": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    headers = {"Authorization": f"Bearer {KEY}", "content-type": "application/json"}
    async with httpx.AsyncClient(base_url=keyed.base_url, headers=headers) as http:
        response = await http.post("/v1/completions", content=chunks())
        assert response.status_code == 413
        assert response.json()["error"]["code"] == 413
        small = await http.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2})
        assert small.status_code == 200
