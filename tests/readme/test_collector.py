"""The README collector and its sessions on small Markdown files: annotations, state from block to block,
and the failures it must report (a failing block, a background server that dies, a taken port, a
server that does not exit 0 when stopped)."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from tests.readme.collector import ReadmeError, collect, ports_of, sessions
from tests.readme.runner import Runner
from tests.readme.session import SessionFailed

ROOT = Path(__file__).resolve().parents[2]
PORT = 18911
#: A server on PORT that exits 0 on SIGTERM (`CODE` on SIGTERM when given).
SERVER = (
    "python -c 'import http.server, signal, sys; "
    "signal.signal(signal.SIGTERM, lambda *a: sys.exit(int(sys.argv[1]))); "
    f'http.server.HTTPServer(("127.0.0.1", {PORT}), http.server.SimpleHTTPRequestHandler).serve_forever()'
    "' ${CODE:-0} &"
)
WAIT = f"until curl -sf localhost:{PORT}/ > /dev/null; do sleep 0.2; done"


def _readme(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "README.md"
    path.write_text(text, encoding="utf-8")
    return path


def _fence(language: str, body: str) -> str:
    return f"```{language}\n{body}\n```\n\n"


def test_blocks_sessions_and_skips_come_from_annotations(tmp_path: Path) -> None:
    readme = _readme(
        tmp_path,
        "# Title\n\n"
        + _fence("sh", "echo one")
        + "<!-- readme: skip: needs a GPU -->\n"
        + _fence("sh", "nvidia-smi")
        + "## Other\n\n<!-- readme: session other -->\n"
        + _fence("python", "print(1)")
        + _fence("yaml", "a: 1")
        + "<!-- readme: session main -->\n"
        + _fence("bash", f"curl localhost:{PORT}/x --grpc-port 50099"),
    )
    blocks = collect(readme)
    assert [(b.id, b.language, b.session, b.heading, b.skip) for b in blocks] == [
        ("README.md:3", "sh", "main", "Title", None),
        ("README.md:8", "sh", "main", "Title", "needs a GPU"),
        ("README.md:15", "python", "other", "Other", None),
        ("README.md:24", "sh", "main", "Other", None),
    ]
    by_session = sessions(blocks)
    assert list(by_session) == ["main", "other"]
    assert [b.id for b in by_session["main"]] == ["README.md:3", "README.md:24"]
    assert ports_of(by_session["main"]) == {PORT, 50099}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("<!-- readme: sklp: typo -->\n" + _fence("sh", "true"), "unknown readme annotation"),
        ("<!-- readme: session main -->\n\nsome text\n\n" + _fence("sh", "true"), "right before a fence"),
        ("<!-- readme: skip: why -->\n" + _fence("yaml", "a: 1"), "never runs"),
        (_fence("sh", "true") + "<!-- readme: skip: dangling -->\n", "right before a fence"),
    ],
)
def test_a_malformed_annotation_is_an_error(tmp_path: Path, text: str, error: str) -> None:
    with pytest.raises(ReadmeError, match=error):
        collect(_readme(tmp_path, text))


async def _run_all(readme: Path, workdir: Path) -> Runner:
    runner = Runner(collect(readme), [], ROOT, workdir)
    try:
        for block in runner.order():
            await runner.run(block)
    finally:
        await runner.close()
    return runner


async def test_variables_and_background_servers_carry_over_and_end_cleanly(tmp_path: Path) -> None:
    readme = _readme(
        tmp_path,
        _fence("sh", f"{SERVER}\n{WAIT}\nX=kept")
        + _fence("sh", f'test "$X" = kept\ncurl -sf localhost:{PORT}/ > /dev/null\ncommand -v vllm-frontend')
        + _fence("python", f"import urllib.request\nurllib.request.urlopen('http://localhost:{PORT}/')"),
    )
    await _run_all(readme, tmp_path / "work")


async def test_a_failing_command_fails_its_block_by_line(tmp_path: Path) -> None:
    readme = _readme(tmp_path, _fence("sh", "true") + _fence("sh", f"curl -sf localhost:{PORT + 1}/nothing"))
    with pytest.raises(SessionFailed, match=r"README\.md:5 \(sh block .*\) exited 7"):
        await _run_all(readme, tmp_path / "work")


async def test_a_failing_python_block_fails_with_its_output(tmp_path: Path) -> None:
    readme = _readme(tmp_path, _fence("python", "raise SystemExit('no such model')"))
    with pytest.raises(SessionFailed, match=r"(?s)README\.md:1 \(python block.*exited 1.*no such model"):
        await _run_all(readme, tmp_path / "work")


async def test_a_background_server_that_dies_fails_the_block_that_runs(tmp_path: Path) -> None:
    """Seen while the block runs: the block is stopped, not waited for."""
    dying = "python -c 'import sys, time; time.sleep(1); sys.exit(3)' &"
    readme = _readme(tmp_path, _fence("sh", "true") + _fence("sh", f"{dying}\nsleep 120"))
    started = time.monotonic()
    with pytest.raises(
        SessionFailed, match=r"README\.md:5 .*failed: `.*sys\.exit\(3\).*` .*exited while it ran"
    ):
        await _run_all(readme, tmp_path / "work")
    assert time.monotonic() - started < 60


async def test_a_background_process_that_ends_at_once_fails_the_block(tmp_path: Path) -> None:
    """Gone before the watch could see it, bash's `jobs` after the block tells; on a loaded machine the
    watch may see it first, while the block still runs. Either way the block fails, naming the process."""
    readme = _readme(tmp_path, _fence("sh", "python -c 'import sys; sys.exit(3)' &\nsleep 2"))
    with pytest.raises(
        SessionFailed,
        match=r"README\.md:1 .*failed: `.*sys\.exit\(3\).*` .*(ended \(Exit 3\)|exited while it ran)",
    ):
        await _run_all(readme, tmp_path / "work")


async def test_a_taken_port_stops_the_session_before_it_starts(tmp_path: Path) -> None:
    readme = _readme(tmp_path, _fence("sh", f"curl -sf localhost:{PORT}/"))
    with socket.socket() as taken:
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", PORT))
        taken.listen()
        with pytest.raises(SessionFailed, match=rf"ports its blocks use are taken:\n  {PORT}: pid \d+"):
            await _run_all(readme, tmp_path / "work")


async def test_a_server_that_does_not_exit_0_when_stopped_fails_the_last_block(tmp_path: Path) -> None:
    readme = _readme(tmp_path, _fence("sh", f"CODE=4\n{SERVER}\n{WAIT}"))
    with pytest.raises(SessionFailed, match=r"did not end cleanly:\n- `python -c .*` \(pid \d+\) exited 4"):
        await _run_all(readme, tmp_path / "work")
