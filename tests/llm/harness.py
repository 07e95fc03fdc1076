"""What the contract suite needs from an `Llm` implementation under test: one `Harness` per kind."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from vllm_llm import GenerateStream, Llm
from vllm_llm.wire import FinishReason, GenerateOutput, GenerateRequest, SamplingParams


@dataclass
class Collected:
    """Everything one stream delivered."""

    outputs: list[GenerateOutput]

    @property
    def token_ids(self) -> list[int]:
        """All tokens, in order."""
        return [t for o in self.outputs for t in o.token_ids]

    @property
    def final(self) -> GenerateOutput:
        """The output with the finish reason."""
        return self.outputs[-1]

    @property
    def finish_reason(self) -> FinishReason | None:
        """The finish reason of the final output."""
        return self.final.finish_reason


async def collect(stream: GenerateStream) -> Collected:
    """Read a stream to its end."""
    return Collected([o async for o in stream])


@dataclass
class Harness:
    """An `Llm` under test and the hooks the contract suite needs around it."""

    name: str
    llm: Llm
    pause: Callable[[], Awaitable[None]]
    resume: Callable[[], Awaitable[None]]
    in_flight: Callable[[], Awaitable[int]]
    prompt: list[int] = field(default_factory=lambda: [5, 17, 42, 99, 7])

    def request(
        self, request_id: str, *, prompt: list[int] | None = None, **sampling: object
    ) -> GenerateRequest:
        """A greedy request (temperature 0) with `sampling` overrides."""
        params: dict[str, object] = {"temperature": 0.0, "max_tokens": 8, **sampling}
        return GenerateRequest(
            request_id=request_id,
            prompt_token_ids=list(self.prompt if prompt is None else prompt),
            sampling_params=SamplingParams(**params),  # type: ignore[arg-type]
        )
