"""`ServerState`: what every route and service reads, built in one place (the server's wiring).

The text and chat layers need the Llm's info (its tokenizer), so they exist once the Llm is ready;
until then `text()` / `chat()` raise `Unavailable` (HTTP 503).

Over a provided Llm that can re-read its info (a router's `RemoteLlm`), the LoRA adapters served are
the workers' as last read: re-read on a request for a model not known yet, on each model list and in the
background, one read at a time, each caller served by a read that started after it asked
(`vllm_server.fresh_read` says why that and not a time window).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

from vllm_llm import ChatLlm, EngineCoreLlm, Llm, TextLlm, Unavailable
from vllm_llm.watch import Watch, WatchSender
from vllm_llm.wire import LlmInfo, LoraAdapter
from vllm_server.config import FrontendConfig, LoraModule, ServerConfig
from vllm_server.fresh_read import FreshRead
from vllm_server.load import LoadCounter
from vllm_server.metrics import Metrics

if TYPE_CHECKING:
    from vllm_llm.multimodal import MultiModalOptions


@dataclass
class ServerState:
    """The server's shared state."""

    config: FrontendConfig
    llm: Llm
    #: The engine core, only when the server owns it (LlmSource.engine_core); None for a provided Llm.
    engine: EngineCoreLlm | None
    metrics: Metrics
    load: LoadCounter = field(default_factory=LoadCounter)
    #: LoRA adapters served as models: name -> (adapter, lora_int_id).
    lora_modules: dict[str, tuple[LoraModule, int]] = field(default_factory=dict)
    _text: TextLlm | None = None
    _chat: ChatLlm | None = None
    _names: tuple[str, ...] = ()
    _draining: bool = False
    _adapter_reads: FreshRead[None] | None = None
    _ready: WatchSender[bool] = field(default_factory=lambda: WatchSender(False))

    # ---- the text and chat layers ---------------------------------------------------------------

    def attach_layers(self) -> None:
        """Build the text and chat layers over the Llm (once it has started)."""
        if self._text is not None:
            return
        server = self.config.server
        text = TextLlm(self.llm, tokenizer=server.tokenizer)
        source = text.tokenizer_source
        if isinstance(source, str) and not source:
            self._chat = None  # token-only by design: the text routes answer NoTokenizer (501)
        else:
            try:
                text.tokenizer  # noqa: B018  # loaded now: a tokenizer that cannot load fails the start-up
            except Exception as exc:
                raise StartupError(
                    f"the tokenizer {str(source)!r} cannot be loaded ({exc}); it comes from "
                    f"{'--tokenizer' if server.tokenizer is not None else 'the Llm (LlmInfo.tokenizer)'}: "
                    "give --tokenizer (ServerConfig.tokenizer) a directory with a tokenizer.json"
                ) from exc
            self._chat = ChatLlm(
                text,
                chat_template=server.chat_template,
                content_format=server.chat_template_content_format,
                response_role=server.response_role,
                parsers=server.parsers,
                multimodal=_multimodal_options(server, self.llm.info()),
                default_template_kwargs=server.default_chat_template_kwargs,
                exclude_tools_when_tool_choice_none=server.exclude_tools_when_tool_choice_none,
            )
        self._text = text
        info = self.llm.info()
        if self.engine is None:
            self.adopt_adapters(info)
        self._names = server.served_model_name or (info.served_model_name,)
        self.metrics.model_name = self._names[0]

    def text(self) -> TextLlm:
        """The text layer; `Unavailable` until the Llm has started."""
        if self._text is None:
            raise Unavailable("the model is not loaded yet")
        return self._text

    def chat(self) -> ChatLlm:
        """The chat layer; `Unavailable` until the Llm has started, `NoTokenizer` over a token-only Llm."""
        if self._chat is None:
            if self._text is not None:
                self._text.tokenizer  # noqa: B018  # raises NoTokenizer: there is no chat without one
            raise Unavailable("the model is not loaded yet")
        return self._chat

    @property
    def served_model_names(self) -> tuple[str, ...]:
        """The names the base model is served under (the first is primary)."""
        return self._names

    # ---- liveness, readiness and draining --------------------------------------------------------

    @property
    def alive(self) -> bool:
        """`/health`: the Llm is alive, and an engine this server starts has started. vLLM's server does
        not listen before its engine started, so a probe or a router polling `/health` (vllm-router
        does) sees it down; ours listens at once (a port in use fails the start before the engine
        loads) and answers 503 until then. A provided or remote Llm is alive as its health says."""
        return self.llm.subscribe_health().value and (self.engine is None or self._text is not None)

    # ---- readiness and draining -------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        """Whether the server is shutting down (new requests get 503 / UNAVAILABLE)."""
        return self._draining

    def begin_drain(self) -> None:
        """Stop taking new requests."""
        self._draining = True
        self.update_readiness()

    def update_readiness(self) -> None:
        """Recompute the server's readiness from the Llm's and the drain state."""
        ready = self.llm.subscribe_readiness().value and self._text is not None and not self._draining
        self._ready.send(ready)

    def subscribe_readiness(self) -> Watch[bool]:
        """Server readiness: the Llm is ready, the layers are built, and the server is not draining."""
        return self._ready.subscribe()

    # ---- LoRA adapters -----------------------------------------------------------------------------

    def served_info(self) -> LlmInfo:
        """The Llm's info with the LoRA adapters this server serves (what `vllm.internal.Llm/Info` says)."""
        adapters = [
            LoraAdapter(
                name=name,
                lora_int_id=lora_id,
                path=module.path,
                base_model_name=module.base_model_name,
                is_3d_lora_weight=module.is_3d_lora_weight,
            )
            for name, (module, lora_id) in self.lora_modules.items()
        ]
        return msgspec.structs.replace(self.llm.info(), lora_adapters=adapters or None)

    def adopt_adapters(self, info: LlmInfo) -> None:
        """Serve the adapters `info` names (a provided Llm's, e.g. a router's workers'), as they are now."""
        self.lora_modules = {
            a.name: (
                LoraModule(
                    name=a.name,
                    path=a.path,
                    base_model_name=a.base_model_name,
                    is_3d_lora_weight=a.is_3d_lora_weight,
                ),
                a.lora_int_id,
            )
            for a in info.lora_adapters or ()
        }

    async def refresh_adapters(self) -> bool:
        """Re-read a provided Llm's adapters (RemoteLlm: a worker's Info) in a read that started after this
        call, shared with every caller waiting meanwhile; whether this Llm's adapters can be re-read."""
        refresh = getattr(self.llm, "refresh_info", None)
        if self.engine is not None or refresh is None:
            return False
        if self._adapter_reads is None:

            async def read() -> None:
                self.adopt_adapters(await refresh())

            self._adapter_reads = FreshRead(read)
        await self._adapter_reads.read()
        return True

    def check_accepting(self) -> None:
        """Raise `Unavailable` when new requests cannot be taken now."""
        if self._draining:
            raise Unavailable("the server is shutting down")


class StartupError(RuntimeError):
    """The server cannot serve as configured (e.g. its tokenizer does not load); it stops at start-up."""


def _multimodal_options(server: ServerConfig, info: LlmInfo) -> MultiModalOptions | None:
    """The chat layer's multimodal settings, for a model that takes media (vllm-llm[multimodal])."""
    if not info.supports_multimodal:
        return None
    from vllm_llm.multimodal import MediaOptions, MultiModalOptions

    return MultiModalOptions(
        media=MediaOptions.from_env(
            allowed_local_media_path=server.allowed_local_media_path,
            allowed_media_domains=server.allowed_media_domains,
        ),
        limit_mm_per_prompt=dict(server.limit_mm_per_prompt),
        mm_processor_kwargs=dict(server.mm_processor_kwargs),
    )
