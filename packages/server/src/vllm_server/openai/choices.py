"""`ChoiceLog`: one choice assembled from its deltas, for the non-streaming responses."""

from __future__ import annotations

from vllm_llm import TokenLogprobs

__all__ = ["ChoiceLog"]


class ChoiceLog:
    """The text, tokens, logprobs and finish of one choice, as its deltas arrive."""

    __slots__ = ("finish_reason", "logprobs", "parts", "stop_reason", "token_ids")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.token_ids: list[int] = []
        self.logprobs: list[TokenLogprobs] | None = None
        self.finish_reason: str | None = None
        self.stop_reason: int | str | None = None

    def add(
        self,
        text: str,
        token_ids: list[int],
        logprobs: list[TokenLogprobs] | None,
        finish_reason: str | None,
        stop_reason: int | str | None,
    ) -> None:
        """Append one delta."""
        if text:
            self.parts.append(text)
        self.token_ids.extend(token_ids)
        if logprobs is not None:
            if self.logprobs is None:
                self.logprobs = []
            self.logprobs.extend(logprobs)
        if finish_reason is not None:
            self.finish_reason = finish_reason
            self.stop_reason = stop_reason

    @property
    def text(self) -> str:
        """The whole text."""
        return "".join(self.parts)
