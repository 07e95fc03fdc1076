"""Hostile bytes on the internal gRPC port: every case gets a typed status, nothing reaches the engine.

Raw bytes go out through `channel.unary_stream(path)` / `unary_unary(path)` without serializers, so the
server's own decoding is what is tested.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import msgspec
import pytest
import pytest_asyncio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cluster import no_engine_work
from tests.support.grpc_serving import Served, serving
from vllm_llm import MockLlm
from vllm_llm.wire import ABORT, GENERATE, INFO, FinishReason, GenerateOutput, encode

MAX_MESSAGE = 1 << 20
KEY = msgspec.msgpack.encode


def _map(**fields: bytes) -> bytes:
    """A msgpack map (at most 15 entries) of already-encoded values, so any bytes can be a value."""
    return bytes([0x80 | len(fields)]) + b"".join(KEY(k) + v for k, v in fields.items())


VALID: dict[str, Any] = {
    "request_id": "ok",
    "prompt_token_ids": [5, 6, 7],
    "sampling_params": {"max_tokens": 3},
}
VALID_BYTES = KEY(VALID)


def _with_kv(value: bytes) -> bytes:
    fields = {k: KEY(v) for k, v in VALID.items()}
    return _map(**fields, kv_transfer_params=_map(x=value))


GARBAGE: dict[str, bytes] = {
    "random bytes": b"\xff\xfe\xfd garbage \x00\x01",
    "empty message": b"",
    "truncated": VALID_BYTES[:-3],
    "a bare int": KEY(7),
    "mistyped fields": KEY({"request_id": 5, "prompt_token_ids": "x", "sampling_params": []}),
    "missing fields": KEY({"request_id": "x"}),
    "array header claiming 2**32-1 elements": _map(
        request_id=KEY("x"), prompt_token_ids=b"\xdd\xff\xff\xff\xff"
    ),
    "map header claiming 2**32-1 entries": b"\xdf\xff\xff\xff\xff",
    "str header claiming 4 GiB": _map(request_id=b"\xdb\xff\xff\xff\xff"),
    "100k nested lists in kv_transfer_params": _with_kv(b"\x91" * 100_000 + b"\xc0"),
    "100k nested maps in kv_transfer_params": _with_kv(b"\x81\xa1k" * 100_000 + b"\xc0"),
    "ext type 1 (vLLM's pickle) in kv_transfer_params": _with_kv(
        KEY(msgspec.msgpack.Ext(1, b"\x80\x04K\x01."))
    ),
    "ext type 2 (cloudpickle) in kv_transfer_params": _with_kv(KEY(msgspec.msgpack.Ext(2, b"payload"))),
    "ext type 1 as the request id": _map(request_id=KEY(msgspec.msgpack.Ext(1, b"x"))),
    "tensor with a foreign ext type": _map(
        **{k: KEY(v) for k, v in VALID.items()},
        prompt_embeds=KEY(["float32", [1], msgspec.msgpack.Ext(1, b"\x00" * 4)]),
    ),
    "tensor with a lying shape": _map(
        **{k: KEY(v) for k, v in VALID.items()},
        prompt_embeds=KEY(["float32", [1 << 30, 1 << 30], msgspec.msgpack.Ext(3, b"\x00" * 4)]),
    ),
}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def hostile_target() -> AsyncIterator[tuple[MockLlm, Served]]:
    """A GrpcFrontend (max message 1 MiB) over a MockLlm, shared by the module."""
    mock = MockLlm(step_interval=0.001)
    async with serving(mock, max_message_bytes=MAX_MESSAGE) as served:
        yield mock, served
    await mock.shutdown()


@pytest_asyncio.fixture(loop_scope="session")
async def channel(hostile_target: tuple[MockLlm, Served]) -> AsyncIterator[grpc.aio.Channel]:
    """A plain channel that may send more than the server takes."""
    _, served = hostile_target
    options = [("grpc.max_send_message_length", 64 << 20)]
    async with grpc.aio.insecure_channel(served.target, options=options) as ch:
        yield ch


async def _generate_raw(channel: grpc.aio.Channel, raw: bytes) -> list[bytes]:
    return [out async for out in channel.unary_stream(GENERATE.path)(raw, timeout=10)]


def _assert_clean(err: grpc.aio.AioRpcError) -> None:
    details = err.details() or ""
    assert "Traceback" not in details
    assert "<class" not in details
    assert "Unexpected" not in details


async def _still_serves(mock: MockLlm, channel: grpc.aio.Channel) -> None:
    """A valid request afterwards streams to its end, and the engine is left with nothing in flight."""
    outs = [
        msgspec.msgpack.decode(raw, type=GenerateOutput) for raw in await _generate_raw(channel, VALID_BYTES)
    ]
    assert outs[-1].finish_reason == FinishReason.LENGTH
    await no_engine_work(mock)


@pytest.mark.parametrize("name", list(GARBAGE))
async def test_undecodable_generate_is_invalid_argument(
    name: str, hostile_target: tuple[MockLlm, Served], channel: grpc.aio.Channel
) -> None:
    mock, _ = hostile_target
    before = len(mock.requests)
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await _generate_raw(channel, GARBAGE[name])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT, err.value.details()
    assert "not a valid GenerateRequest" in (err.value.details() or "")
    _assert_clean(err.value)
    assert len(mock.requests) == before, "an undecodable request reached the engine"
    await _still_serves(mock, channel)


@pytest.mark.parametrize(
    ("path", "raw", "code"),
    [
        pytest.param(
            ABORT.path, KEY({"request_ids": []}), grpc.StatusCode.INVALID_ARGUMENT, id="empty Abort"
        ),
        pytest.param(ABORT.path, b"\xc1", grpc.StatusCode.INVALID_ARGUMENT, id="garbage Abort"),
        pytest.param(
            ABORT.path, KEY({"request_ids": [1, 2]}), grpc.StatusCode.INVALID_ARGUMENT, id="mistyped Abort"
        ),
        pytest.param(INFO.path, b"\xc1", grpc.StatusCode.INVALID_ARGUMENT, id="garbage Info"),
        pytest.param("/vllm.internal.Llm/Nope", b"", grpc.StatusCode.UNIMPLEMENTED, id="unknown method"),
        pytest.param("/no.Such/Service", b"", grpc.StatusCode.UNIMPLEMENTED, id="unknown service"),
        pytest.param(
            GENERATE.path, b"\x00" * (MAX_MESSAGE + 1), grpc.StatusCode.RESOURCE_EXHAUSTED, id="oversized"
        ),
    ],
)
async def test_other_hostile_calls_get_typed_statuses(
    path: str,
    raw: bytes,
    code: grpc.StatusCode,
    hostile_target: tuple[MockLlm, Served],
    channel: grpc.aio.Channel,
) -> None:
    mock, _ = hostile_target
    call = (
        _generate_raw(channel, raw) if path == GENERATE.path else channel.unary_unary(path)(raw, timeout=10)
    )
    with pytest.raises(grpc.aio.AioRpcError) as err:
        await call
    assert err.value.code() == code, err.value.details()
    _assert_clean(err.value)
    await _still_serves(mock, channel)


_ANY = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
_FIELDS = st.sampled_from(
    [
        "request_id",
        "prompt_token_ids",
        "sampling_params",
        "kv_transfer_params",
        "priority",
        "prompt_embeds",
        "lora_request",
    ]
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    raw=st.one_of(
        st.binary(max_size=64),
        st.dictionaries(_FIELDS, _ANY, max_size=6).map(KEY),
        st.builds(
            lambda d, cut: KEY(d)[:cut], st.dictionaries(_FIELDS, _ANY, max_size=6), st.integers(0, 40)
        ),
    )
)
async def test_fuzzed_generate_bytes_never_break_the_server(
    raw: bytes, hostile_target: tuple[MockLlm, Served], channel: grpc.aio.Channel
) -> None:
    mock, _ = hostile_target
    outs: list[bytes] = []
    failed: grpc.aio.AioRpcError | None = None
    try:
        outs = await _generate_raw(channel, raw)
    except grpc.aio.AioRpcError as err:
        failed = err
    if failed is not None:
        assert failed.code() == grpc.StatusCode.INVALID_ARGUMENT, (raw, failed.details())
        _assert_clean(failed)
    else:  # a body that happens to be a valid request streams to its end
        assert msgspec.msgpack.decode(outs[-1], type=GenerateOutput).finish_reason is not None
    await no_engine_work(mock)


async def test_valid_tensor_and_pickle_free_extensions_still_decode(
    hostile_target: tuple[MockLlm, Served], channel: grpc.aio.Channel
) -> None:
    """The guard refuses foreign extension types, not the tensor's (code 3) in an `any` value."""
    mock, _ = hostile_target
    raw = _with_kv(KEY(msgspec.msgpack.Ext(3, b"\x00" * 8)))
    outs = await _generate_raw(channel, raw)
    assert msgspec.msgpack.decode(outs[-1], type=GenerateOutput).finish_reason == FinishReason.LENGTH
    assert encode(mock.requests[-1].kv_transfer_params) == KEY({"x": msgspec.msgpack.Ext(3, b"\x00" * 8)})
    await no_engine_work(mock)
