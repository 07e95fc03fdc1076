"""vLLM's frontend flags (`vllm_server.frontend_flags`): the table is vLLM's, its docs are the table, and
each start-up and transport flag does on a `vllm-frontend serve` process what it does on vLLM's server
(read in vllm/entrypoints/launchers: `app.py` build_app, `launcher.py` serve_http, `utils/ssl.py`).
The defaults are compared with vLLM's own server in tests/differential/test_transport.py."""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import ssl
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest

from tests.support.certs import make_pki
from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import Frontend, free_port, frontend_argv, until
from vllm_server import frontend_flags
from vllm_server.frontend_flags import FLAGS

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "frontend-flags.md"
#: The mock: no engine, the tiny model's tokenizer, no gRPC.
MOCK = ("--mock", "--grpc-port", "-1", "--served-model-name", "tiny")


def _vllm_actions() -> dict[str, argparse.Action]:
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser())  # type: ignore[no-untyped-call]
    return {name: action for action in parser._actions for name in action.option_strings}


@pytest.mark.parametrize("flag", FLAGS, ids=[f.name for f in FLAGS])
def test_each_flag_is_vllms(flag: frontend_flags.Flag) -> None:
    action = _vllm_actions()[flag.name]
    names = set(flag.names) | ({f"--no-{flag.name[2:]}"} if flag.boolean else set())
    assert set(action.option_strings) == names
    assert action.default == flag.default
    theirs = sorted(action.choices) if action.choices is not None else None
    assert theirs == (sorted(flag.choices) if flag.choices is not None else None)
    assert isinstance(action, argparse.BooleanOptionalAction) == flag.boolean
    assert (type(action).__name__ == "_AppendAction") == flag.append
    assert (type(action).__name__ == "_StoreTrueAction") == flag.switch


def test_a_worker_takes_every_flag_of_vllm_serve() -> None:
    from vllm_server.cli import serve_parser

    ours = {name for action in serve_parser(engine=True)._actions for name in action.option_strings}
    theirs = set(_vllm_actions())
    assert sorted(theirs - ours) == []  # a flag vLLM adds shows up here


def test_a_workers_help_lists_them(tiny_model_dir: Path) -> None:
    import subprocess

    shown = subprocess.run(
        frontend_argv("serve", "--model", str(tiny_model_dir), "--help"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    words = {w.rstrip(",") for w in shown.split()}
    flags = {name for f in FLAGS for name in f.names} | {f"--no-{f.name[2:]}" for f in FLAGS if f.boolean}
    assert sorted(flags - words) == []


REFUSALS = [
    (["--headless"], "--headless True is not supported by this frontend: a worker always serves HTTP"),
    (["--api-server-count", "2"], "--api-server-count 2 is not supported by this frontend: one frontend"),
    (["-asc", "4"], "--api-server-count 4 is not supported"),
    (["--grpc"], "--grpc True is not supported by this frontend: this frontend serves HTTP and"),
    (["--tool-parser-plugin", "/p.py"], "--tool-parser-plugin '/p.py' is not supported by this frontend"),
    (["--tool-server", "demo"], "--tool-server 'demo' is not supported by this frontend: the Responses"),
    (["--enable-per-request-metrics"], "--enable-per-request-metrics True is not supported"),
    (["--no-cohere-is-reasoning-model"], "the Cohere API (/v2/chat, /v2/embed) is not served"),
    (["--cohere-format", "cmd3"], "--cohere-format 'cmd3' is not supported"),
    (["--tokens-only"], "vLLM's token-in/token-out scale-out endpoints"),
    (["--enable-scale-out"], "vLLM's token-in/token-out scale-out endpoints"),
    (["--data-parallel-supervisor-port", "9300"], "vLLM's data-parallel supervisor"),
    (["--dp-supervisor-probe-interval-s", "1"], "vLLM's data-parallel supervisor"),
    (["--dp-supervisor-probe-timeout-s", "1"], "vLLM's data-parallel supervisor"),
    (["--dp-supervisor-probe-failure-threshold", "5"], "vLLM's data-parallel supervisor"),
    (["--no-enable-flash-late-interaction"], "pooling models are not served"),
]


@pytest.mark.parametrize(("argv", "message"), REFUSALS, ids=[" ".join(a) for a, _ in REFUSALS])
@pytest.mark.parametrize("source", ["mock", "router"])
def test_what_this_frontend_does_not_run_is_refused(argv: list[str], message: str, source: str) -> None:
    from vllm_server.cli import serve_config

    given = list(MOCK) if source == "mock" else ["--remote", "127.0.0.1:1"]
    with pytest.raises(SystemExit) as refused:
        serve_config([*given, *argv])
    assert str(refused.value).startswith("Error: ") and message in str(refused.value)


def test_their_defaults_and_allowed_values_are_taken() -> None:
    from vllm_server.cli import serve_config

    defaults = [f"--{'' if f.default else 'no-'}{f.name[2:]}" for f in FLAGS if f.boolean and f.refused]
    serve_config([*MOCK, *defaults, "--api-server-count", "1"])
    serve_config([*MOCK, "--cohere-format", "cmd4", "--data-parallel-supervisor-port", "9256"])


async def test_a_refused_flag_stops_the_start_as_a_user_sees_it() -> None:
    proc = await asyncio.create_subprocess_exec(
        *frontend_argv("serve", *MOCK, "--port", str(free_port()), "--headless"),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, process_group=0,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), PATIENCE)
    assert proc.returncode == 1, out.decode()[-2000:]
    assert "Error: --headless True is not supported by this frontend" in out.decode()


def test_the_docs_are_the_table() -> None:
    assert DOCS.read_text(encoding="utf-8") == frontend_flags.markdown(), (
        "docs/frontend-flags.md is out of date: python -m vllm_server.frontend_flags > docs/frontend-flags.md"
    )


def test_values_parse_as_vllms() -> None:
    from vllm_server.cli import parse_serve_args

    argv = [*MOCK, "--allowed-methods", '["GET"]', "--middleware", "a.b", "--middleware", "c.d"]
    argv += ["--no-enable-ssl-refresh", "--ssl-cert-reqs", "2", "--uvicorn-log-level", "trace"]
    args = parse_serve_args(argv)
    assert args.allowed_methods == ["GET"] and args.allowed_headers == ["*"]
    assert frontend_flags.value(args, "--middleware") == ["a.b", "c.d"]
    assert args.enable_ssl_refresh is False and args.ssl_cert_reqs == 2 and args.uvicorn_log_level == "trace"
    assert frontend_flags.value(parse_serve_args(list(MOCK)), "--middleware") == []
    with pytest.raises(SystemExit):
        parse_serve_args([*MOCK, "--allowed-headers", '{"a": 1}'])  # a JSON list, as vLLM's json.loads


def test_the_chat_template_flags_parse_as_vllms_and_reach_the_server_config() -> None:
    from vllm_server.cli import parse_serve_args, serve_config

    plain = serve_config(list(MOCK)).server
    assert plain.trust_request_chat_template is False and plain.exclude_tools_when_tool_choice_none is False
    assert plain.default_chat_template_kwargs == {}
    argv = [*MOCK, "--trust-request-chat-template", "--exclude-tools-when-tool-choice-none"]
    argv += ["--default-chat-template-kwargs", '{"enable_thinking": false, "n": [1]}']
    server = serve_config(argv).server
    assert server.trust_request_chat_template is True and server.exclude_tools_when_tool_choice_none is True
    assert server.default_chat_template_kwargs == {"enable_thinking": False, "n": [1]}
    negated = [*argv, "--no-trust-request-chat-template", "--no-exclude-tools-when-tool-choice-none"]
    server = serve_config(negated).server
    assert server.trust_request_chat_template is False and server.exclude_tools_when_tool_choice_none is False
    for bad in ("[1]", "{not json"):  # a JSON object, as vLLM's json.loads would need for its merge
        with pytest.raises(SystemExit):
            parse_serve_args([*MOCK, "--default-chat-template-kwargs", bad])


@pytest.mark.parametrize("source", ["mock", "router"])
def test_the_usage_and_anthropic_flags_reach_the_server_config(source: str) -> None:
    from vllm_server.cli import parse_serve_args, serve_config

    given = list(MOCK) if source == "mock" else ["--remote", "127.0.0.1:1"]
    plain = serve_config(given).server
    assert plain.enable_prompt_tokens_details is False and plain.anthropic_disabled_thinking_effort == "auto"
    server = serve_config(
        [*given, "--enable-prompt-tokens-details", "--anthropic-disabled-thinking-effort", "max"]
    )
    assert server.server.enable_prompt_tokens_details is True
    assert server.server.anthropic_disabled_thinking_effort == "max"
    assert (
        serve_config([*given, "--no-enable-prompt-tokens-details"]).server.enable_prompt_tokens_details
        is False
    )
    with pytest.raises(SystemExit):  # vLLM's choices
        parse_serve_args([*given, "--anthropic-disabled-thinking-effort", "minimal"])


@asynccontextmanager
async def _served(*args: str, env: dict[str, str] | None = None) -> AsyncIterator[Frontend]:
    front = await Frontend.start(*MOCK, *args, env=env)
    try:
        yield front
    finally:
        await front.stop(10)


def _http(front: Frontend, **kwargs: object) -> httpx.AsyncClient:
    return httpx.AsyncClient(base_url=front.base_url, timeout=PATIENCE, **kwargs)  # type: ignore[arg-type]


async def test_uds_serves_http_on_a_unix_socket(tmp_path: Path) -> None:
    path = tmp_path / "frontend.sock"
    async with _served("--uds", str(path)) as front:
        assert front.uds == str(path)
        transport = httpx.AsyncHTTPTransport(uds=str(path))
        client = httpx.AsyncClient(transport=transport, base_url="http://frontend", timeout=PATIENCE)
        async with client as http:
            models = await http.get("/v1/models")
            assert models.status_code == 200 and models.json()["data"][0]["id"]
            done = await http.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2})
            assert done.status_code == 200, done.text


async def test_root_path_is_served_with_and_without_its_prefix() -> None:
    async with _served("--root-path", "/api", "--api-key", "k") as front, _http(front) as http:
        key = {"Authorization": "Bearer k"}
        for path in ("/api/v1/models", "/v1/models"):
            assert (await http.get(path, headers=key)).status_code == 200, path
            assert (await http.get(path)).status_code == 401, path
        for path in ("/api/health", "/health"):  # the probes stay open under the prefix too
            assert (await http.get(path)).status_code == 200, path
        openapi = await http.get("/api/openapi.json", headers=key)
        assert openapi.json()["servers"] == [{"url": "/api"}]
        assert (await http.get("/elsewhere/v1/models", headers=key)).status_code == 404


async def test_docs_routes_by_default_and_none_when_disabled() -> None:
    async with _served() as front, _http(front) as http:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert (await http.get(path)).status_code == 200, path
    async with _served("--disable-fastapi-docs") as front, _http(front) as http:
        for path in ("/docs", "/redoc", "/openapi.json"):
            assert (await http.get(path)).status_code == 404, path


async def test_offline_docs_use_vllms_own_swagger_assets() -> None:
    async with _served("--enable-offline-docs") as front, _http(front) as http:
        docs = await http.get("/docs")
        assert docs.status_code == 200 and "/static/swagger-ui-bundle.js" in docs.text
        bundle = await http.get("/static/swagger-ui-bundle.js")
        assert bundle.status_code == 200 and len(bundle.content) > 100_000
        assert (await http.get("/redoc")).status_code == 404
        assert (await http.get("/openapi.json")).status_code == 200


MIDDLEWARE = """
from starlette.types import ASGIApp, Receive, Scope, Send


class Stamp:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def stamped(message):
            if message["type"] == "http.response.start":
                message["headers"] = [*message["headers"], (b"x-stamp", b"class")]
            await send(message)

        await self.app(scope, receive, stamped)


async def timed(request, call_next):
    response = await call_next(request)
    response.headers["x-timed"] = request.url.path
    return response


not_middleware = 42
"""


async def test_middleware_by_dotted_name(tmp_path: Path) -> None:
    (tmp_path / "site_mw.py").write_text(MIDDLEWARE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    argv = ("--middleware", "site_mw.Stamp", "--middleware", "site_mw.timed")
    async with _served(*argv, env=env) as front, _http(front) as http:
        for path in ("/v1/models", "/health"):
            response = await http.get(path)
            assert response.headers["x-stamp"] == "class" and response.headers["x-timed"] == path
        done = await http.post("/v1/completions", json={"model": "tiny", "prompt": "hi", "max_tokens": 2})
        assert done.status_code == 200 and done.headers["x-stamp"] == "class"
        # A stream's frames pass through a function middleware (Starlette's BaseHTTPMiddleware) too.
        body = {"model": "tiny", "prompt": "hi", "max_tokens": 2, "stream": True}
        streamed = await http.post("/v1/completions", json=body)
        assert streamed.status_code == 200 and streamed.headers["x-timed"] == "/v1/completions"
        frames = streamed.text.split("\n\n")
        assert len(frames) == 4 and frames[-2:] == ["data: [DONE]", ""], streamed.text


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("site_mw.not_middleware", "Invalid middleware site_mw.not_middleware. Must be a function or"),
        ("site_mw.absent", "--middleware site_mw.absent: cannot import it"),
        ("no_such_module.thing", "--middleware no_such_module.thing: cannot import it"),
    ],
)
async def test_a_middleware_that_cannot_be_added_stops_the_start(
    tmp_path: Path, name: str, message: str
) -> None:
    (tmp_path / "site_mw.py").write_text(MIDDLEWARE, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = await asyncio.create_subprocess_exec(
        *frontend_argv("serve", *MOCK, "--port", str(free_port()), "--middleware", name),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, env=env, process_group=0,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), PATIENCE)
    assert proc.returncode == 1 and message in out.decode(), out.decode()[-2000:]


async def test_uvicorn_log_level_governs_the_access_log() -> None:
    for level, logged in (("info", True), ("warning", False)):
        async with _served("--uvicorn-log-level", level) as front, _http(front) as http:
            assert (await http.get("/v1/models?probe=access-log")).status_code == 200
            assert (await http.get("/health")).status_code == 200

            async def seen() -> bool:
                return any("GET /health HTTP/1.1" in line for line in front.log)

            if logged:
                await until(seen, within=PATIENCE, what="the access log line")
                assert any("/v1/models?probe=access-log" in line for line in front.log)
            else:
                # the same requests, then a stop: uvicorn wrote what it had before the process ended
                await front.stop(10)
                assert not any("probe=access-log" in line for line in front.log), front.log_tail()


async def test_cors_methods_and_headers() -> None:
    argv: tuple[str, ...] = ("--allowed-origins", '["http://app"]', "--allowed-methods", '["GET"]')
    argv += ("--allowed-headers", '["x-allowed"]')
    async with _served(*argv) as front, _http(front) as http:

        def preflight(method: str, headers: str = "") -> dict[str, str]:
            asked = {"Origin": "http://app", "Access-Control-Request-Method": method}
            return {**asked, "Access-Control-Request-Headers": headers} if headers else asked

        ok = await http.options("/v1/models", headers=preflight("GET", "x-allowed"))
        assert ok.status_code == 200 and ok.headers["access-control-allow-origin"] == "http://app"
        assert ok.headers["access-control-allow-methods"] == "GET"
        no_method = await http.options("/v1/models", headers=preflight("POST"))
        assert no_method.status_code == 400 and no_method.text == "Disallowed CORS method"
        no_header = await http.options("/v1/models", headers=preflight("GET", "x-other"))
        assert no_header.status_code == 400 and no_header.text == "Disallowed CORS headers"


async def test_h11_limits_are_handed_to_uvicorn_and_limit_nothing_under_httptools() -> None:
    # vLLM sets both on uvicorn's config; uvicorn parses with httptools where it is installed (here, as
    # under vLLM's server), which reads neither, and reads no h11_max_header_count at all (uvicorn 0.54).
    import httptools  # noqa: F401  (what uvicorn's "auto" picks)

    argv = ("--h11-max-header-count", "4", "--h11-max-incomplete-event-size", "1024")
    async with _served(*argv) as front, _http(front) as http:
        many = {f"x-h{i}": "v" * 100 for i in range(40)}
        assert (await http.get("/v1/models", headers=many)).status_code == 200


def _peer_serial(port: int) -> int:
    """The serial number of the certificate HTTPS presents on a new connection now."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the certificate is what is read here, not whether it verifies
    with (
        socket.create_connection(("127.0.0.1", port), timeout=PATIENCE) as raw,
        context.wrap_socket(raw, server_hostname="localhost") as tls,
    ):
        der = tls.getpeercert(binary_form=True)
    from cryptography import x509

    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def _serial(pem: Path) -> int:
    from cryptography import x509

    return x509.load_pem_x509_certificate(pem.read_bytes()).serial_number


async def test_ssl_refresh_serves_a_renewed_certificate(tmp_path: Path) -> None:
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    first, second = make_pki(tmp_path / "a"), make_pki(tmp_path / "b")
    live = tmp_path / "live"
    live.mkdir()
    cert, key = live / "cert.pem", live / "key.pem"
    shutil.copy(first.server.cert, cert)
    shutil.copy(first.server.key, key)
    argv = ("--ssl-certfile", str(cert), "--ssl-keyfile", str(key), "--enable-ssl-refresh")
    async with _served(*argv) as front:
        assert _peer_serial(front.http_port) == _serial(first.server.cert)
        # renewed in place, key first (as cert-manager or certbot write them)
        shutil.copy(second.server.key, key)
        shutil.copy(second.server.cert, cert)

        async def renewed() -> bool:
            return _peer_serial(front.http_port) == _serial(second.server.cert)

        await until(renewed, within=PATIENCE, what="HTTPS serving the renewed certificate")


async def test_ssl_cert_reqs_asks_https_clients_for_a_certificate(tmp_path: Path) -> None:
    pki = make_pki(tmp_path)
    argv: tuple[str, ...] = ("--ssl-certfile", str(pki.server.cert), "--ssl-keyfile", str(pki.server.key))
    argv += ("--ssl-ca-certs", str(pki.ca.cert), "--ssl-cert-reqs", str(int(ssl.CERT_REQUIRED)))
    async with _served(*argv) as front:
        url = f"https://localhost:{front.http_port}/v1/models"
        with_cert = ssl.create_default_context(cafile=str(pki.ca.cert))
        with_cert.load_cert_chain(str(pki.client.cert), str(pki.client.key))
        async with httpx.AsyncClient(verify=with_cert, timeout=PATIENCE) as http:
            assert (await http.get(url)).status_code == 200
        without = ssl.create_default_context(cafile=str(pki.ca.cert))
        async with httpx.AsyncClient(verify=without, timeout=PATIENCE) as http:
            with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
                await http.get(url)
        stranger = ssl.create_default_context(cafile=str(pki.ca.cert))
        stranger.load_cert_chain(str(pki.stranger.cert), str(pki.stranger.key))
        async with httpx.AsyncClient(verify=stranger, timeout=PATIENCE) as http:
            with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
                await http.get(url)


def test_the_module_writes_the_docs() -> None:
    import subprocess

    out = subprocess.run(
        [sys.executable, "-m", "vllm_server.frontend_flags"], capture_output=True, text=True, check=True
    ).stdout
    assert out == frontend_flags.markdown()
