"""The harness's `exits_cleanly`, which the drain tests rely on, fails each way a stop is not clean: a
non-zero exit, no exit at all, and an exit that leaves a process of its group running (as a worker whose
engine core outlives it would)."""

from __future__ import annotations

import signal
import sys

import pytest

from vllm_frontend_testing.processes import free_port, start_server

#: A server on `port` that, on SIGTERM, exits 0 (`clean`), exits 3 (`fails`), ignores it (`ignores`), or
#: exits 0 leaving the child it started running (`leaves`).
SERVER = """
import http.server, os, signal, subprocess, sys
mode, port = sys.argv[1], int(sys.argv[2])
if mode == "leaves":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])

def on_term(signum, frame):
    if mode != "ignores":
        os._exit(3 if mode == "fails" else 0)

signal.signal(signal.SIGTERM, on_term)
http.server.ThreadingHTTPServer(("127.0.0.1", port), http.server.SimpleHTTPRequestHandler).serve_forever()
"""


@pytest.mark.parametrize(
    ("mode", "failure", "code"),
    [
        ("clean", None, 0),
        ("fails", "exited 3", 3),
        ("ignores", "did not exit within 1 s: killed", -signal.SIGKILL),
        ("leaves", r"exited 0 but left \d+ \(python\) running: killed", 0),
    ],
)
async def test_exits_cleanly_fails_every_stop_that_is_not_clean(
    mode: str, failure: str | None, code: int
) -> None:
    port = free_port()
    server = await start_server(
        mode, [sys.executable, "-c", SERVER, mode, str(port)], http_port=port, ready_path="/", within=60
    )
    try:
        server.signal(signal.SIGTERM)
        if failure is None:
            await server.exits_cleanly(within=30)
        else:
            with pytest.raises(AssertionError, match=failure):
                await server.exits_cleanly(within=1)
        assert server.processes_left() == []  # what a failed check leaves is killed
    finally:
        assert await server.stop(5) == code  # how it exited (or was killed)
