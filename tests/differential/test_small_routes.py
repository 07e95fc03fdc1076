"""Small routes and messages of our worker against vLLM's own server: `/version`.

Raw HTTP (httpx): the cases include bodies no OpenAI client would send, and the routes are not OpenAI's.
"""

from __future__ import annotations

from tests.differential.conftest import Pair

# ---- GET /version -------------------------------------------------------------------------------------


async def test_version(pair: Pair) -> None:
    theirs, ours = await pair.theirs_http.get("/version"), await pair.ours_http.get("/version")
    assert theirs.status_code == 200, theirs.text
    assert ours.status_code == 200, ours.text
    assert ours.json() == theirs.json()
