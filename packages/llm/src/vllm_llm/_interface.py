"""The `Llm` interface: a lowered generate request in, raw token-level delta outputs out.

Contract of `generate`:
- validation errors raise (as `InvalidRequest` and friends) before the first output;
- the stream is always delta (new tokens only) and ends after the output that has a finish reason;
- closing the stream early aborts the request;
- `abort(ids)` takes external request ids; each aborted stream ends with `finish_reason=abort`.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence

from vllm_llm._stream import GenerateStream
from vllm_llm.watch import Watch
from vllm_llm.wire import GenerateRequest, LlmInfo


class Llm(abc.ABC):
    """A language model at the Llm boundary."""

    @abc.abstractmethod
    def info(self) -> LlmInfo:
        """Model facts a caller needs; raises `Unavailable` before the Llm has started."""

    @abc.abstractmethod
    def subscribe_health(self) -> Watch[bool]:
        """Liveness: true until a permanent failure, then false for good."""

    @abc.abstractmethod
    def subscribe_readiness(self) -> Watch[bool]:
        """Whether new requests can be taken now (false while starting, paused, asleep, draining)."""

    @abc.abstractmethod
    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Validate and submit `request`; return the stream of its delta outputs."""

    @abc.abstractmethod
    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort in-flight requests by external id; unknown or finished ids are ignored."""

    @abc.abstractmethod
    async def shutdown(self) -> None:
        """Release the Llm's resources; later calls fail."""
