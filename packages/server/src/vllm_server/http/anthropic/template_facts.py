"""What the Anthropic route learns from the chat template once, as vLLM's AnthropicServingMessages does.

- Whether inline system messages must be merged into the leading one: a [system, user, system, user]
  conversation that the template refuses (e.g. Qwen's `loop.first` guard) says so.
- Which `reasoning_effort` stands for `thinking: {"type": "disabled"}`: the server's
  --anthropic-disabled-thinking-effort, or under its default "auto": "none", unless the template refuses it
  or renders it as it renders some thinking effort, then "low".
"""

from __future__ import annotations

from typing import get_args

import jinja2
import jinja2.ext
import jinja2.sandbox

from vllm_llm import ChatLlm, ChatMessage, ChatRequest
from vllm_server.http.anthropic.request import Effort

__all__ = ["TemplateFacts"]


class TemplateFacts:
    """The template facts of one chat layer, each worked out on first use and kept."""

    def __init__(
        self, chat: ChatLlm, override: str | None, *, disabled_thinking_effort: str = "auto"
    ) -> None:
        self._chat = chat
        self._override = override
        self._merge: bool | None = None
        #: A configured effort is taken as it is, as vLLM's; "auto" is probed on first use.
        self._disabled_effort: str | None = (
            None if disabled_thinking_effort == "auto" else disabled_thinking_effort
        )

    @property
    def merge_inline_system(self) -> bool:
        """Whether inline system messages go into the leading system message."""
        if self._merge is None:
            self._merge = any(_refuses_inline_system(t) for t in self._templates())
        return self._merge

    def _templates(self) -> list[str | None]:
        if self._override is not None:
            return [self._override]
        tokenizer = self._chat.text.tokenizer
        if tokenizer.chat_template is None:
            return [None]
        return [tokenizer.get_chat_template(has_tools=has_tools) for has_tools in (False, True)]

    @property
    def disabled_thinking_effort(self) -> str:
        """The reasoning_effort of `thinking.type == "disabled"`."""
        if self._disabled_effort is None:
            none = self._probe("none")
            ignored = none is None or any(self._probe(e) == none for e in get_args(Effort))
            self._disabled_effort = "low" if ignored else "none"
        return self._disabled_effort

    def _probe(self, effort: str) -> list[int] | None:
        request = ChatRequest(
            request_id="anthropic-effort-probe",
            messages=[ChatMessage(role="user", content="Hi")],
            reasoning_effort=effort,
        )
        try:
            return self._chat.render(request).prompt_token_ids
        except Exception:  # vLLM: a template that fails to render the effort refuses it
            return None


def _refuses_inline_system(template: str | None) -> bool:
    """vLLM's _detect_merge_inline_system: render system/user twice over; an error means system-first."""
    if not template:
        return True
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    turns = [{"role": role, "content": "t"} for role in ("system", "user", "system", "user")]
    try:
        env.from_string(template).render(messages=turns, add_generation_prompt=False)
    except jinja2.TemplateError:
        return True
    return False
