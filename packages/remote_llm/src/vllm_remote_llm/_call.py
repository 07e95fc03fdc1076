"""`CallOutputs`: the outputs of one Generate call, the async iterator behind a RemoteLlm stream.

Aborting a call cancels it: the cancellation travels on the call's own HTTP/2 stream, so it reaches
exactly the worker that serves the request, whichever the channel picked (the worker's handler then
closes its Llm stream, which aborts the request there). The stream here ends with an ABORT output made
locally, since a cancelled call delivers nothing more.

Bounds on a running call (each raises `Unavailable` and cancels the call):
- `within` (RemoteLlm's `timeout`): the wait for acceptance, and then for the first output.
- `idle` (RemoteLlm's `idle_timeout`): every wait for an output, the first included. Only the time
  spent waiting in a read counts: a consumer that reads slowly never trips it. It is kept by one timer
  per call (a watchdog that rearms itself at most once per `idle` seconds), not by a timer per read:
  a read only stamps the loop time when it starts waiting and clears the stamp when it returns.
- A dead, partitioned or stopped worker is also caught below this, by keepalive (see `_channel`).

Responses are decoded by `output_deserializer`, which never raises: an output that does not decode
(a foreign MessagePack extension type in an `any` value included) ends the stream with
`Remote(code="DATA_LOSS")` and cancels the call, instead of grpc's logged traceback and a `None`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc
import msgspec

from vllm_llm import LlmError, Remote, Unavailable
from vllm_llm.wire import FinishReason, GenerateOutput, decoder
from vllm_remote_llm._errors import error_of_status, translate_errors
from vllm_remote_llm.protocol import ACCEPTED_KEY, refusal_of


class Undecodable:
    """What `output_deserializer` returns for bytes that are not a GenerateOutput."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def output_deserializer() -> Callable[[bytes], GenerateOutput | Undecodable]:
    """The Generate call's response deserializer: it never raises (grpc would log and give None)."""
    typed = decoder(GenerateOutput).decode

    def deserialize(raw: bytes) -> GenerateOutput | Undecodable:
        try:
            return typed(raw)
        except msgspec.DecodeError as exc:  # ValidationError and ForeignExtension included
            return Undecodable(str(exc))
        except RecursionError:
            return Undecodable("nested too deeply")

    return deserialize


def least(a: float | None, b: float | None) -> float | None:
    """The tighter of two optional bounds (None: no bound)."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


class CallOutputs:
    """The delta outputs of one Generate call (see the module docstring)."""

    __slots__ = (
        "_aborted",
        "_call",
        "_done",
        "_first_within",
        "_idle",
        "_loop",
        "_on_done",
        "_peeked",
        "_reading_since",
        "_stalled",
        "_watchdog",
        "request_id",
    )

    def __init__(
        self,
        call: Any,
        request_id: str,
        on_done: Callable[[CallOutputs], None],
        *,
        idle: float | None = None,
    ) -> None:
        self.request_id = request_id
        self._call = call
        self._on_done: Callable[[CallOutputs], None] | None = on_done
        self._aborted = False
        self._done = False
        self._first_within: float | None = None
        self._idle = idle
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The loop time a read started waiting at; None while no read waits.
        self._reading_since: float | None = None
        self._watchdog: asyncio.TimerHandle | None = None
        self._stalled = False
        #: The first output, read by `peek` before the stream was handed out.
        self._peeked: GenerateOutput | None = None

    async def start(self, within: float | None) -> None:
        """Wait until the server accepted the request, or raise the call's failure (validation errors).

        The server sends its initial metadata, marked `ACCEPTED_KEY`, once its Llm took the request; a
        call that fails before that ends with only a status. Nothing here waits for the first output;
        the first read is bounded by `within` too (a stalled server surfaces as Unavailable). The wait
        here is bounded by the idle bound as well, and every read after it by the watchdog.
        """
        self._first_within = within
        bound = least(within, self._idle)
        try:
            async with asyncio.timeout(bound):
                with translate_errors():
                    metadata = await self._call.initial_metadata()
                if not any(key == ACCEPTED_KEY for key, _ in metadata or ()):
                    code = await self._call.code()
                    details = await self._call.details()
                    refusal = refusal_of(await self._call.trailing_metadata())
                    raise error_of_status(code, details, refusal)
        except TimeoutError as exc:
            self.close()
            raise Unavailable(f"the server did not accept the request within {bound} s") from exc
        except BaseException:
            self.close()
            raise
        if self._idle is not None:
            loop = self._loop = asyncio.get_running_loop()
            self._watchdog = loop.call_at(loop.time() + self._idle, self._watch)

    async def peek(self) -> LlmError | None:
        """Read the first output now; the stream's first read returns it. A call the server or the
        transport failed before it (the worker died or failed the request after taking it) returns its
        error instead: nothing reached the caller, so another worker may serve the request. Deadlines,
        the idle bound, validation errors and undecodable outputs raise."""
        try:
            self._peeked = await self._next()
        except (Remote, Unavailable) as exc:
            if self._stalled or not isinstance(exc.__cause__, grpc.aio.AioRpcError):
                raise
            return exc
        return None

    def abort(self) -> None:
        """Cancel the call; the stream ends with an ABORT output."""
        if not self._done and not self._aborted:
            self._aborted = True
            self._call.cancel()

    def close(self) -> None:
        """Cancel the call (if still open) and deliver nothing more."""
        self._call.cancel()
        self._end()

    def __aiter__(self) -> CallOutputs:
        return self

    async def __anext__(self) -> GenerateOutput:
        return await self._next()

    async def _next(self) -> GenerateOutput:
        peeked = self._peeked
        if peeked is not None:
            self._peeked = None
            return peeked
        if self._done:
            raise StopAsyncIteration
        if self._aborted:
            return self._aborted_output()
        within, self._first_within = self._first_within, None
        loop = self._loop
        try:
            if loop is not None:
                self._reading_since = loop.time()
            if within is None:
                out = await self._call.read()
            else:
                async with asyncio.timeout(within):
                    out = await self._call.read()
        except TimeoutError as exc:
            self.close()
            raise Unavailable(f"no output from the server within {within} s") from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and not task.cancelling():
                if self._stalled:  # our watchdog cancelled the call
                    raise self._stalled_error() from None
                if self._aborted:  # our own `abort` cancelled the call
                    return self._aborted_output()
            self.close()
            raise
        except grpc.aio.AioRpcError as exc:  # as `translate_errors`, without a context manager per read
            if self._stalled:
                raise self._stalled_error() from exc
            self._end()
            raise error_of_status(exc.code(), exc.details(), refusal_of(exc.trailing_metadata())) from exc
        except BaseException as exc:
            if self._stalled:
                raise self._stalled_error() from exc
            self._end()
            raise
        finally:
            self._reading_since = None
        if out.__class__ is not GenerateOutput:  # EOF, or an Undecodable
            raise self._broken(out)
        if out.finish_reason is not None:
            self._end()
        return out

    def _watch(self) -> None:
        """The idle watchdog: cancel the call once a read has waited `idle` s, else rearm."""
        loop, idle = self._loop, self._idle
        assert loop is not None and idle is not None
        self._watchdog = None
        if self._done:
            return
        since = self._reading_since
        now = loop.time()
        if since is not None and now - since >= idle:
            self._stalled = True
            self._call.cancel()  # the pending read raises CancelledError; `_next` turns it into Unavailable
            return
        # The next read to time out cannot do so before (its start or now) + idle.
        self._watchdog = loop.call_at((since if since is not None else now) + idle, self._watch)

    def _stalled_error(self) -> Unavailable:
        self.close()
        return Unavailable(
            f"no output from the server for {self._idle} s on request {self.request_id!r} "
            "(idle timeout); the call was cancelled"
        )

    def _broken(self, out: object) -> Remote:
        if out is grpc.aio.EOF:
            self._end()
            return Remote(
                f"the server ended without a final output for request {self.request_id!r}",
                code="DATA_LOSS",
            )
        self.close()  # the call is still open: nothing more of it is read
        reason = out.reason if isinstance(out, Undecodable) else "not a GenerateOutput"
        return Remote(
            f"the server sent an undecodable output for request {self.request_id!r}: {reason}",
            code="DATA_LOSS",
        )

    def _aborted_output(self) -> GenerateOutput:
        self._end()
        return GenerateOutput(request_id=self.request_id, token_ids=[], finish_reason=FinishReason.ABORT)

    def _end(self) -> None:
        self._done = True
        watchdog, self._watchdog = self._watchdog, None
        if watchdog is not None:
            watchdog.cancel()
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(self)
