"""A worker's responses are decoded as untrusted input: foreign MessagePack extension types are refused.

The wire's decoders (`vllm_llm.wire.decoder`, used for responses as well as requests) keep only the
tensor's extension type (3) in `any` values; any other (vLLM's pickle type 1, cloudpickle's 2, ...)
raises `ForeignExtension`. Through a RemoteLlm such a response is a typed `Remote(code="DATA_LOSS")`
error, and the call is cancelled, never decoded silently and forwarded.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import msgspec
import pytest

from tests.support.grpc_serving import eventually, request, serving
from vllm_llm import GenerateStream, MockLlm, Remote
from vllm_llm import wire as wire_module
from vllm_llm.mock import default_info
from vllm_llm.wire import TENSOR_EXT_CODE, GenerateOutput, GenerateRequest, LlmInfo, decode, decoder
from vllm_llm.wire._codec import ForeignExtension
from vllm_remote_llm import RemoteLlm

FOREIGN = msgspec.msgpack.Ext(1, b"\x80\x04K\x01.")  # vLLM's CUSTOM_TYPE_PICKLE, pickling the int 1
TENSOR_BYTES = msgspec.msgpack.Ext(TENSOR_EXT_CODE, b"\x00" * 4)

STRUCTS = [
    obj
    for name in wire_module.__all__
    if isinstance(obj := getattr(wire_module, name), type) and issubclass(obj, msgspec.Struct)
]


def _holding(t: msgspec.inspect.Type, leaf: object) -> object | None:
    """A value of type `t` with `leaf` where `t` reads an `any` value (None: `t` reads none)."""
    if isinstance(t, msgspec.inspect.AnyType):
        return leaf
    if isinstance(t, msgspec.inspect.DictType):
        inner = _holding(t.value_type, leaf)
        return None if inner is None else {"x": inner}
    if isinstance(t, msgspec.inspect.ListType):
        inner = _holding(t.item_type, leaf)
        return None if inner is None else [inner]
    if isinstance(t, msgspec.inspect.UnionType):
        for member in t.types:
            inner = _holding(member, leaf)
            if inner is not None:
                return inner
    return None  # scalars, and nested Structs (checked as their own type)


ANY_FIELDS = [
    (struct, field.encode_name)
    for struct in STRUCTS
    for field in msgspec.inspect.type_info(struct).fields  # type: ignore[attr-defined]
    if _holding(field.type, FOREIGN) is not None
]


def test_every_any_value_of_the_wire_is_found() -> None:
    """The fields below are every `any` the spec has; none is in a positional (array) struct."""
    assert {f"{s.__name__}.{f}" for s, f in ANY_FIELDS} >= {
        "GenerateOutput.kv_transfer_params",
        "GenerateOutput.ec_transfer_params",
        "GenerateRequest.kv_transfer_params",
        "SamplingParams.extra_args",
        "StructuredOutputs.json",
        "KvHintAction.payload",
    }
    assert not [s for s, _ in ANY_FIELDS if msgspec.inspect.type_info(s).array_like]  # type: ignore[attr-defined]


@pytest.mark.parametrize(("struct", "field"), ANY_FIELDS, ids=[f"{s.__name__}.{f}" for s, f in ANY_FIELDS])
def test_every_wire_decoder_refuses_foreign_extensions_in_any_values(struct: type[Any], field: str) -> None:
    info = next(f for f in msgspec.inspect.type_info(struct).fields if f.encode_name == field)  # type: ignore[attr-defined]
    with pytest.raises(ForeignExtension, match="extension type 1 is not accepted"):
        decoder(struct).decode(msgspec.msgpack.encode({field: _holding(info.type, FOREIGN)}))
    with pytest.raises(msgspec.DecodeError):  # what every caller that handles undecodable bytes catches
        decode(msgspec.msgpack.encode({field: _holding(info.type, msgspec.msgpack.Ext(2, b"x"))}), struct)
    try:  # the tensor's type passes (the body may still miss required fields: that is another error)
        decoder(struct).decode(msgspec.msgpack.encode({field: _holding(info.type, TENSOR_BYTES)}))
    except ForeignExtension:  # pragma: no cover - the failure this guards against
        pytest.fail("the tensor's extension type was refused")
    except msgspec.ValidationError:
        pass


def test_a_tensor_extension_in_an_any_value_still_decodes() -> None:
    raw = msgspec.msgpack.encode(
        {"request_id": "r", "token_ids": [], "kv_transfer_params": {"t": TENSOR_BYTES}}
    )
    out = decoder(GenerateOutput).decode(raw)
    assert out.kv_transfer_params == {"t": TENSOR_BYTES}


class ForeignExtensionLlm(MockLlm):
    """A MockLlm whose third output carries a foreign extension type in `kv_transfer_params`."""

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        stream = await super().generate(request)

        async def outputs() -> AsyncIterator[GenerateOutput]:
            n = 0
            async for out in stream:
                n += 1
                if n == 3:
                    out.kv_transfer_params = {"x": [FOREIGN]}
                yield out

        return GenerateStream(request.request_id, outputs(), stream.aclose)


async def test_a_worker_output_with_a_foreign_extension_is_a_typed_error() -> None:
    llm = ForeignExtensionLlm(step_interval=0.002)
    async with serving(llm) as served:
        remote = await RemoteLlm.connect(served.target, connect_timeout=10)
        stream = await remote.generate(request("foreign", max_tokens=100_000))
        received: list[GenerateOutput] = []
        with pytest.raises(Remote) as err:
            await _read_into(received, stream)
        assert err.value.code == "DATA_LOSS"
        assert "undecodable output for request 'foreign'" in err.value.message
        assert "extension type 1 is not accepted" in err.value.message
        assert len(received) == 2  # the outputs before it, nothing of it
        # The call was cancelled, not left open: the worker aborted the request.
        await eventually(lambda: llm.aborted == ["foreign"], what="the request aborted on the worker")
        await remote.shutdown()
    await llm.shutdown()


async def _read_into(received: list[GenerateOutput], stream: GenerateStream) -> None:
    async for out in stream:
        received.append(out)


async def test_a_foreign_extension_in_llm_info_is_a_typed_error() -> None:
    """LlmInfo has no `any` value: its typed fields refuse an extension (msgspec's type check)."""
    llm = MockLlm(info=_info_with(model=FOREIGN))
    async with serving(llm) as served:
        with pytest.raises(Remote) as err:
            await RemoteLlm.connect(served.target, connect_timeout=10)
    assert err.value.code == "DATA_LOSS"
    assert "undecodable LlmInfo" in err.value.message
    await llm.shutdown()


def _info_with(**changes: Any) -> LlmInfo:
    base = default_info()
    return LlmInfo(**({f: getattr(base, f) for f in base.__struct_fields__} | changes))
