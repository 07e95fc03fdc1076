"""The README's shell and Python blocks, collected so that the test suite runs each one as written.

Markdown is read by markdown-it-py (CommonMark): a fenced block whose info string is `sh`, `bash` or
`shell` is a shell block, `python` a Python block; other fences (`yaml`, diagrams) are text.

**Sessions.** The blocks run in *sessions*, in README order within each. A session is one `bash` process
started with `set -euo pipefail` and the workspace's environment active (`source .venv/bin/activate`, as
the README asks of its reader), in the repository's root: a shell block is sourced in it, so variables
(`M=...`) and processes started in the background (`... &`) persist from block to block. Its Python
blocks run after the shell blocks before them, each as a script of its own (the venv's python, a
temporary working directory) that must exit 0. A block belongs to the session named by the nearest
`session` annotation before it (`main` before any); sessions run one after another, in the order of
their first block, so a session's examples may be spread over the README.

**Servers.** A block that starts a server starts it with `&` and waits for it with a line the reader
would type too (`until curl -sf localhost:8000/ready; do sleep 1; done`). A process a block starts in the
background must run until its session ends: one that exits earlier (a server that failed to start, or
crashed) fails the block that was running, with the session's log tail. At the end of a session every
server of it (each process of the session listening on TCP whose parent does not) gets SIGTERM, as an
operator stops one; each background job must then exit 0 within a grace period, and nothing the session
started may be left running (what is, is killed and fails the session's last block). Before a session
starts, every port its blocks name must be free (`localhost:N`, `127.0.0.1:N`, `--port N`, `--grpc-port N`,
`*_PORT=N`, `port=N`).

**Annotations**, HTML comments right before a fence (invisible on the rendered page), one per comment:

- `<!-- readme: session NAME -->` — this block and the ones after it run in session NAME;
- `<!-- readme: skip: REASON -->` — this block is not run, for REASON (a GPU, the suite itself, ...).
  A skipped block is left out of the collection, not reported as a skipped test (CI fails on skips).

Any other `<!-- readme: ... -->` comment, or one that annotates no block, is an error.

The test of a block is `README.md:LINE` (the line of its opening fence); running one alone runs the blocks
of its session before it first. `tests/readme/checks.py` adds assertions on the processes a block leaves
running (before or after it, keyed by text the block contains).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from markdown_it import MarkdownIt

__all__ = ["Block", "ReadmeError", "collect", "ports_of", "sessions"]

Language = Literal["sh", "python"]

#: Fence info strings that run, by language.
_LANGUAGES: dict[str, Language] = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python"}
_ANNOTATION = re.compile(r"^<!--\s*readme:\s*(?P<body>.*?)\s*-->\s*$", re.S)
_SESSION = re.compile(r"^session\s+(?P<name>[\w.-]+)$")
_SKIP = re.compile(r"^skip:\s*(?P<reason>\S.*)$", re.S)
#: How a block names a port on this machine.
_PORTS = (
    re.compile(r"\b(?:localhost|127\.0\.0\.1):(\d{2,5})\b"),
    re.compile(r"--(?:grpc-)?port[= ](\d{2,5})\b"),
    re.compile(r"_PORT=(\d{2,5})\b"),
    re.compile(r"\b(?:grpc_)?port=(\d{2,5})\b"),
)
DEFAULT_SESSION = "main"


class ReadmeError(ValueError):
    """The README's annotations are malformed."""


@dataclass(frozen=True)
class Block:
    """A fenced block of the README that runs."""

    path: Path
    #: The line of the opening fence, 1-based.
    line: int
    language: Language
    text: str
    session: str
    #: The heading the block is under.
    heading: str
    #: Why the block is not run; None: it is run.
    skip: str | None = None

    @property
    def id(self) -> str:
        """`README.md:LINE`."""
        return f"{self.path.name}:{self.line}"


def collect(path: Path) -> list[Block]:
    """Every shell and Python block of the Markdown file at `path`, in document order."""
    tokens = MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8"))
    blocks: list[Block] = []
    session, heading = DEFAULT_SESSION, ""
    pending: list[tuple[int, str]] = []  # annotations waiting for their block: (line, body)
    for i, token in enumerate(tokens):
        line = (token.map[0] + 1) if token.map else 0
        if token.type == "inline" and i > 0 and tokens[i - 1].type == "heading_open":
            heading = token.content
        annotation = _ANNOTATION.match(token.content) if token.type == "html_block" else None
        if annotation is not None:
            pending.append((line, annotation.group("body")))
            continue
        if pending and token.type != "fence":
            raise ReadmeError(
                f"{path.name}:{pending[0][0]}: a readme annotation must come right before a fence"
            )
        if token.type != "fence":
            continue
        skip = None
        for at, body in pending:
            if (named := _SESSION.match(body)) is not None:
                session = named.group("name")
            elif (skipped := _SKIP.match(body)) is not None:
                skip = skipped.group("reason")
            else:
                raise ReadmeError(f"{path.name}:{at}: unknown readme annotation {body!r}")
        language = _LANGUAGES.get(token.info.strip().split(" ")[0])
        if language is None:
            if pending:
                raise ReadmeError(f"{path.name}:{line}: annotated, but a ```{token.info} block never runs")
            continue
        pending = []
        blocks.append(Block(path, line, language, token.content, session, heading, skip))
    if pending:
        raise ReadmeError(f"{path.name}:{pending[0][0]}: a readme annotation must come right before a fence")
    return blocks


def sessions(blocks: list[Block]) -> dict[str, list[Block]]:
    """The blocks that run, by session, in the order the sessions run (that of their first block)."""
    found: dict[str, list[Block]] = {}
    for block in blocks:
        if block.skip is None:
            found.setdefault(block.session, []).append(block)
    return found


def ports_of(blocks: list[Block]) -> set[int]:
    """The ports on this machine that `blocks` name."""
    return {int(port) for block in blocks for pattern in _PORTS for port in pattern.findall(block.text)}
