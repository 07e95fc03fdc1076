"""The servers the benchmark starts: in their own process group, ready when a path answers 200, logged."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import httpx
import pytest

from vllm_frontend_testing.processes import free_port, frontend_argv, start_server


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _dead(pid: int) -> bool:
    """Gone, or a zombie (dead, waiting for whoever adopted it to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


async def test_a_server_is_ready_logged_and_stopped(tmp_path: Path, tiny_model_dir: Path) -> None:
    port = free_port()
    argv = frontend_argv(
        "serve", "--mock", "--tokenizer", str(tiny_model_dir), "--port", str(port), "--grpc-port", "-1"
    )
    log = tmp_path / "mock.log"
    server = await start_server("mock", argv, http_port=port, ready_path="/ready", log_path=log)
    try:
        assert os.getpgid(server.pid) == server.pid  # it leads its own group
        async with httpx.AsyncClient(base_url=server.base_url) as http:
            assert (await http.get("/ready")).status_code == 200
    finally:
        await server.stop()
    assert server.proc is not None and server.proc.returncode == 0  # SIGTERM drained it
    assert not _group_alive(server.pid)
    logged = log.read_text()
    assert f"listening: HTTP on 127.0.0.1:{port}" in logged
    assert server.log_tail(1) == logged.splitlines()[-1]


async def test_a_server_that_never_serves_is_killed_with_its_children() -> None:
    # Answers nothing, ignores SIGTERM, and so does the child it leaves behind (SIG_IGN is inherited).
    code = (
        "import os, signal, subprocess, sys\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "print('child', child.pid, flush=True)\n"
        "signal.pause()\n"
    )
    argv = [sys.executable, "-c", code]
    with pytest.raises(RuntimeError, match="did not happen within") as failed:
        await start_server("stubborn", argv, http_port=free_port(), ready_path="/", within=2)
    found = re.search(r"child (\d+)", str(failed.value))  # its log comes with the error
    assert found is not None
    assert _dead(int(found.group(1)))


async def test_a_server_that_exits_fails_with_its_log(tmp_path: Path) -> None:
    argv = [sys.executable, "-c", "print('bad flag --nope'); raise SystemExit(2)"]
    log = tmp_path / "b.log"
    with pytest.raises(RuntimeError, match="exited before it answered 200 on /ready") as failed:
        await start_server("broken", argv, http_port=free_port(), ready_path="/ready", log_path=log)
    assert "bad flag --nope" in str(failed.value)
    assert log.read_text() == "bad flag --nope\n"
