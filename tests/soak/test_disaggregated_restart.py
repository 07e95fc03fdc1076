"""Prefill/decode disaggregation through an outage (the quick checks: tests/readme/checks.py, on the
README's P/D example): a SIGKILLed prefill worker gives typed errors (503), and once it is back on the same
ports the router serves again, the prompt's KV again moving by transfer. Two more engine starts than the
quick checks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.disaggregation import open_pd, transferred
from tests.support.timing import PATIENCE
from vllm_frontend_testing.processes import until

pytestmark = pytest.mark.asyncio(loop_scope="session")

GREEDY: dict[str, Any] = {"max_tokens": 12, "temperature": 0}
PROMPT = "The cat sat on the mat"
RESTART_WITHIN = 900.0


async def test_a_killed_prefill_worker_gives_typed_errors_then_the_router_recovers(
    tiny_model_dir: Path,
) -> None:
    async with (
        open_pd(tiny_model_dir) as pd,
        openai.AsyncOpenAI(
            base_url=pd.router.base_url + "/v1", api_key="none", timeout=PATIENCE, max_retries=0
        ) as router,
    ):
        expected = (await router.completions.create(model="tiny", prompt=PROMPT, **GREEDY)).choices[0].text
        await pd.prefill.kill()
        try:
            for _ in range(3):
                with pytest.raises(openai.APIStatusError) as caught:
                    await router.completions.create(model="tiny", prompt=PROMPT, **GREEDY)
                assert caught.value.status_code == 503, caught.value
        finally:
            await pd.prefill.restart()  # same ports, same side channel; the router is not restarted
        # An idle NIXL worker keeps two threads busy (see tests/support/disaggregation.py): on two cores
        # the restart competes with the decode worker's, and took minutes here.
        await pd.prefill.wait_serving(within=RESTART_WITHIN)

        async def serves() -> bool:
            try:
                got = await router.completions.create(model="tiny", prompt=PROMPT, **GREEDY)
            except openai.APIStatusError as exc:
                if exc.status_code != 503:  # 503 until the router sees the prefill worker again
                    raise
                return False
            assert got.choices[0].text == expected
            return True

        await until(serves, within=PATIENCE, what="the router serving through the restarted prefill worker")
        before = await transferred(pd.decode)
        fresh = "Once more, a prompt new to both prefix caches: " + PROMPT
        got = await router.completions.create(model="tiny", prompt=fresh, **GREEDY)
        assert got.usage is not None
        assert await transferred(pd.decode) - before == got.usage.prompt_tokens
