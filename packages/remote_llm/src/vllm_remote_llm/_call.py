"""`CallOutputs`: the outputs of one Generate call, the async iterator behind a RemoteLlm stream.

Aborting a call cancels it: the cancellation travels on the call's own HTTP/2 stream, so it reaches
exactly the worker that serves the request, whichever the channel picked (the worker's handler then
closes its Llm stream, which aborts the request there). The stream here ends with an ABORT output made
locally, since a cancelled call delivers nothing more.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import grpc

from vllm_llm import Remote, Unavailable
from vllm_llm.wire import FinishReason, GenerateOutput
from vllm_remote_llm._errors import error_of_status, translate_errors
from vllm_remote_llm.protocol import ACCEPTED_KEY


class CallOutputs:
    """The delta outputs of one Generate call (see the module docstring)."""

    __slots__ = ("_aborted", "_call", "_done", "_first_within", "_on_done", "request_id")

    def __init__(self, call: Any, request_id: str, on_done: Callable[[CallOutputs], None]) -> None:
        self.request_id = request_id
        self._call = call
        self._on_done: Callable[[CallOutputs], None] | None = on_done
        self._aborted = False
        self._done = False
        self._first_within: float | None = None

    async def start(self, within: float | None) -> None:
        """Wait until the server accepted the request, or raise the call's failure (validation errors).

        The server sends its initial metadata, marked `ACCEPTED_KEY`, once its Llm took the request; a
        call that fails before that ends with only a status. Nothing here waits for the first output;
        the first read is bounded by `within` too (a stalled server surfaces as Unavailable).
        """
        self._first_within = within
        try:
            async with asyncio.timeout(within):
                with translate_errors():
                    metadata = await self._call.initial_metadata()
                if not any(key == ACCEPTED_KEY for key, _ in metadata or ()):
                    code = await self._call.code()
                    raise error_of_status(code, await self._call.details())
        except TimeoutError as exc:
            self.close()
            raise Unavailable(f"the server did not accept the request within {within} s") from exc
        except BaseException:
            self.close()
            raise

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
        if self._done:
            raise StopAsyncIteration
        if self._aborted:
            return self._aborted_output()
        within, self._first_within = self._first_within, None
        try:
            with translate_errors():
                async with asyncio.timeout(within):
                    out = await self._call.read()
        except TimeoutError as exc:
            self.close()
            raise Unavailable(f"no output from the server within {within} s") from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if self._aborted and task is not None and not task.cancelling():
                return self._aborted_output()  # our own `abort` cancelled the call
            self.close()
            raise
        except BaseException:
            self._end()
            raise
        if out is grpc.aio.EOF or out is None:
            self._end()
            what = "ended without a final output" if out is grpc.aio.EOF else "sent an undecodable output"
            raise Remote(f"the server {what} for request {self.request_id!r}", code="DATA_LOSS")
        if out.finish_reason is not None:
            self._end()
        return out  # type: ignore[no-any-return]

    def _aborted_output(self) -> GenerateOutput:
        self._end()
        return GenerateOutput(request_id=self.request_id, token_ids=[], finish_reason=FinishReason.ABORT)

    def _end(self) -> None:
        self._done = True
        on_done, self._on_done = self._on_done, None
        if on_done is not None:
            on_done(self)
