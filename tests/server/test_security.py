"""TLS on HTTP and gRPC, mTLS on gRPC under --ssl-ca-certs, and the API key on both."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
import pytest_asyncio

from tests.support.certs import Pki, make_pki
from tests.support.mock import tiny_mock
from tests.support.servers import RunningServer, start_server
from vllm_llm.wire import InfoRequest
from vllm_remote_llm import LlmStub
from vllm_server.config import ServerConfig
from vllm_server.source import LlmSource

KEY = "s3cret"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    """A CA, a server certificate for 127.0.0.1, a client certificate and one from another CA."""
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest_asyncio.fixture
async def secure(pki: Pki, tiny_model_dir: Path) -> AsyncIterator[RunningServer]:
    """A server with TLS, mTLS on gRPC and an API key."""
    llm = tiny_mock(tiny_model_dir)
    config = ServerConfig(
        port=0,
        grpc_port=0,
        ssl_certfile=pki.server.cert,
        ssl_keyfile=pki.server.key,
        ssl_ca_certs=pki.ca.cert,
        api_key=KEY,
    )
    running = await start_server(config, LlmSource.provided(llm))
    yield running
    await running.stop()
    await llm.shutdown()


async def test_https_and_the_api_key(secure: RunningServer, pki: Pki) -> None:
    async with httpx.AsyncClient(
        base_url=secure.base_url, verify=ssl.create_default_context(cafile=pki.ca.cert)
    ) as http:
        assert (await http.get("/health")).status_code == 200  # probes need no key
        denied = await http.get("/v1/models")
        assert denied.status_code == 401
        assert denied.json()["error"]["type"] == "AuthenticationError"
        wrong = await http.get("/v1/models", headers={"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        ok = await http.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"})
        assert ok.status_code == 200
    with pytest.raises(httpx.ConnectError):  # a client that does not trust the CA
        async with httpx.AsyncClient(base_url=secure.base_url) as http:
            await http.get("/health")


def _credentials(pki: Pki, client: tuple[Path, Path] | None) -> grpc.ChannelCredentials:
    return grpc.ssl_channel_credentials(
        root_certificates=pki.ca.cert.read_bytes(),
        private_key=client[1].read_bytes() if client else None,
        certificate_chain=client[0].read_bytes() if client else None,
    )


async def _info(target: str, credentials: grpc.ChannelCredentials, key: str | None) -> str:
    metadata = (("authorization", f"Bearer {key}"),) if key else None
    async with grpc.aio.secure_channel(target, credentials) as channel:
        info = await LlmStub(channel).Info(InfoRequest(), metadata=metadata, timeout=10)
        return str(info.served_model_name)


async def test_grpc_mtls_and_api_key(secure: RunningServer, pki: Pki) -> None:
    target = secure.grpc_target
    assert await _info(target, _credentials(pki, (pki.client.cert, pki.client.key)), KEY) == "tiny"
    with pytest.raises(grpc.aio.AioRpcError) as no_key:
        await _info(target, _credentials(pki, (pki.client.cert, pki.client.key)), None)
    assert no_key.value.code() == grpc.StatusCode.UNAUTHENTICATED
    with pytest.raises(grpc.aio.AioRpcError) as no_cert:
        await _info(target, _credentials(pki, None), KEY)
    assert no_cert.value.code() == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(grpc.aio.AioRpcError) as stranger:
        await _info(target, _credentials(pki, (pki.stranger.cert, pki.stranger.key)), KEY)
    assert stranger.value.code() == grpc.StatusCode.UNAVAILABLE
