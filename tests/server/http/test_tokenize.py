"""`POST /tokenize` and `POST /detokenize`, through httpx."""

from __future__ import annotations

from tests.support.http_serving import MODEL, Served
from vllm_llm import ChatMessage, ChatRequest


async def test_tokenize_prompt(mock_server: Served) -> None:
    text = mock_server.state.text()
    r = await mock_server.http.post(
        "/tokenize", json={"model": MODEL, "prompt": "hello world", "return_token_strs": True}
    )
    body = r.json()
    assert body["tokens"] == text.encode("hello world")
    assert body["count"] == len(body["tokens"])
    assert body["max_model_len"] == 512
    assert body["token_strs"] == text.tokenizer.convert_ids_to_tokens(body["tokens"])
    r = await mock_server.http.post("/tokenize", json={"prompt": "hello world", "add_special_tokens": False})
    assert r.json()["tokens"] == text.encode("hello world", add_special_tokens=False)
    assert r.json()["token_strs"] is None


async def test_tokenize_messages(mock_server: Served) -> None:
    messages = [{"role": "user", "content": "hi there"}]
    r = await mock_server.http.post("/tokenize", json={"messages": messages})
    rendered = mock_server.state.chat().render(
        ChatRequest(request_id="r", messages=[ChatMessage(role="user", content="hi there")])
    )
    assert r.json()["tokens"] == rendered.prompt_token_ids


async def test_detokenize(mock_server: Served) -> None:
    tokens = mock_server.state.text().encode("hello world")
    r = await mock_server.http.post("/detokenize", json={"model": MODEL, "tokens": tokens})
    assert r.json() == {"prompt": mock_server.state.text().decode(tokens, skip_special_tokens=False)}
    assert r.json()["prompt"].endswith("hello world")


async def test_tokenize_errors(mock_server: Served) -> None:
    r = await mock_server.http.post("/detokenize", json={"tokens": [10**9]})
    assert r.status_code == 400 and r.json()["error"]["param"] == "tokens"
    r = await mock_server.http.post("/tokenize", json={"prompt": "x", "model": "nope"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"
    r = await mock_server.http.post("/tokenize", json={})
    assert r.status_code == 400
