"""`StreamPacer`: vLLM's stream interval for one request's delta outputs.

With an interval N > 1, an output goes out at once when it is the request's first or its final one;
any other is held and merged with the next until at least N new tokens are waiting (vLLM's
`OutputProcessor`, `--stream-interval` and `SamplingParams.stream_interval`). Fewer, larger outputs cost
fewer messages on every hop behind the Llm (gRPC, SSE); nothing is dropped or reordered, and an abort
delivers what was held before its ABORT output (`flush`).
"""

from __future__ import annotations

from vllm_llm._channel import merge_outputs
from vllm_llm.wire import GenerateOutput


def effective_interval(requested: int | None, engine: int) -> int:
    """The interval of one request: its own, raised to the Llm's (vLLM clamps the same way)."""
    return engine if requested is None else max(requested, engine)


class StreamPacer:
    """Holds a request's outputs until `interval` new tokens are waiting (see the module docstring)."""

    __slots__ = ("_held", "_sent_first", "interval")

    def __init__(self, interval: int) -> None:
        self.interval = interval
        self._held: GenerateOutput | None = None
        self._sent_first = False

    def pace(self, out: GenerateOutput) -> GenerateOutput | None:
        """The output to send now (`out` merged after anything held), or None while it is held."""
        if self.interval <= 1:
            return out
        held, self._held = self._held, None
        if held is not None:
            out = merge_outputs(held, out)
        if not self._sent_first or out.finish_reason is not None or len(out.token_ids) >= self.interval:
            self._sent_first = True
            return out
        self._held = out
        return None

    def flush(self) -> GenerateOutput | None:
        """What is held (to deliver before an abort output), or None."""
        held, self._held = self._held, None
        return held
