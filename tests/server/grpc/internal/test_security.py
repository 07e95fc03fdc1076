"""TLS, mutual TLS with certificates made here, and the API key (health stays open for probes)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2_grpc

from tests.support.certs import Pem, Pki, make_pki
from tests.support.grpc_serving import SERVING, Served, health_request, request, serving
from vllm_llm import MockLlm
from vllm_llm.wire import SERVICE_NAME, FinishReason, InfoRequest
from vllm_remote_llm import LlmStub, RemoteLlm, RemoteTls
from vllm_server.tls import TlsConfig


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def credentials(ca: Path, client: Pem | None = None) -> Any:
    return grpc.ssl_channel_credentials(
        root_certificates=ca.read_bytes(),
        private_key=client.key.read_bytes() if client is not None else None,
        certificate_chain=client.cert.read_bytes() if client is not None else None,
    )


async def info_over(target: str, creds: Any | None) -> Any:
    """Info over a fresh channel (TLS when `creds`); raises the call's AioRpcError."""
    channel = (
        grpc.aio.secure_channel(target, creds) if creds is not None else grpc.aio.insecure_channel(target)
    )
    async with channel:
        return await LlmStub(channel).Info(InfoRequest(), timeout=5)


async def test_tls(mock: MockLlm, pki: Pki) -> None:
    tls = TlsConfig(certfile=pki.server.cert, keyfile=pki.server.key)
    async with serving(mock, tls=tls) as served:
        assert (await info_over(served.target, credentials(pki.ca.cert))) == mock.info()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await info_over(served.target, None)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError):  # a server certificate the client does not trust
            await info_over(served.target, credentials(pki.other_ca.cert))


async def test_mutual_tls_requires_a_client_certificate_of_the_ca(mock: MockLlm, pki: Pki) -> None:
    tls = TlsConfig(certfile=pki.server.cert, keyfile=pki.server.key, ca_certs=pki.ca.cert)
    async with serving(mock, tls=tls) as served:
        assert (await info_over(served.target, credentials(pki.ca.cert, pki.client))) == mock.info()
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await info_over(served.target, credentials(pki.ca.cert))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.aio.AioRpcError) as err:
            await info_over(served.target, credentials(pki.ca.cert, pki.stranger))
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE


async def test_remote_llm_over_mutual_tls(mock: MockLlm, pki: Pki) -> None:
    tls = TlsConfig(certfile=pki.server.cert, keyfile=pki.server.key, ca_certs=pki.ca.cert)
    async with serving(mock, tls=tls) as served:
        remote_tls = RemoteTls.from_files(
            ca_certs=pki.ca.cert, certfile=pki.client.cert, keyfile=pki.client.key, server_name="localhost"
        )
        remote = await RemoteLlm.connect(f"ipv4:{served.target}", tls=remote_tls, connect_timeout=10)
        try:
            assert remote.subscribe_readiness().value is True
            outputs = [o async for o in await remote.generate(request("tls", max_tokens=3))]
            assert outputs[-1].finish_reason == FinishReason.LENGTH
        finally:
            await remote.shutdown()


@pytest.fixture
def keyed() -> dict[str, Any]:
    return {"api_key": "s3cret"}


async def test_api_key_is_required_but_health_stays_open(mock: MockLlm, keyed: dict[str, Any]) -> None:
    async with serving(mock, **keyed) as served, grpc.aio.insecure_channel(served.target) as channel:
        stub = LlmStub(channel)
        for metadata in [(), (("authorization", "Bearer wrong"),), (("x-api-key", "wrong"),)]:
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Info(InfoRequest(), metadata=metadata)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            with pytest.raises(grpc.aio.AioRpcError) as err:
                await stub.Generate(request("no-key"), metadata=metadata).read()
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert mock.requests == []
        assert await stub.Info(InfoRequest(), metadata=(("authorization", "Bearer s3cret"),)) == mock.info()
        assert await stub.Info(InfoRequest(), metadata=(("x-api-key", "s3cret"),)) == mock.info()
        health = health_pb2_grpc.HealthStub(channel)
        assert (await health.Check(health_request(SERVICE_NAME))).status == SERVING


async def test_remote_llm_with_an_api_key(mock: MockLlm, keyed: dict[str, Any]) -> None:
    async with serving(mock, **keyed) as served:
        await _generate_once(served, api_key="s3cret")
        with pytest.raises(Exception, match="API key"):
            await _generate_once(served, api_key="wrong")


async def _generate_once(served: Served, *, api_key: str) -> None:
    remote = await RemoteLlm.connect(served.target, api_key=api_key, connect_timeout=5)
    try:
        outputs = [o async for o in await remote.generate(request("keyed", max_tokens=2))]
        assert outputs[-1].finish_reason == FinishReason.LENGTH
    finally:
        await remote.shutdown()
