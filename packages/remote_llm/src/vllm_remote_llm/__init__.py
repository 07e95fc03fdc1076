"""RemoteLlm: an `Llm` over a server's internal gRPC service `vllm.internal.Llm` (MessagePack, no .proto)."""

from vllm_remote_llm._channel import Keepalive, RemoteTls
from vllm_remote_llm._errors import WireRevisionMismatch
from vllm_remote_llm._routing import PREFIX_HASH_HEADER, OutlierDetection, Routing
from vllm_remote_llm._target import InvalidTarget, check_target
from vllm_remote_llm.remote import RemoteLlm
from vllm_remote_llm.stub import LlmStub

__all__ = [
    "PREFIX_HASH_HEADER",
    "InvalidTarget",
    "Keepalive",
    "LlmStub",
    "OutlierDetection",
    "RemoteLlm",
    "RemoteTls",
    "Routing",
    "WireRevisionMismatch",
    "check_target",
]
