"""`MuxSession`: the client side of one `GenerateMux` stream (see `vllm_server.grpc.mux`).

Each request gets an `OutputChannel` (outputs merge there when its reader lags, as on a worker); one
reader task routes every `MuxResponse` to the channels, one writer task sends what was queued since its
last write (starts and cancels) as one `MuxRequest`, or as several when one would exceed the channel's
message limit (`max_message_bytes`: one request's own size is checked by `RemoteLlm.generate`).

- **Wake order.** A message carries one output per request of an engine step (128 at c=128); each
  `put` wakes the task reading that request (an HTTP stream). First outputs are put first, and the
  reader yields to the event loop after every `_WAKE_BATCH` puts, so a request waiting for its first
  token, or a write of new requests, waits behind a few streams' tokens rather than all of them
  (measured at c=128 over the real engine: the time from the worker's write to the HTTP handler's
  first output 12 -> 2.6 ms, from a request's start to its write 11 -> 6 ms, medians).
- A request's error (`MuxError`) fails its channel with the Llm error its status maps to
  (`error_of_status`), after the outputs before it.
- The stream's end, or any failure of it (the worker went away, keepalive failed, the server drained or
  stopped), fails every open request with `Unavailable` and makes the session dead; the next request
  opens a new one. A request failed with `SessionEnded` before its first output reached its caller may
  be sent again (`RemoteLlm` does, once).
- `idle` (RemoteLlm's `idle_timeout`): one timer per session checks the open requests every `idle / 4`
  seconds; a request with no output for `idle` seconds is cancelled and fails with `Unavailable`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import grpc
import msgspec

from vllm_llm import InvalidRequest, LlmError, Remote, Unavailable
from vllm_llm._channel import OutputChannel
from vllm_llm.wire import (
    GENERATEMUX,
    FinishReason,
    GenerateOutput,
    GenerateRequest,
    MuxRequest,
    MuxResponse,
    decoder,
    encode,
)
from vllm_remote_llm._errors import error_of_status

__all__ = ["MuxSession", "RequestChannel", "SessionEnded"]


#: Readers woken per event-loop turn when a message carries many requests' outputs.
_WAKE_BATCH = 16


class SessionEnded(Unavailable):
    """The GenerateMux stream ended before the request's final output."""


class RequestChannel(OutputChannel):
    """A request's outputs; a reader cancelled while it waits cancels the request (as cancelling a
    Generate call's read cancels the call)."""

    __slots__ = ("_session", "request_id")

    def __init__(self, session: MuxSession, request_id: str) -> None:
        super().__init__()
        self._session = session
        self.request_id = request_id

    async def __anext__(self) -> GenerateOutput:
        try:
            return await self.get()
        except asyncio.CancelledError:
            self._session.cancel(self.request_id, deliver_abort=False)
            raise


class _Open:
    """One open request of a session."""

    __slots__ = ("channel", "last")

    def __init__(self, channel: RequestChannel, now: float) -> None:
        self.channel = channel
        #: The loop time of the request's start or latest output (the idle bound's reference).
        self.last = now


class MuxSession:
    """One GenerateMux call and the requests on it."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        metadata: tuple[tuple[str, str], ...],
        *,
        idle: float | None,
        max_message_bytes: int = 64 << 20,
    ) -> None:
        call_of = channel.stream_stream(
            GENERATEMUX.path,
            request_serializer=None,
            response_deserializer=_response_deserializer(),
            _registered_method=True,
        )
        self._call = call_of(metadata=metadata)
        self._open: dict[str, _Open] = {}
        #: Requests to send, with their encoded size (a message of them stays under the send limit).
        self._starts: list[tuple[GenerateRequest, int]] = []
        self._max_message_bytes = max_message_bytes
        self._cancels: list[str] = []
        self._loop = asyncio.get_running_loop()
        self._wants_write: asyncio.Future[None] | None = None
        self.ended: LlmError | None = None
        #: The gRPC status the call ended with, once it ended.
        self.status: grpc.StatusCode | None = None
        self._idle = idle
        self._writer = asyncio.create_task(self._write())
        self._reader = asyncio.create_task(self._read())
        self._watchdog: asyncio.TimerHandle | None = None
        if idle is not None:
            self._watchdog = self._loop.call_later(idle / 4, self._watch)

    @property
    def alive(self) -> bool:
        """Whether new requests may go on this session."""
        return self.ended is None

    def start(self, request: GenerateRequest, size: int) -> RequestChannel:
        """Send `request` (`size` bytes encoded); its outputs (or its error) arrive in the returned
        channel."""
        assert self.ended is None
        rid = request.request_id
        if rid in self._open:
            raise InvalidRequest(f"request {rid!r} is already running", param="request_id")
        state = self._open[rid] = _Open(RequestChannel(self, rid), self._loop.time())
        self._starts.append((request, size))
        self._kick()
        return state.channel

    def cancel(self, rid: str, *, deliver_abort: bool) -> None:
        """Abort request `rid` on the worker; its channel ends with an ABORT output if asked."""
        state = self._open.pop(rid, None)
        if state is None:
            return
        if deliver_abort:
            state.channel.put(GenerateOutput(request_id=rid, token_ids=[], finish_reason=FinishReason.ABORT))
        if self.ended is None:
            self._cancels.append(rid)
            self._kick()

    def running(self, rid: str) -> bool:
        """Whether request `rid` is open on this session."""
        return rid in self._open

    async def close(self) -> None:
        """Cancel the call (every request still open fails with Unavailable) and wait for its tasks."""
        self._end(Unavailable("the RemoteLlm was shut down"))
        self._call.cancel()
        await asyncio.gather(self._reader, self._writer, return_exceptions=True)

    # ---- tasks -------------------------------------------------------------------------------------

    def _kick(self) -> None:
        waiter = self._wants_write
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _write(self) -> None:
        call = self._call
        try:
            while self.ended is None:
                if not self._starts and not self._cancels:
                    self._wants_write = self._loop.create_future()
                    try:
                        await self._wants_write
                    finally:
                        self._wants_write = None
                    continue
                cancels, self._cancels = self._cancels, []
                starts = self._take_starts(sum(len(rid) + 8 for rid in cancels))
                await call.write(encode(MuxRequest(generate=starts or None, cancel=cancels or None)))
        except asyncio.CancelledError:
            raise
        except Exception:  # the call failed: the reader sees its status
            return

    def _take_starts(self, used: int) -> list[GenerateRequest]:
        """The queued requests that fit in one message beside `used` bytes (at least one: each is
        within the limit by itself, `RemoteLlm` checks); the rest wait for the next write."""
        budget = self._max_message_bytes - 64 - used
        taken = 0
        for _, size in self._starts:
            budget -= size + 8
            if budget < 0 and taken:
                break
            taken += 1
        starts, self._starts = self._starts[:taken], self._starts[taken:]
        return [request for request, _ in starts]

    async def _read(self) -> None:
        call = self._call
        opened = self._open
        error: LlmError
        try:
            while True:
                message = await call.read()
                if message.__class__ is not MuxResponse:
                    if message is grpc.aio.EOF:
                        code = await call.code()
                        self.status = code
                        if code == grpc.StatusCode.OK:
                            error = SessionEnded("the worker ended the GenerateMux stream (draining)")
                        else:
                            error = _session_error(code, await call.details())
                    else:
                        call.cancel()
                        error = Remote(
                            f"the server sent an undecodable MuxResponse: {message}", code="DATA_LOSS"
                        )
                    break
                now = self._loop.time()
                outputs = message.outputs or ()
                # First outputs first: each put wakes its reader, and the readers run in this order, so a
                # request waiting for its first token does not wait behind every running stream's token.
                woken = 0
                for first_pass in (True, False):
                    for out in outputs:
                        if (out.prompt_info is not None) is not first_pass:
                            continue
                        if woken == _WAKE_BATCH:
                            # Let the readers just woken run before waking more: a write or a new request
                            # that comes meanwhile waits behind a few streams' tokens, not all of them.
                            woken = 0
                            await asyncio.sleep(0)
                        woken += 1
                        state = opened.get(out.request_id)
                        if state is None:
                            continue  # cancelled here meanwhile
                        state.last = now
                        if out.finish_reason is not None:
                            del opened[out.request_id]
                        state.channel.put(out)
                for failed in message.errors or ():
                    state = opened.pop(failed.request_id, None)
                    if state is not None:
                        failure = error_of_status(_code(failed.code), failed.message, failed.refusal)
                        state.channel.fail(failure)
        except grpc.aio.AioRpcError as exc:
            self.status = exc.code()
            error = _session_error(exc.code(), exc.details())
        except asyncio.CancelledError:  # the call was cancelled (`close` ended the session before)
            error = SessionEnded("the GenerateMux stream was cancelled")
        self._end(error)

    def _end(self, error: LlmError) -> None:
        if self.ended is not None:
            return
        self.ended = error
        if self._watchdog is not None:
            self._watchdog.cancel()
        opened, self._open = self._open, {}
        for state in opened.values():
            state.channel.fail(error)
        self._kick()
        self._writer.cancel()

    def _watch(self) -> None:
        idle = self._idle
        assert idle is not None
        now = self._loop.time()
        for rid, state in list(self._open.items()):
            if now - state.last >= idle:
                self.cancel(rid, deliver_abort=False)
                state.channel.fail(
                    Unavailable(
                        f"no output from the server for {idle} s on request {rid!r} (idle timeout); "
                        "the request was cancelled"
                    )
                )
        if self.ended is None:
            self._watchdog = self._loop.call_later(idle / 4, self._watch)


def _session_error(code: grpc.StatusCode, details: str | None) -> LlmError:
    """The error an open request gets when the stream failed with a status."""
    if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED, grpc.StatusCode.DEADLINE_EXCEEDED):
        return SessionEnded(f"the GenerateMux stream to the worker failed ({code.name}): {details}")
    return error_of_status(code, details)


def _code(name: str) -> grpc.StatusCode:
    code = grpc.StatusCode.__members__.get(name)
    return code if code is not None else grpc.StatusCode.UNKNOWN


def _response_deserializer() -> Callable[[bytes], MuxResponse | str]:
    typed = decoder(MuxResponse).decode

    def deserialize(raw: bytes) -> MuxResponse | str:
        try:
            return typed(raw)
        except msgspec.DecodeError as exc:
            return str(exc)
        except RecursionError:
            return "nested too deeply"

    return deserialize
