"""A start that cannot serve says why and exits 1, as vLLM's server does; never a clean 0.

Each case runs `vllm-frontend serve ...` as a user would (a process, its exit code and its output), with
a bound on how long the failure may take to show. A supervisor (systemd, Kubernetes) restarts a process
that exits non-zero; one that exits 0 after "draining" looks like a clean stop.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from vllm_frontend_testing.processes import Frontend, answers_200, free_port, frontend_argv, until

#: A failure that needs no engine shows within this many seconds (the CLI imports no vLLM for it).
FAST = 30.0
#: One that needs vLLM imported and the engine's config built: the acceptance bound.
ENGINE = 60.0
#: The same, for cases that run beside each other.
ENGINE_BESIDE = 120.0


@dataclass
class Exited:
    """How a `vllm-frontend serve` process ended."""

    code: int
    output: str
    seconds: float


async def _serve_until_exit(*args: str, within: float, on_line: str | None = None, then: str = "") -> Exited:
    """Run `vllm-frontend serve ARGS` until it exits (within `within` s, else the test fails)."""
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *frontend_argv("serve", *args),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        process_group=0,
    )
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        async with asyncio.timeout(within):
            async for raw in proc.stdout:
                lines.append(raw.decode(errors="replace").rstrip())
            code = await proc.wait()
    except TimeoutError:
        raise AssertionError(
            f"still running after {within} s; its output ends:\n" + "\n".join(lines[-30:])
        ) from None
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    return Exited(code, "\n".join(lines), time.monotonic() - started)


def _assert_failed(exited: Exited, *expected: str) -> None:
    assert exited.code == 1, f"exit code {exited.code}; output:\n{exited.output[-3000:]}"
    lines = exited.output.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Error: ")]
    assert starts, f"no 'Error: ' line; output:\n{exited.output[-3000:]}"
    # the last error, whole: a cause may span lines (pydantic's ValidationError names the field first)
    error = "\n".join(lines[starts[-1] :])
    for text in expected:
        assert text in error, error
    if "listening: " not in exited.output:
        assert "draining" not in exited.output  # a failed start is not a shutdown


@contextmanager
def _busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


MOCK = ("--mock", "--served-model-name", "tiny")


async def test_an_http_port_in_use_stops_the_start() -> None:
    with _busy_port() as port:
        exited = await _serve_until_exit(*MOCK, "--port", str(port), "--grpc-port", "-1", within=FAST)
    _assert_failed(exited, f"HTTP cannot listen on 127.0.0.1:{port}", "Address already in use")


async def test_a_grpc_port_in_use_stops_the_start() -> None:
    with _busy_port() as port:
        exited = await _serve_until_exit(
            *MOCK, "--port", str(free_port()), "--grpc-port", str(port), within=FAST
        )
    _assert_failed(exited, f"gRPC cannot listen on 127.0.0.1:{port}")


async def test_tls_files_that_cannot_be_read_stop_the_start(tmp_path: Path) -> None:
    missing = tmp_path / "missing.pem"
    exited = await _serve_until_exit(
        *MOCK, "--ssl-certfile", str(missing), "--ssl-keyfile", str(missing), within=FAST
    )
    _assert_failed(exited, f"--ssl-certfile {str(missing)!r} cannot be read", "No such file or directory")


async def test_tls_files_that_are_not_pem_stop_the_start(tmp_path: Path) -> None:
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    exited = await _serve_until_exit(
        *MOCK, "--port", str(free_port()), "--grpc-port", "-1",
        "--ssl-certfile", str(garbage), "--ssl-keyfile", str(garbage), within=FAST,
    )  # fmt: skip
    _assert_failed(exited, "HTTP cannot serve on 127.0.0.1")


@pytest.mark.parametrize(
    ("target", "says"),
    [
        ("foo://bar", "gRPC knows no scheme 'foo'"),
        ("ipv4:not-an-ip:50051", "'not-an-ip' (in 'not-an-ip:50051') is not an IPv4 address"),
        ("127.0.0.1:50051\n/root/x", "is not a port number"),
    ],
)
async def test_a_remote_target_that_cannot_be_parsed_stops_the_start(target: str, says: str) -> None:
    exited = await _serve_until_exit("--remote", target, within=FAST)
    _assert_failed(exited, f"--remote {target!r}", says)


def _tokenizer_without_think(tiny_model_dir: Path, out: Path) -> Path:
    """The tiny tokenizer without `<think>` / `</think>` (deepseek_r1's parser needs both)."""
    out.mkdir()
    data = json.loads((tiny_model_dir / "tokenizer.json").read_text())
    gone = {t["id"] for t in data["added_tokens"] if t["content"] in ("<think>", "</think>")}
    data["added_tokens"] = [t for t in data["added_tokens"] if t["id"] not in gone]
    vocab = data["model"]["vocab"]
    for token in ("<think>", "</think>"):
        vocab.pop(token, None)
    (out / "tokenizer.json").write_text(json.dumps(data))
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        if (tiny_model_dir / name).exists():
            config = json.loads((tiny_model_dir / name).read_text())
            config.pop("added_tokens_decoder", None)
            extra = config.get("additional_special_tokens") or []
            config["additional_special_tokens"] = [t for t in extra if t not in ("<think>", "</think>")]
            (out / name).write_text(json.dumps(config))
    return out


async def test_a_parser_the_tokenizer_cannot_serve_stops_the_start(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    tokenizer = _tokenizer_without_think(tiny_model_dir, tmp_path / "tok")
    exited = await _serve_until_exit(
        *MOCK, "--tokenizer", str(tokenizer), "--port", str(free_port()), "--grpc-port", "-1",
        "--reasoning-parser", "deepseek_r1", within=FAST,
    )  # fmt: skip
    _assert_failed(exited, "--reasoning-parser deepseek_r1 cannot be used with the tokenizer")


# ---- failures of the engine itself: vLLM imported, its config built, its processes started ------------


async def test_a_model_directory_that_does_not_exist_stops_the_start() -> None:
    exited = await _serve_until_exit(
        "--model", "/nonexistent/dir", "--port", str(free_port()), "--grpc-port", "-1", within=ENGINE
    )
    _assert_failed(exited, "/nonexistent/dir")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def refused_by_the_engines_config(
    tiny_model_dir: Path,
) -> AsyncIterator[dict[str, asyncio.Task[Exited]]]:
    """Starts refused once vLLM is imported, run beside each other (each imports vLLM: CPU-bound)."""
    model = str(tiny_model_dir)
    port = ("--port", str(free_port()), "--grpc-port", "-1")
    runs = {
        # parsed fine, refused by vLLM's config (the model's own limit is 512)
        "max_model_len": ("--model", model, "--max-model-len", "100000", *port),
        "lora": ("--model", model, "--enable-lora", "--lora-modules", "sql=/no/such/adapter", *port),
    }
    tasks = {
        name: asyncio.create_task(_serve_until_exit(*argv, within=ENGINE_BESIDE))
        for name, argv in runs.items()
    }
    yield tasks
    for task in tasks.values():
        task.cancel()
    await asyncio.gather(*tasks.values(), return_exceptions=True)


async def test_engine_arguments_vllm_rejects_stop_the_start(
    refused_by_the_engines_config: dict[str, asyncio.Task[Exited]],
) -> None:
    exited = await refused_by_the_engines_config["max_model_len"]
    _assert_failed(exited, "max_model_len (100000) is greater than the derived max_model_len")


async def test_a_lora_directory_that_does_not_exist_stops_the_start(
    refused_by_the_engines_config: dict[str, asyncio.Task[Exited]],
) -> None:
    exited = await refused_by_the_engines_config["lora"]
    _assert_failed(exited, "the LoRA adapter 'sql' has no directory '/no/such/adapter'")


async def test_an_engine_killed_while_starting_stops_the_start(tiny_model_dir: Path) -> None:
    # As the OOM killer would: the engine core process dies before it is ready.
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        *frontend_argv(
            "serve", "--model", str(tiny_model_dir), "--dtype", "float32", "--max-model-len", "512",
            "--enforce-eager", "--port", str(free_port()), "--grpc-port", "-1",
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        process_group=0,
    )  # fmt: skip
    lines: list[str] = []
    reader = asyncio.create_task(_collect(proc, lines))
    try:
        engine = await _engine_core_of(proc.pid, within=300)
        killed = time.monotonic()
        os.kill(engine, signal.SIGKILL)
        async with asyncio.timeout(ENGINE):
            code = await proc.wait()
            await reader
        noticed = time.monotonic() - killed
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
    exited = Exited(code, "\n".join(lines), time.monotonic() - started)
    _assert_failed(exited, "Engine core initialization failed")
    assert noticed < 30, f"the frontend noticed the engine's death after {noticed:.1f} s"


async def _collect(proc: asyncio.subprocess.Process, lines: list[str]) -> None:
    assert proc.stdout is not None
    async for raw in proc.stdout:
        lines.append(raw.decode(errors="replace").rstrip())


async def _engine_core_of(pid: int, *, within: float) -> int:
    """The pid of the `VLLM::EngineCore` process under `pid`, once it exists (state only /proc shows)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        for child in _descendants(pid):
            if b"EngineCore" in _cmdline(child):
                return child
        await asyncio.sleep(0.1)
    raise AssertionError(f"no EngineCore process under {pid} within {within} s")


def _descendants(pid: int) -> Iterator[int]:
    direct: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):  # a child belongs to the thread that started it
        try:
            direct += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            continue
    for child in direct:
        yield child
        yield from _descendants(child)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


# ---- a router whose workers are not up yet: not a failure -------------------------------------------


async def test_a_router_started_before_its_worker_waits_unready_then_serves() -> None:
    worker_grpc = free_port()
    router = await Frontend.start(
        "--remote", f"127.0.0.1:{worker_grpc}", "--grpc-port", "-1", "--served-model-name", "tiny"
    )
    try:
        async with httpx.AsyncClient(base_url=router.base_url, timeout=30) as http:
            assert (await http.get("/health")).status_code == 200  # alive
            assert (await http.get("/ready")).status_code == 503  # not serving yet
            body = {"model": "tiny", "prompt": "Hi", "max_tokens": 2}
            waiting = await http.post("/v1/completions", json=body)
            assert waiting.status_code == 503, waiting.text
            worker = await Frontend.start(
                "--mock", "--grpc-port", str(worker_grpc), "--served-model-name", "tiny"
            )
            try:
                await until(
                    lambda: answers_200(router.base_url, "/ready"), within=60, what="the router ready"
                )
                served = await http.post("/v1/completions", json=body)
                assert served.status_code == 200, served.text
            finally:
                await worker.stop()
    finally:
        await router.stop()
    assert router.proc is not None and router.proc.returncode == 0
    assert any(f"waiting for workers at 127.0.0.1:{worker_grpc}" in line for line in router.log)
    assert any(f"connected: workers at 127.0.0.1:{worker_grpc} serve" in line for line in router.log)


async def test_a_router_whose_worker_refuses_it_stops_the_start() -> None:
    # A worker that answers, but refuses the router's key: waiting would not change that.
    worker = await Frontend.start("--mock", "--grpc-port", "0", "--api-key", "secret")
    try:
        exited = await _serve_until_exit(
            "--remote", worker.grpc_target, "--grpc-port", "-1", "--port", str(free_port()), within=FAST
        )
    finally:
        await worker.stop()
    _assert_failed(exited, "the workers cannot be served: a valid API key is required")
