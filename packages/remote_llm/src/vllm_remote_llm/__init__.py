"""RemoteLlm: an `Llm` over a server's internal gRPC service `vllm.internal.Llm` (MessagePack, no .proto)."""

from vllm_remote_llm._channel import Keepalive, RemoteTls
from vllm_remote_llm._errors import WireRevisionMismatch
from vllm_remote_llm.remote import RemoteLlm
from vllm_remote_llm.stub import LlmStub

__all__ = [
    "Keepalive",
    "LlmStub",
    "RemoteLlm",
    "RemoteTls",
    "WireRevisionMismatch",
]
