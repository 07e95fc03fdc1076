"""`GenerateMux`: many Generate requests on one bidirectional stream of `vllm.internal.Llm`.

Per request it keeps what `Generate` promises: an error instead of any output when the Llm refuses the
request (the status Generate would end with, as a `MuxError`), else delta outputs and one final
output; a failure after outputs comes after them. What differs is the transport:

- **One message for what is pending.** Each request's outputs are merged (`merge_outputs`) into one
  pending output per request while a write is in flight; the writer sends everything pending over all
  the stream's requests as one `MuxResponse` once the previous write completed. At c requests and one
  engine step per write that is one message per step instead of c: the per-message cost of gRPC
  (`docs/performance.md`) is paid once per step. Nothing is lost or reordered; the first output of an
  idle stream goes out at once. A message that would exceed the server's send limit is split (the
  outputs in halves, the errors last).
- **No task per output.** A request whose Llm stream comes from an `OutputChannel` (an engine's, a
  mock's, a router's RemoteLlm over GenerateMux) is read with `GenerateStream.listen` and `take`: the
  engine's output loop marks it ready, and the writer takes every ready request's outputs just before
  it writes. So an engine step costs the worker one wake-up of the writer, not one task wake-up per
  request. Any other stream is relayed by a task of its own, as before.
- **Cancel = abort.** A `cancel` id closes the request's Llm stream (which aborts it); nothing more is
  sent for it. The stream's end (client gone, cancelled, the server stopping) aborts every request
  still on it.
- **Draining** refuses new requests with a per-request UNAVAILABLE; running ones go on.
- **Given up**: per-request HTTP/2 flow control (a slow reader's outputs merge here, bounded by its
  max_tokens) and per-call deadlines (the client bounds its waits itself).

Bytes that are not a `MuxRequest` end the whole call with INVALID_ARGUMENT (the client is broken).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable

from vllm_llm import AdmissionRefused, GenerateStream, InvalidRequest, Llm, LlmError, Unavailable
from vllm_llm._channel import merge_outputs
from vllm_llm.wire import (
    GenerateOutput,
    GenerateRequest,
    MuxError,
    MuxRequest,
    MuxResponse,
    encode,
)
from vllm_server.errors import RequestError, map_error
from vllm_server.grpc.guarded import Undecodable
from vllm_server.grpc.status import ServicerContext, abort_call
from vllm_server.metrics import Metrics, ServedRequest

__all__ = ["MuxSession"]

logger = logging.getLogger(__name__)


class _Listened:
    """A running request whose outputs the writer takes from its stream (`GenerateStream.listen`)."""

    __slots__ = ("served", "stream")

    def __init__(self, stream: GenerateStream, served: ServedRequest) -> None:
        self.stream = stream
        self.served = served


class MuxSession:
    """One GenerateMux call: its reader, its requests and its writer (`serve`)."""

    def __init__(
        self,
        llm: Llm,
        *,
        metrics: Metrics | None,
        draining: Callable[[], bool],
        service: str,
        max_message_bytes: int = 64 << 20,
    ) -> None:
        self._llm = llm
        self._max_message_bytes = max_message_bytes
        self._metrics = metrics
        self._draining = draining
        self._service = service
        #: Requests by id whose task starts them, or relays a stream that cannot be listened to.
        self._running: dict[str, asyncio.Task[None]] = {}
        #: Running requests by id whose outputs the writer takes.
        self._listened: dict[str, _Listened] = {}
        #: Listened requests with something to take, in order of readiness (a dict as an ordered set).
        self._ready: dict[str, None] = {}
        #: Streams of cancelled listened requests being closed (aborted).
        self._closing: set[asyncio.Task[None]] = set()
        #: One merged output per request with outputs not written yet (in order of first arrival).
        self._pending: dict[str, GenerateOutput] = {}
        self._errors: list[MuxError] = []
        self._reading = True
        self._broken: Undecodable | None = None
        self._waiter: asyncio.Future[None] | None = None
        #: Requests started on this stream so far.
        self.started = 0

    async def serve(
        self, requests: AsyncIterator[MuxRequest | Undecodable], context: ServicerContext
    ) -> None:
        """Run the call: read requests, write what is pending, until the client half-closed and every
        request ended; then the call ends OK. Leaving early (cancelled) aborts every request still on it."""
        loop = asyncio.get_running_loop()
        reader = asyncio.create_task(self._read(requests))
        try:
            while True:
                if self._broken is not None:
                    await abort_call(context, InvalidRequest(self._broken.message), service=self._service)
                if self._ready:
                    self._take_ready()
                if not self._pending and not self._errors:
                    running = self._running or self._listened
                    if not running and (not self._reading or self._draining()):
                        return  # the client half-closed, or the server drains: the call ends OK
                    self._waiter = loop.create_future()
                    try:
                        await self._waiter
                    finally:
                        self._waiter = None
                    continue
                outputs = list(self._pending.values())
                self._pending.clear()
                errors, self._errors = self._errors, []
                await self._write(context, outputs, errors)
        finally:
            reader.cancel()
            tasks = [reader, *self._running.values()]
            for task in tasks:
                task.cancel()
            listened, self._listened = list(self._listened.values()), {}
            for entry in listened:
                self._close(entry)
            await asyncio.gather(*tasks, *self._closing, return_exceptions=True)

    def _on_ready(self, rid: str) -> None:
        """A listened request has outputs (or its end) to take: the producer's call, so it never raises."""
        self._ready[rid] = None
        self._wake()

    def _take_ready(self) -> None:
        """Take the outputs of every ready listened request into `_pending`; end the requests that ended."""
        ready, self._ready = self._ready, {}
        for rid in ready:
            entry = self._listened.get(rid)
            if entry is None:
                continue  # cancelled since
            stream = entry.stream
            failed = False
            try:
                while (out := stream.take()) is not None:
                    entry.served.output(out)
                    self._add_pending(rid, out)
            except Exception as exc:
                self._fail(rid, exc)
                failed = True
            if failed or stream.finished:
                del self._listened[rid]
                self._close(entry)

    def _add_pending(self, rid: str, out: GenerateOutput) -> None:
        """Merge `out` into request `rid`'s output not written yet."""
        pending = self._pending
        before = pending.get(rid)
        pending[rid] = out if before is None else merge_outputs(before, out)

    def _close(self, entry: _Listened) -> None:
        """A listened request ended: count it, and close its stream if it did not end there (a cancel, the
        stream's end, a failure of ours while taking), which aborts it."""
        entry.served.finish()
        if entry.stream.finished:
            return
        task = asyncio.get_running_loop().create_task(entry.stream.aclose())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    async def _write(
        self, context: ServicerContext, outputs: list[GenerateOutput], errors: list[MuxError]
    ) -> None:
        """Write `outputs` and `errors` as one message, or as several when that would exceed the send
        limit (outputs split in halves; the errors go last, after any output of their requests)."""
        data = encode(MuxResponse(outputs=outputs or None, errors=errors or None))
        if len(data) <= self._max_message_bytes or len(outputs) <= 1:
            await context.write(data)  # one output over the limit fails the call, as Generate's would
            return
        half = len(outputs) // 2
        await self._write(context, outputs[:half], [])
        await self._write(context, outputs[half:], errors)

    def drain(self) -> None:
        """The server began draining: end the call once its running requests ended."""
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _read(self, requests: AsyncIterator[MuxRequest | Undecodable]) -> None:
        try:
            async for message in requests:
                if isinstance(message, Undecodable):
                    self._broken = message
                    return
                for rid in message.cancel or ():
                    task = self._running.pop(rid, None)
                    if task is not None:
                        task.cancel()  # its `finally` closes the Llm stream: the request is aborted
                        self._pending.pop(rid, None)
                    entry = self._listened.pop(rid, None)
                    if entry is not None:
                        self._ready.pop(rid, None)
                        self._pending.pop(rid, None)
                        self._close(entry)
                for request in message.generate or ():
                    self._start(request)
        finally:
            self._reading = False
            self._wake()

    def _start(self, request: GenerateRequest) -> None:
        rid = request.request_id
        if rid in self._running or rid in self._listened:
            self._fail(rid, InvalidRequest(f"request {rid!r} is already running on this stream"))
        elif self._draining():
            self._fail(rid, Unavailable("the server is draining; send the request elsewhere"))
        else:
            self.started += 1
            self._running[rid] = asyncio.create_task(self._relay(request), name=f"mux {rid}")

    def _fail(self, rid: str, exc: BaseException) -> None:
        if not isinstance(exc, LlmError | RequestError):
            logger.exception("%s GenerateMux request %r failed", self._service, rid, exc_info=exc)
        mapping = map_error(exc)
        refusal = exc.reason if isinstance(exc, AdmissionRefused) else None
        self._errors.append(
            MuxError(request_id=rid, code=mapping.grpc_code.name, message=mapping.message, refusal=refusal)
        )
        self._wake()

    async def _relay(self, request: GenerateRequest) -> None:
        """Start the request. Then hand its stream to the writer (`listen`), or else merge its outputs
        into `_pending` until its final output."""
        rid = request.request_id
        try:
            stream = await self._llm.generate(request)
        except Exception as exc:
            self._running.pop(rid, None)
            self._fail(rid, exc)
            return
        if self._metrics is not None:
            stream = self._metrics.tap(stream, request)
        served = ServedRequest(self._metrics, request)
        if self._running.get(rid) is asyncio.current_task():
            self._listened[rid] = _Listened(stream, served)
            if stream.listen(lambda: self._on_ready(rid)):
                del self._running[rid]  # the writer takes its outputs from here on
                return
            del self._listened[rid]
        try:
            async for out in stream:
                served.output(out)
                self._add_pending(rid, out)
                self._wake()
        except Exception as exc:
            self._fail(rid, exc)
        finally:
            if self._running.get(rid) is asyncio.current_task():
                del self._running[rid]
            await stream.aclose()
            served.finish()
            self._wake()
