"""Load an image from a request's URL at the caller, as vLLM 0.32's MediaConnector and ImageMediaIO do.

Three kinds of URL are accepted:

- ``data:`` URLs, base64 only;
- ``file:`` URLs under ``allowed_local_media_path`` (a directory fixed at start-up);
- ``http(s):`` URLs from ``allowed_media_domains`` (any domain when empty), fetched through httpx with
  vLLM's total timeout, redirect switch, download-size ceiling and retries of transient failures.

The bytes are decoded by Pillow off the event loop (only still-image formats, EXIF orientation applied,
``max_image_pixels`` enforced before the pixels are decoded) and converted to ``image_mode``.
:class:`LoadedImage` keeps the encoded bytes as vLLM's ``MediaWithBytes`` does: they key the mm hash.

Every failure raises ``InvalidRequest(message, param="image_url")``. The messages are vLLM's, listed
with the HTTP status vLLM's server answers each with in :class:`_Failure`, the one table of them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import enum
import io
import logging
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import SplitResult, urlsplit
from urllib.request import url2pathname

import httpx
from PIL import Image, ImageOps

from vllm_llm._errors import InvalidRequest

logger = logging.getLogger(__name__)

_PARAM = "image_url"
_MIB = 1024 * 1024
#: Attempt n waits `_BACKOFF ** n` seconds before the next and has `_BACKOFF ** n` times the timeout.
_BACKOFF = 4.0
#: aiohttp's default, which vLLM uses.
_MAX_REDIRECTS = 10
_USER_AGENT = "vllm-llm"
#: Pillow's readers vLLM accepts for untrusted images: in-process still-image decoders only (no EPS,
#: which runs Ghostscript; no WMF; no stub drivers).
_FORMATS = (
    "AVIF", "BLP", "BMP", "CUR", "DCX", "DDS", "DIB", "FITS", "FLI", "FTEX", "GBR", "GIF", "ICNS", "ICO",
    "IM", "IMT", "IPTC", "JPEG", "JPEG2000", "MCIDAS", "MSP", "PCD", "PCX", "PIXAR", "PNG", "PPM", "PSD",
    "QOI", "SGI", "SPIDER", "SUN", "TGA", "TIFF", "WEBP", "XBM", "XPM", "XVTHUMB",
)  # fmt: skip
#: A scheme as urllib3 (vLLM's URL parser) recognises one: no dot, so "host.com:80/x" has none.
_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+-]*):")
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+>")
#: The host at the start of "host[:port]": a bracketed IPv6 address or up to the first colon.
_HOST = re.compile(r"\[[^\]]*\]|[^:]*")


class _Failure(enum.Enum):
    """Each way loading fails: vLLM's message, and the HTTP status vLLM's server answers it with."""

    # fmt: off
    DATA_URL_NO_COMMA = ("Invalid data URL {head!r}: missing ',' separator.", 400)
    DATA_URL_NOT_BASE64 = ("Only base64 data URLs are supported for now.", 501)
    BAD_BASE64 = ("Non-base64 digit found", 400)
    NO_LOCAL_PATH = ("Cannot load local files without `--allowed-local-media-path`.", 500)
    OUTSIDE_LOCAL_PATH = ("The file path {path} must be a subpath of `--allowed-local-media-path {allowed}`.", 400)  # noqa: E501
    SCHEME = ("The URL must be either a HTTP, data or file URL.", 400)
    UNPARSABLE_URL = ("Failed to parse: {url}", 400)
    DOMAIN = ("The URL must be from one of the allowed domains: {allowed}. Input URL domain: {host}", 400)
    INVALID_URL = ("Failed to fetch media from URL: Invalid URL", 422)
    HTTP_STATUS = ("Failed to fetch media from URL: HTTP {status} error", 422)
    UPSTREAM_STATUS = ("{status}, message={reason!r}, url={url!r}", 500)
    TOO_LARGE = ("Failed to fetch media from URL: Remote media download exceeds VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB={mb:g} (received at least {received} bytes)", 422)  # noqa: E501
    TIMEOUT = ("Failed to fetch media from URL: timed out", 500)
    NETWORK = ("Failed to fetch media from URL: {error}", 500)
    TOO_MANY_PIXELS = ("Image dimensions {width}x{height} ({pixels} pixels) exceed the maximum of {limit} pixels. Set VLLM_MAX_IMAGE_PIXELS to increase this limit.", 400)  # noqa: E501
    UNDECODABLE = ("Failed to load image: {error}", 400)
    # vLLM lets these exceptions through unclassified: a ValueError answers 400, anything else 500.
    PLAIN_VALUE_ERROR = ("{error}", 400)
    PLAIN_ERROR = ("{error}", 500)
    # fmt: on

    def __init__(self, template: str, vllm_status: int) -> None:
        self.template = template
        self.vllm_status = vllm_status

    def error(self, **fields: object) -> InvalidRequest:
        """The InvalidRequest the caller sees, with machine addresses left out as vLLM's server does."""
        message = _ADDRESS.sub(">", self.template.format(**fields))
        return InvalidRequest(message, param=_PARAM)


class _Transient(Exception):
    """A fetch failure worth another attempt; `error` is what the caller sees when none is left."""

    def __init__(self, error: InvalidRequest) -> None:
        super().__init__(error.message)
        self.error = error


@dataclass(frozen=True, kw_only=True)
class MediaOptions:
    """Where images may come from and the limits on fetching and decoding them (vLLM's settings).

    `allowed_local_media_path` is resolved at construction, as vLLM resolves it at start-up; a
    `max_download_bytes` or `image_fetch_timeout` of 0 or less means none, a `max_image_pixels` of None
    no limit but Pillow's own decompression-bomb guard.
    """

    allowed_local_media_path: str = ""
    allowed_media_domains: tuple[str, ...] = ()
    image_fetch_timeout: float
    max_download_bytes: int
    allow_redirects: bool
    max_image_pixels: int | None
    max_retries: int
    image_mode: str | None = "RGB"
    rgba_background_color: tuple[int, int, int] = (255, 255, 255)

    def __post_init__(self) -> None:
        if self.allowed_local_media_path:
            resolved = _allowed_directory(self.allowed_local_media_path)
            object.__setattr__(self, "allowed_local_media_path", str(resolved))
        if not _is_colour(self.rgba_background_color):
            raise ValueError(
                "rgba_background_color must be a list or tuple of 3 integers in the range [0, 255]."
            )

    @classmethod
    def from_env(
        cls,
        allowed_local_media_path: str = "",
        allowed_media_domains: tuple[str, ...] = (),
        *,
        environ: Mapping[str, str] | None = None,
    ) -> MediaOptions:
        """Options from vLLM's environment variables, with vLLM's defaults."""
        env = os.environ if environ is None else environ
        download_mb = int(env.get("VLLM_MAX_MEDIA_DOWNLOAD_SIZE_MB", "256"))
        max_pixels = int(env.get("VLLM_MAX_IMAGE_PIXELS", "178956970"))
        return cls(
            allowed_local_media_path=allowed_local_media_path,
            allowed_media_domains=tuple(allowed_media_domains),
            image_fetch_timeout=float(env.get("VLLM_IMAGE_FETCH_TIMEOUT", "5")),
            max_download_bytes=max(download_mb, 0) * _MIB,
            allow_redirects=bool(int(env.get("VLLM_MEDIA_URL_ALLOW_REDIRECTS", "1"))),
            max_image_pixels=max_pixels if max_pixels > 0 else None,
            max_retries=int(env.get("VLLM_MEDIA_FETCH_MAX_RETRIES", "3")),
        )


@dataclass(frozen=True)
class ImageConversion:
    """The decode settings that changed the image relative to its bytes (vLLM's `io_config`)."""

    image_mode: str
    rgba_background_color: tuple[int, int, int]


@dataclass(frozen=True)
class LoadedImage:
    """A decoded, converted image and the encoded bytes it came from (vLLM's `MediaWithBytes`).

    `conversion` is None when the decoded image was kept as it is; vLLM then hashes `original_bytes`
    alone, otherwise the conversion with them.
    """

    image: Image.Image
    original_bytes: bytes = field(repr=False)
    conversion: ImageConversion | None = None


async def load_image(
    url: str, options: MediaOptions, *, client: httpx.AsyncClient | None = None
) -> LoadedImage:
    """Load the image at a data:, file: or http(s): URL; `client` fetches http(s) (a new one if None)."""
    if url[:5].lower() == "data:":
        return await asyncio.to_thread(_load_data_url, url, options)
    scheme = _scheme(url)
    if scheme.startswith("http"):
        data = await _fetch(url, options, client)
        return await asyncio.to_thread(_decode, data, options)
    if scheme == "file":
        return await asyncio.to_thread(_load_file_url, url, options)
    raise _Failure.SCHEME.error()


# --- options -----------------------------------------------------------------------------------------


def _allowed_directory(path: str) -> Path:
    """The resolved directory local files may be read from; a ValueError at start-up if it is none."""
    resolved = Path(path).resolve()
    if not resolved.exists():
        raise ValueError(f"Invalid `--allowed-local-media-path`: The path {resolved} does not exist.")
    if not resolved.is_dir():
        raise ValueError(f"Invalid `--allowed-local-media-path`: The path {resolved} must be a directory.")
    return resolved


def _is_colour(value: object) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 3
        and all(isinstance(c, int) and 0 <= c <= 255 for c in value)
    )


# --- URLs --------------------------------------------------------------------------------------------


def _scheme(url: str) -> str:
    """The URL's scheme, lower-cased; empty when it has none."""
    match = _SCHEME.match(url)
    return match.group(1).lower() if match else ""


def _split(url: str) -> SplitResult:
    try:
        return urlsplit(url)
    except ValueError as exc:
        raise _Failure.UNPARSABLE_URL.error(url=url) from exc


def _host_port(netloc: str) -> str:
    """`netloc` without its user info, as urllib3's `Url.netloc` gives it."""
    return netloc.rpartition("@")[2]


def _hostname(netloc: str) -> str | None:
    """The lower-cased host of `netloc`, IPv6 brackets kept, as urllib3's `Url.hostname` gives it."""
    match = _HOST.match(_host_port(netloc))
    return match.group(0).lower() if match and match.group(0) else None


# --- data: URLs --------------------------------------------------------------------------------------


def _load_data_url(url: str, options: MediaOptions) -> LoadedImage:
    """Decode `data:[<mediatype>][;<param>=<value>]*;base64,<data>` (RFC 2397); the media type is ignored."""
    spec, comma, payload = url[5:].partition(",")
    if not comma:
        raise _Failure.DATA_URL_NO_COMMA.error(head=url[:32])
    _, semicolon, encoding = spec.rpartition(";")
    if not semicolon or encoding != "base64":
        raise _Failure.DATA_URL_NOT_BASE64.error()
    return _decode(_strict_b64decode(payload), options)


def _strict_b64decode(payload: str) -> bytes:
    """Decode what pybase64's `b64decode(validate=True)` (vLLM's decoder) accepts, and nothing else.

    That is whole quanta of the standard alphabet with at most two `=` at the very end; the stdlib's
    `validate=True` alone accepts more padding and an unpadded tail.
    """
    first_pad = payload.find("=")
    if len(payload) % 4 or first_pad not in (-1, len(payload) - 1, len(payload) - 2):
        raise _Failure.BAD_BASE64.error()
    try:
        return base64.b64decode(payload, validate=True)
    except ValueError as exc:  # binascii.Error, or a non-ASCII character
        raise _Failure.BAD_BASE64.error() from exc


# --- file: URLs --------------------------------------------------------------------------------------


def _load_file_url(url: str, options: MediaOptions) -> LoadedImage:
    path = _local_path(url, options)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise _Failure.PLAIN_ERROR.error(error=exc) from exc
    return _decode(data, options)


def _local_path(url: str, options: MediaOptions) -> Path:
    """The file a file: URL names, refused unless it lies (symlinks resolved) under the allowed directory."""
    if not options.allowed_local_media_path:
        raise _Failure.NO_LOCAL_PATH.error()
    allowed = Path(options.allowed_local_media_path)
    parts = _split(url)
    # As vLLM: a host is kept as the first segment of the path ("file://x/a" names the relative "x/a").
    path = Path(url2pathname(_host_port(parts.netloc) + parts.path))
    if allowed not in path.resolve().parents:
        raise _Failure.OUTSIDE_LOCAL_PATH.error(path=path, allowed=allowed)
    return path


# --- http(s): URLs -----------------------------------------------------------------------------------


async def _fetch(url: str, options: MediaOptions, client: httpx.AsyncClient | None) -> bytes:
    """The body at an http(s) URL, after the domain and scheme checks."""
    parts = _split(url)
    host = _hostname(parts.netloc)
    if options.allowed_media_domains and host not in options.allowed_media_domains:
        raise _Failure.DOMAIN.error(allowed=list(options.allowed_media_domains), host=host)
    if parts.scheme.lower() not in ("http", "https"):
        raise _Failure.INVALID_URL.error()
    if client is not None:
        return await _fetch_with_retries(client, url, options)
    headers = {"User-Agent": _USER_AGENT}
    async with httpx.AsyncClient(timeout=None, max_redirects=_MAX_REDIRECTS, headers=headers) as own:
        return await _fetch_with_retries(own, url, options)


async def _fetch_with_retries(client: httpx.AsyncClient, url: str, options: MediaOptions) -> bytes:
    """Retry timeouts, connection failures and 5xx answers, each attempt with a longer timeout."""
    attempts = max(options.max_retries, 1)
    for attempt in range(attempts):
        try:
            with _translate_fetch_errors():
                async with asyncio.timeout(_attempt_timeout(options, attempt)):
                    return await _fetch_once(client, url, options)
        except _Transient as exc:
            if attempt + 1 >= attempts:
                raise exc.error from exc.__cause__
            backoff = _BACKOFF**attempt
            logger.warning(
                "fetching %s failed (attempt %d/%d): %s; retrying in %g s",
                url,
                attempt + 1,
                attempts,
                exc.error.message,
                backoff,
            )
            await asyncio.sleep(backoff)
    raise AssertionError("unreachable")


def _attempt_timeout(options: MediaOptions, attempt: int) -> float | None:
    if options.image_fetch_timeout <= 0:
        return None
    return options.image_fetch_timeout * _BACKOFF**attempt


async def _fetch_once(client: httpx.AsyncClient, url: str, options: MediaOptions) -> bytes:
    """One GET, the body read up to the limit (the caller bounds the whole of it in time)."""
    async with client.stream("GET", url, follow_redirects=options.allow_redirects) as response:
        _check_status(response)
        return await _read_body(response, options.max_download_bytes)


@contextlib.contextmanager
def _translate_fetch_errors() -> Iterator[None]:
    """Turn httpx's and the timeout's exceptions into ours; transient ones as `_Transient`."""
    try:
        yield
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise _Transient(_Failure.TIMEOUT.error()) from exc
    except httpx.TooManyRedirects as exc:
        # aiohttp's TooManyRedirects carries status 0, which vLLM reports as is.
        raise _Failure.HTTP_STATUS.error(status=0) from exc
    except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
        raise _Failure.INVALID_URL.error() from exc
    except (httpx.NetworkError, httpx.RemoteProtocolError, httpx.ProxyError) as exc:
        raise _Transient(_Failure.NETWORK.error(error=_describe(exc))) from exc
    except httpx.HTTPError as exc:
        raise _Failure.NETWORK.error(error=_describe(exc)) from exc


def _describe(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


def _check_status(response: httpx.Response) -> None:
    """Refuse an error status; a 3xx (redirects off) passes, and its body then fails to decode."""
    status = response.status_code
    if status < 400:
        return
    if status in (408, 429) or status >= 500:
        error = _Failure.UPSTREAM_STATUS.error(
            status=status, reason=response.reason_phrase, url=str(response.url)
        )
        if status >= 500:
            raise _Transient(error)
        raise error
    raise _Failure.HTTP_STATUS.error(status=status)


async def _read_body(response: httpx.Response, max_bytes: int) -> bytes:
    """The (decoded) body, stopped as soon as it passes `max_bytes`: never more is held."""
    if max_bytes <= 0:
        return await response.aread()
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise _too_large(max_bytes, int(declared))
    chunks: list[bytes] = []
    received = 0
    async for chunk in response.aiter_bytes():
        received += len(chunk)
        if received > max_bytes:
            raise _too_large(max_bytes, received)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(max_bytes: int, received: int) -> InvalidRequest:
    return _Failure.TOO_LARGE.error(mb=max_bytes / _MIB, received=received)


# --- decoding ----------------------------------------------------------------------------------------


def _decode(data: bytes, options: MediaOptions) -> LoadedImage:
    """Decode and convert `data` (blocking: run it in a thread)."""
    try:
        image: Image.Image = Image.open(io.BytesIO(data), formats=_FORMATS)
        _check_pixels(image, options.max_image_pixels)
        image = _upright(image)
        image.load()
        converted = _convert(image, options.image_mode, options.rgba_background_color)
    except Image.DecompressionBombError as exc:
        raise _Failure.PLAIN_ERROR.error(error=exc) from exc
    except OSError as exc:
        raise _Failure.UNDECODABLE.error(error=exc) from exc
    except ValueError as exc:
        raise _Failure.PLAIN_VALUE_ERROR.error(error=exc) from exc
    conversion = None
    if converted is not image and options.image_mode is not None:
        conversion = ImageConversion(options.image_mode, options.rgba_background_color)
    return LoadedImage(converted, data, conversion)


def _check_pixels(image: Image.Image, limit: int | None) -> None:
    """Refuse an image larger than `limit` pixels from its header, before its pixels are decoded."""
    width, height = image.size
    if limit is not None and width * height > limit:
        raise _Failure.TOO_MANY_PIXELS.error(width=width, height=height, pixels=width * height, limit=limit)


def _upright(image: Image.Image) -> Image.Image:
    """Apply the EXIF orientation, keeping the image as it is if that fails.

    This first load swallows decoding errors, as vLLM's does; Pillow's second load then raises for some
    damage (truncation) but returns what was decoded for other (a broken compressed stream).
    """
    try:
        return ImageOps.exif_transpose(image)
    except Exception:
        return image


def _convert(image: Image.Image, mode: str | None, background: tuple[int, int, int]) -> Image.Image:
    """`image` in `mode` (None keeps it); transparency becomes `background` when going to RGB."""
    if mode is None or image.mode == mode:
        return image
    if mode == "RGB" and (image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info):
        rgba = image if image.mode == "RGBA" else image.convert("RGBA")
        flat = Image.new("RGB", rgba.size, background)
        flat.paste(rgba, mask=rgba.getchannel("A"))
        return flat
    return image.convert(mode)
