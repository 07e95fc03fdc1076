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

from vllm_llm import InvalidRequest, Llm, LlmError, Unavailable
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


class MuxSession:
    """One GenerateMux call: its reader, its requests' tasks and its writer (`serve`)."""

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
        #: Running requests by id: the task that relays the request's stream.
        self._running: dict[str, asyncio.Task[None]] = {}
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
                if not self._pending and not self._errors:
                    if not self._running and (not self._reading or self._draining()):
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
            await asyncio.gather(*tasks, return_exceptions=True)

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
                for request in message.generate or ():
                    self._start(request)
        finally:
            self._reading = False
            self._wake()

    def _start(self, request: GenerateRequest) -> None:
        rid = request.request_id
        if rid in self._running:
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
        self._errors.append(MuxError(request_id=rid, code=mapping.grpc_code.name, message=mapping.message))
        self._wake()

    async def _relay(self, request: GenerateRequest) -> None:
        """Start the request and merge its outputs into `_pending` until its final output."""
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
        pending = self._pending
        try:
            async for out in stream:
                served.output(out)
                before = pending.get(rid)
                pending[rid] = out if before is None else merge_outputs(before, out)
                self._wake()
        except Exception as exc:
            self._fail(rid, exc)
        finally:
            if self._running.get(rid) is asyncio.current_task():
                del self._running[rid]
            await stream.aclose()
            served.finish()
            self._wake()
