"""Parity: `load_image` against vLLM 0.32's MediaConnector on the same URLs.

A local HTTP server (stdlib, in a thread) serves images, broken bodies, redirects, errors and a request
that never answers; data: and file: URLs are built in the test. Each success case compares pixels,
mode, encoded bytes and conversion with vLLM's `MediaWithBytes`. Each failure case checks that both
refuse, that our message has the shape `_Failure` records, that vLLM's server answers the status
`_Failure` records, and that the messages are equal (or share the prefix before a number that depends
on network chunking) wherever vLLM's is deterministic.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import io
import os
import re
import socket
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import httpx
import numpy as np
import pytest
import pytest_asyncio
import vllm.envs
from PIL import Image
from vllm.connections import HTTPConnection
from vllm.entrypoints.serve.exception_handling.error_response import create_error_response
from vllm.exceptions import VLLMUnprocessableEntityError, VLLMValidationError
from vllm.multimodal.media import MediaConnector, MediaWithBytes
from vllm.multimodal.media.image import ImageMediaIO

from vllm_llm._errors import InvalidRequest
from vllm_llm.multimodal import _media
from vllm_llm.multimodal._media import LoadedImage, MediaOptions, load_image

_Failure = _media._Failure
LIMIT_MB = 1
LIMIT = LIMIT_MB * 1024 * 1024
TIMEOUT = 0.5


# --- images ------------------------------------------------------------------------------------------


def _encode(image: Image.Image, fmt: str, **params: Any) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **params)
    return buffer.getvalue()


def _gradient(mode: str, size: tuple[int, int] = (32, 24)) -> Image.Image:
    width, height = size
    channels = len(mode)
    values = (np.arange(width * height * channels, dtype=np.uint32) * 37 % 251).astype(np.uint8)
    return Image.frombytes(mode, size, values.tobytes())


def _png_header_only(width: int, height: int) -> bytes:
    """A PNG whose header claims `width` x `height`: enough for Pillow's size checks, no pixels."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 16))


def _exif_rotated_jpeg() -> bytes:
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 degrees clockwise to display
    return _encode(_gradient("RGB"), "JPEG", exif=exif)


def _transparent_palette_png() -> bytes:
    image = _gradient("L").convert("P")
    return _encode(image, "PNG", transparency=0)


PNG = _encode(_gradient("RGB"), "PNG")
IMAGES: dict[str, bytes] = {
    "png": PNG,
    "jpeg": _encode(_gradient("RGB"), "JPEG", quality=90),
    "webp": _encode(_gradient("RGB"), "WEBP", lossless=True),
    "gif": _encode(_gradient("RGB").convert("P"), "GIF"),
    "rgba": _encode(_gradient("RGBA"), "PNG"),
    "la": _encode(_gradient("LA"), "PNG"),
    "grey": _encode(_gradient("L"), "PNG"),
    "palette-transparent": _transparent_palette_png(),
    "exif-rotated": _exif_rotated_jpeg(),
}
NOT_IMAGE = b"this is not an image, just text"
TRUNCATED_PNG = PNG[: len(PNG) // 2]
#: Its compressed stream zeroed: Pillow's first load fails, and vLLM (which swallows that failure while
#: applying the EXIF orientation) loads it again, which then succeeds with what was decoded.
BROKEN_STREAM_PNG = PNG[: PNG.index(b"IDAT") + 4] + bytes(len(PNG) - PNG.index(b"IDAT") - 4)
BOMB_PNG = _png_header_only(20_000, 20_000)


def _data_url(data: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode()}"


# --- the HTTP server ---------------------------------------------------------------------------------


class _Site:
    """What the server answers on each path, and how often each path (with its query) was asked."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.hits: Counter[str] = Counter()
        self._lock = threading.Lock()

    def hit(self, path: str) -> int:
        with self._lock:
            self.hits[path] += 1
            return self.hits[path]


def _handler_for(site: _Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            hit = site.hit(self.path)
            route = self.path.partition("?")[0]
            # The client may stop reading: what the size limit and the timeout do.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._answer(route, hit)

        def _answer(self, route: str, hit: int) -> None:
            name = route.removeprefix("/image/")
            if name in IMAGES:
                self._send(200, IMAGES[name])
            elif route == "/text":
                self._send(200, NOT_IMAGE, content_type="text/plain")
            elif route == "/truncated":
                self._send(200, TRUNCATED_PNG)
            elif route == "/chunked":
                self._send(200, PNG, length=False)
            elif route == "/big":
                self._send(200, PNG + bytes(LIMIT + 1 - len(PNG)))
            elif route == "/big-chunked":
                self._send(200, PNG + bytes(2 * LIMIT), length=False)
            elif route == "/endless":
                self._endless()
            elif route == "/redirect":
                self._send(302, b"moved", location="/image/png")
            elif route == "/redirect-loop":
                self._send(302, b"", location="/redirect-loop")
            elif route == "/recover":
                self._send(503, b"") if hit == 1 else self._send(200, PNG)
            elif route == "/hang":
                site.release.wait()
            elif route == "/hang-once":
                site.release.wait() if hit == 1 else self._send(200, PNG)
            else:
                status = {"/missing": 404, "/gone": 410, "/too-many": 429, "/unavailable": 503}[route]
                self._send(status, b"")

        def _send(
            self,
            status: int,
            body: bytes,
            *,
            content_type: str = "image/png",
            length: bool = True,
            location: str | None = None,
        ) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            if length:
                self.send_header("Content-Length", str(len(body)))
            if location is not None:
                self.send_header("Location", location)
            self.end_headers()
            self.wfile.write(body)

        def _endless(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.end_headers()
            self.wfile.write(PNG)
            for _ in range(1024):  # 64 MiB at most, should a client never stop
                self.wfile.write(bytes(64 * 1024))

    return Handler


@dataclasses.dataclass
class World:
    """The server's base URL and site, the allowed local directory, and vLLM's HTTP connection."""

    base: str
    site: _Site
    media_dir: Path
    connection: HTTPConnection


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[str, _Site]]:
    site = _Site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", site
    site.release.set()
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture(scope="module")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("media")
    allowed = root / "allowed"
    (allowed / "sub").mkdir(parents=True)
    (allowed / "image.png").write_bytes(PNG)
    (allowed / "a b.png").write_bytes(IMAGES["rgba"])
    (root / "outside").mkdir()
    (root / "outside" / "image.png").write_bytes(PNG)
    return allowed


@pytest_asyncio.fixture(scope="module")
async def connection() -> AsyncIterator[HTTPConnection]:
    """vLLM's HTTP connection, its aiohttp session closed at the end."""
    connection = HTTPConnection()
    yield connection
    if connection._async_client is not None:
        await connection._async_client.close()


@pytest.fixture
def world(
    site: tuple[str, _Site], media_dir: Path, connection: HTTPConnection, monkeypatch: pytest.MonkeyPatch
) -> World:
    """The shared environment for both sides: vLLM reads it at each call, ours through `from_env`."""
    vllm.envs.disable_envs_cache()
    monkeypatch.delenv("VLLM_MEDIA_CACHE", raising=False)
    monkeypatch.delenv("VLLM_MAX_IMAGE_PIXELS", raising=False)
    monkeypatch.setenv("VLLM_IMAGE_FETCH_TIMEOUT", str(TIMEOUT))
    monkeypatch.setenv("VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB", str(LIMIT_MB))
    monkeypatch.setenv("VLLM_MEDIA_URL_ALLOW_REDIRECTS", "1")
    monkeypatch.setenv("VLLM_MEDIA_FETCH_MAX_RETRIES", "1")
    base, the_site = site
    return World(base, the_site, media_dir, connection)


# --- running both sides ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Setup:
    """One URL and the settings both sides get."""

    url: Callable[[World], str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    io: dict[str, Any] = dataclasses.field(default_factory=dict)
    local: bool = True
    domains: tuple[str, ...] = ()


async def _ours(world: World, setup: Setup, url: str, client: httpx.AsyncClient | None = None) -> LoadedImage:
    local = str(world.media_dir) if setup.local else ""
    options = MediaOptions.from_env(local, setup.domains)
    io_options: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in setup.io.items()}
    return await load_image(url, dataclasses.replace(options, **io_options), client=client)


async def _theirs(world: World, setup: Setup, url: str) -> MediaWithBytes[Image.Image]:
    connector = MediaConnector(
        connection=world.connection,
        allowed_local_media_path=str(world.media_dir) if setup.local else "",
        allowed_media_domains=list(setup.domains) or None,
    )
    image_io = ImageMediaIO(**setup.io)
    timeout = float(os.environ["VLLM_IMAGE_FETCH_TIMEOUT"])
    return await connector.load_from_url_async(url, image_io, fetch_timeout=timeout)  # type: ignore[arg-type]


async def _both(world: World, setup: Setup, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    """Both sides on the same URL at once (results or exceptions)."""
    for name, value in setup.env.items():
        monkeypatch.setenv(name, value)
    url = setup.url(world)
    ours, theirs = await asyncio.gather(
        _ours(world, setup, url), _theirs(world, setup, url), return_exceptions=True
    )
    return ours, theirs


def _io_config(loaded: LoadedImage) -> dict[str, Any] | None:
    if loaded.conversion is None:
        return None
    return {
        "image_mode": loaded.conversion.image_mode,
        "rgba_background_color": loaded.conversion.rgba_background_color,
    }


def _assert_same_image(ours: LoadedImage, theirs: MediaWithBytes[Image.Image]) -> None:
    assert ours.image.mode == theirs.media.mode
    assert ours.image.size == theirs.media.size
    np.testing.assert_array_equal(np.asarray(ours.image), np.asarray(theirs.media))
    assert ours.original_bytes == theirs.original_bytes
    assert _io_config(ours) == theirs.io_config


def _shown(exc: BaseException) -> str:
    """The message vLLM's server shows for `exc`, before its parameter suffix and path scrubbing."""
    if isinstance(exc, (VLLMUnprocessableEntityError, VLLMValidationError)):
        text = str(exc.args[0])
    else:
        text = str(exc)
    return re.sub(r" at 0x[0-9a-fA-F]+>", ">", text)


def _shape(failure: _media._Failure) -> re.Pattern[str]:
    """A pattern of the messages `failure` renders: its template with each field as a wildcard."""
    pieces = re.split(r"\{[^{}]*\}", failure.template)
    return re.compile(".*".join(re.escape(piece) for piece in pieces), re.DOTALL)


# --- success -----------------------------------------------------------------------------------------


def _http(path: str) -> Callable[[World], str]:
    return lambda world: world.base + path


def _file(name: str) -> Callable[[World], str]:
    return lambda world: "file://" + quote(str(world.media_dir / name))


def _data(data: bytes, media_type: str = "image/png") -> Callable[[World], str]:
    return lambda world: _data_url(data, media_type)


SUCCESSES: dict[str, Setup] = {
    **{f"data-{name}": Setup(_data(data)) for name, data in IMAGES.items()},
    "data-media-type-params": Setup(lambda w: _data_url(PNG).replace(";base64", ";charset=x;base64")),
    "data-broken-stream-accepted": Setup(_data(BROKEN_STREAM_PNG)),
    "data-uppercase-scheme": Setup(lambda w: "DATA" + _data_url(PNG)[4:]),
    "data-keep-mode": Setup(_data(IMAGES["rgba"]), io={"image_mode": None}),
    "data-black-background": Setup(_data(IMAGES["rgba"]), io={"rgba_background_color": [0, 0, 0]}),
    "data-to-grey": Setup(_data(IMAGES["rgba"]), io={"image_mode": "L"}),
    "http-png": Setup(_http("/image/png")),
    "http-jpeg": Setup(_http("/image/jpeg")),
    "http-rgba": Setup(_http("/image/rgba")),
    "http-no-length": Setup(_http("/chunked")),
    "http-redirect": Setup(_http("/redirect")),
    "http-allowed-domain": Setup(_http("/image/png"), domains=("example.com", "127.0.0.1")),
    "file-png": Setup(_file("image.png")),
    "file-quoted-name": Setup(_file("a b.png")),
}


@pytest.mark.parametrize("setup", SUCCESSES.values(), ids=SUCCESSES.keys())
async def test_loads_as_vllm(world: World, setup: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = await _both(world, setup, monkeypatch)
    assert isinstance(theirs, MediaWithBytes), theirs
    assert isinstance(ours, LoadedImage), ours
    _assert_same_image(ours, theirs)


# --- failure -----------------------------------------------------------------------------------------

Compare = Literal["equal", "prefix", "status"]


@dataclasses.dataclass(frozen=True)
class Refusal:
    """A URL both sides refuse: how ours words it, and how much of vLLM's wording to compare."""

    setup: Setup
    failure: _media._Failure
    compare: Compare = "equal"


def _refused(
    url: Callable[[World], str], failure: _media._Failure, compare: Compare = "equal", **kw: Any
) -> Refusal:
    return Refusal(Setup(url, **kw), failure, compare)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


REFUSALS: dict[str, Refusal] = {
    # data: URLs
    "data-no-comma": _refused(lambda w: "data:image/png;base64", _Failure.DATA_URL_NO_COMMA),
    "data-no-comma-long": _refused(lambda w: "data:image/png;base64" + "A" * 64, _Failure.DATA_URL_NO_COMMA),
    "data-percent-encoded": _refused(lambda w: "data:image/png,abc", _Failure.DATA_URL_NOT_BASE64),
    "data-base64-not-last": _refused(lambda w: "data:image/png;base64;x=y,abc", _Failure.DATA_URL_NOT_BASE64),
    "data-bad-padding": _refused(lambda w: "data:image/png;base64,abc", _Failure.BAD_BASE64),
    "data-extra-padding": _refused(lambda w: "data:image/png;base64,YWJj====", _Failure.BAD_BASE64),
    "data-newline": _refused(lambda w: _data_url(PNG)[:40] + "\n" + _data_url(PNG)[40:], _Failure.BAD_BASE64),
    "data-not-image": _refused(_data(NOT_IMAGE), _Failure.UNDECODABLE),
    "data-empty": _refused(lambda w: "data:image/png;base64,", _Failure.UNDECODABLE),
    "data-truncated": _refused(_data(TRUNCATED_PNG), _Failure.UNDECODABLE),
    "data-too-many-pixels": _refused(
        _data(PNG), _Failure.TOO_MANY_PIXELS, env={"VLLM_MAX_IMAGE_PIXELS": "100"}
    ),
    "data-bomb": _refused(_data(BOMB_PNG), _Failure.PLAIN_ERROR),
    "data-bomb-under-small-limit": _refused(
        _data(BOMB_PNG), _Failure.PLAIN_ERROR, env={"VLLM_MAX_IMAGE_PIXELS": "100"}
    ),
    "data-bad-mode": _refused(_data(PNG), _Failure.PLAIN_VALUE_ERROR, io={"image_mode": "XYZ"}),
    # http(s): URLs
    "http-not-image": _refused(_http("/text"), _Failure.UNDECODABLE),
    "http-truncated": _refused(_http("/truncated"), _Failure.UNDECODABLE),
    "http-too-large": _refused(_http("/big"), _Failure.TOO_LARGE),
    "http-too-large-no-length": _refused(_http("/big-chunked"), _Failure.TOO_LARGE, "prefix"),
    "http-endless": _refused(_http("/endless"), _Failure.TOO_LARGE, "prefix"),
    "http-redirect-off": _refused(
        _http("/redirect"), _Failure.UNDECODABLE, env={"VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0"}
    ),
    "http-redirect-loop": _refused(_http("/redirect-loop"), _Failure.HTTP_STATUS),
    "http-404": _refused(_http("/missing"), _Failure.HTTP_STATUS),
    "http-410": _refused(_http("/gone"), _Failure.HTTP_STATUS),
    "http-429": _refused(_http("/too-many"), _Failure.UPSTREAM_STATUS),
    "http-503": _refused(_http("/unavailable"), _Failure.UPSTREAM_STATUS),
    "http-timeout": _refused(_http("/hang"), _Failure.TIMEOUT, "status"),
    "http-refused": _refused(lambda w: f"http://127.0.0.1:{_free_port()}/x.png", _Failure.NETWORK, "status"),
    "http-domain": _refused(_http("/image/png"), _Failure.DOMAIN, domains=("example.com", "images.example")),
    "http-unknown-scheme": _refused(lambda w: w.base.replace("http", "httpx") + "/x", _Failure.INVALID_URL),
    "http-no-host": _refused(lambda w: "http:///x.png", _Failure.INVALID_URL),
    # other schemes
    "ftp": _refused(lambda w: "ftp://example.com/x.png", _Failure.SCHEME),
    "no-scheme": _refused(lambda w: "example.com/x.png", _Failure.SCHEME),
    "no-scheme-port": _refused(lambda w: "example.com:80/x.png", _Failure.SCHEME),
    # file: URLs
    "file-no-local-path": _refused(_file("image.png"), _Failure.NO_LOCAL_PATH, local=False),
    "file-outside": _refused(
        lambda w: f"file://{w.media_dir.parent}/outside/image.png", _Failure.OUTSIDE_LOCAL_PATH
    ),
    "file-traversal": _refused(
        lambda w: f"file://{w.media_dir}/../outside/image.png", _Failure.OUTSIDE_LOCAL_PATH
    ),
    "file-the-directory": _refused(lambda w: f"file://{w.media_dir}", _Failure.OUTSIDE_LOCAL_PATH),
    "file-with-host": _refused(
        lambda w: f"file://localhost{w.media_dir}/image.png", _Failure.OUTSIDE_LOCAL_PATH
    ),
    "file-missing": _refused(_file("missing.png"), _Failure.PLAIN_ERROR),
    "file-subdirectory": _refused(_file("sub"), _Failure.PLAIN_ERROR),
}


@pytest.mark.parametrize("refusal", REFUSALS.values(), ids=REFUSALS.keys())
async def test_refuses_as_vllm(world: World, refusal: Refusal, monkeypatch: pytest.MonkeyPatch) -> None:
    ours, theirs = await _both(world, refusal.setup, monkeypatch)
    assert isinstance(theirs, Exception), f"vLLM accepted: {theirs!r}"
    assert isinstance(ours, InvalidRequest), f"we did not refuse: {ours!r}"
    assert ours.param == "image_url"
    assert _shape(refusal.failure).fullmatch(ours.message), ours.message
    assert create_error_response(theirs).error.code == refusal.failure.vllm_status, repr(theirs)
    if refusal.compare == "equal":
        assert ours.message == _shown(theirs)
    elif refusal.compare == "prefix":
        prefix = ours.message.partition("(received at least ")[0]
        assert _shown(theirs).startswith(prefix), (ours.message, _shown(theirs))


async def test_stops_reading_at_the_limit(world: World) -> None:
    """An endless body is cut off within one chunk of the limit."""
    options = MediaOptions.from_env()
    with pytest.raises(InvalidRequest) as caught:
        await load_image(world.base + "/endless", options)
    received = int(re.findall(r"received at least (\d+) bytes", caught.value.message)[0])
    assert LIMIT < received <= LIMIT + 64 * 1024


# --- retries -----------------------------------------------------------------------------------------


async def test_retries_a_5xx_as_vllm(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two attempts, a 503 then a 200 loads the image, after one retry on each side."""
    monkeypatch.setenv("VLLM_MEDIA_FETCH_MAX_RETRIES", "2")
    setup = Setup(_http("/recover"))
    ours, theirs = await asyncio.gather(
        _ours(world, setup, world.base + "/recover?ours"), _theirs(world, setup, world.base + "/recover?vllm")
    )
    _assert_same_image(ours, theirs)
    assert world.site.hits["/recover?ours"] == world.site.hits["/recover?vllm"] == 2


async def test_retries_a_timeout_as_vllm(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """With two attempts, a request that never answers is given up and the next one loads."""
    monkeypatch.setenv("VLLM_MEDIA_FETCH_MAX_RETRIES", "2")
    setup = Setup(_http("/hang-once"))
    ours, theirs = await asyncio.gather(
        _ours(world, setup, world.base + "/hang-once?ours"),
        _theirs(world, setup, world.base + "/hang-once?vllm"),
    )
    _assert_same_image(ours, theirs)
    assert world.site.hits["/hang-once?ours"] == world.site.hits["/hang-once?vllm"] == 2


async def test_does_not_retry_a_429_as_vllm(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_MEDIA_FETCH_MAX_RETRIES", "3")
    setup = Setup(_http("/too-many"))
    ours, theirs = await asyncio.gather(
        _ours(world, setup, world.base + "/too-many?ours"),
        _theirs(world, setup, world.base + "/too-many?vllm"),
        return_exceptions=True,
    )
    assert isinstance(ours, InvalidRequest)
    assert isinstance(theirs, Exception)
    assert world.site.hits["/too-many?ours"] == world.site.hits["/too-many?vllm"] == 1


async def test_uses_the_given_client(world: World) -> None:
    requests: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        requests.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as client:
        loaded = await load_image(world.base + "/image/png", MediaOptions.from_env(), client=client)
    assert loaded.original_bytes == PNG
    assert [str(r.url) for r in requests] == [world.base + "/image/png"]


# --- options -----------------------------------------------------------------------------------------

ENV_NAMES = (
    "VLLM_IMAGE_FETCH_TIMEOUT",
    "VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB",
    "VLLM_MEDIA_URL_ALLOW_REDIRECTS",
    "VLLM_MAX_IMAGE_PIXELS",
    "VLLM_MEDIA_FETCH_MAX_RETRIES",
)


def test_env_defaults_are_vllms(monkeypatch: pytest.MonkeyPatch) -> None:
    vllm.envs.disable_envs_cache()
    for name in ENV_NAMES:
        monkeypatch.delenv(name, raising=False)
    options = MediaOptions.from_env()
    assert options.image_fetch_timeout == vllm.envs.VLLM_IMAGE_FETCH_TIMEOUT == 5
    assert options.max_download_bytes == vllm.envs.VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB * 1024 * 1024
    assert options.allow_redirects is vllm.envs.VLLM_MEDIA_URL_ALLOW_REDIRECTS is True
    assert options.max_image_pixels == vllm.envs.VLLM_MAX_IMAGE_PIXELS
    assert options.max_retries == vllm.envs.VLLM_MEDIA_FETCH_MAX_RETRIES == 3
    assert (options.allowed_local_media_path, options.allowed_media_domains) == ("", ())
    assert (options.image_mode, options.rgba_background_color) == ("RGB", (255, 255, 255))


def test_env_values() -> None:
    environ = {
        "VLLM_IMAGE_FETCH_TIMEOUT": "7",
        "VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB": "0",
        "VLLM_MEDIA_URL_ALLOW_REDIRECTS": "0",
        "VLLM_MAX_IMAGE_PIXELS": "-1",
        "VLLM_MEDIA_FETCH_MAX_RETRIES": "5",
    }
    options = MediaOptions.from_env(allowed_media_domains=("a.example",), environ=environ)
    assert options == MediaOptions(
        allowed_media_domains=("a.example",),
        image_fetch_timeout=7.0,
        max_download_bytes=0,
        allow_redirects=False,
        max_image_pixels=None,
        max_retries=5,
    )


@pytest.mark.parametrize("kind", ["missing", "file"])
def test_local_path_refused_at_start_as_vllm(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "media"
    if kind == "file":
        path.write_bytes(b"")
    with pytest.raises(ValueError, match=r"^Invalid `--allowed-local-media-path`") as theirs:
        MediaConnector(allowed_local_media_path=str(path))
    with pytest.raises(ValueError, match=r"^Invalid `--allowed-local-media-path`") as ours:
        MediaOptions.from_env(str(path))
    assert str(ours.value) == str(theirs.value)


def test_local_path_is_resolved(tmp_path: Path) -> None:
    (tmp_path / "media").mkdir()
    options = MediaOptions.from_env(str(tmp_path / "media" / ".." / "media"))
    assert options.allowed_local_media_path == str((tmp_path / "media").resolve())


@pytest.mark.parametrize("colour", [(0, 0), (0, 0, 256), (0, 0, -1), (0.5, 0, 0)])
def test_background_refused_as_vllm(colour: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError, match="rgba_background_color") as theirs:
        ImageMediaIO(rgba_background_color=colour)
    with pytest.raises(ValueError, match="rgba_background_color") as ours:
        MediaOptions(
            image_fetch_timeout=1,
            max_download_bytes=0,
            allow_redirects=True,
            max_image_pixels=None,
            max_retries=1,
            rgba_background_color=colour,
        )
    assert str(ours.value) == str(theirs.value)


# --- the module's imports ----------------------------------------------------------------------------


def test_imports_no_server_side_library() -> None:
    """The module runs in a router: no vLLM, torch, aiohttp, requests or pydantic."""
    script = (
        "import sys, vllm_llm.multimodal._media\n"
        "heavy = {'vllm', 'torch', 'aiohttp', 'requests', 'pydantic'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", script], check=True)
