"""Engine-core admin routes (dev mode), registered only over an EngineCoreLlm the server owns.

Paths and bodies follow vLLM's own server: /reset_prefix_cache, /sleep, /wake_up, /is_sleeping,
/pause, /resume, /is_paused, /abort_requests, /collective_rpc, /checkpoint_prepare, /checkpoint_restore,
and /start_profile, /stop_profile when a profiler is configured.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Query

from vllm_llm import EngineCoreLlm
from vllm_server.errors import RequestError

PauseMode = Literal["abort", "wait", "keep"]


def router(engine: EngineCoreLlm, *, profiler: bool) -> APIRouter:
    """The dev-mode routes over `engine`."""
    r = APIRouter()

    @r.post("/reset_prefix_cache")
    async def reset_prefix_cache(
        reset_running_requests: bool = False, reset_external: bool = False
    ) -> dict[str, Any]:
        """Reset the prefix cache of every engine."""
        ok = await engine.reset_prefix_cache(
            reset_running_requests=reset_running_requests, reset_connector=reset_external
        )
        if not ok:
            raise RequestError("the prefix cache could not be reset (requests are running)")
        return {"status": "ok"}

    @r.post("/sleep")
    async def sleep(
        level: Annotated[int, Query(ge=0, le=2)] = 1, mode: Annotated[PauseMode, Query()] = "abort"
    ) -> dict[str, Any]:
        """Put the engines to sleep."""
        await engine.sleep(level=level, mode=mode)
        return {"status": "sleeping", "level": level}

    @r.post("/wake_up")
    async def wake_up(tags: Annotated[list[str] | None, Query()] = None) -> dict[str, Any]:
        """Wake the engines up."""
        await engine.wake_up(tags or None)
        sleeping = await engine.is_sleeping()
        return {"status": "sleeping" if sleeping else "awake", "tags": tags or None}

    @r.get("/is_sleeping")
    async def is_sleeping() -> dict[str, bool]:
        """Whether the engines sleep."""
        return {"is_sleeping": await engine.is_sleeping()}

    @r.post("/pause")
    async def pause(
        mode: Annotated[PauseMode, Query()] = "abort", clear_cache: Annotated[bool, Query()] = True
    ) -> dict[str, str]:
        """Pause the scheduler (readiness turns false)."""
        await engine.pause(mode=mode, clear_cache=clear_cache)
        return {"status": "paused"}

    @r.post("/resume")
    async def resume() -> dict[str, str]:
        """Resume the scheduler."""
        await engine.resume()
        return {"status": "resumed"}

    @r.get("/is_paused")
    async def is_paused() -> dict[str, bool]:
        """Whether the scheduler is paused."""
        return {"is_paused": await engine.is_paused()}

    @r.post("/abort_requests")
    async def abort_requests(
        request_ids: Annotated[list[str], Body(embed=True, min_length=1)],
    ) -> dict[str, Any]:
        """Abort requests by external id (an empty list is rejected: it would abort everyone's)."""
        await engine.abort(request_ids)
        return {"status": "aborted", "aborted": len(request_ids)}

    @r.post("/collective_rpc")
    async def collective_rpc(
        method: Annotated[str, Body(embed=True)],
        args: Annotated[list[str], Body(embed=True)] = [],  # noqa: B006 - FastAPI copies defaults
        kwargs: Annotated[dict[str, str], Body(embed=True)] = {},  # noqa: B006
        timeout: Annotated[float | None, Body(embed=True)] = None,  # noqa: ASYNC109 - vLLM's body field
    ) -> dict[str, Any]:
        """Call a worker method on every worker (string arguments only, as vLLM's)."""
        results = await engine.collective_rpc(method, rpc_timeout=timeout, args=tuple(args), kwargs=kwargs)
        return {"results": [r if r is None or isinstance(r, dict | list) else str(r) for r in results]}

    @r.post("/checkpoint_prepare")
    async def checkpoint_prepare() -> dict[str, str]:
        """Prepare the workers for a checkpoint (vLLM's AsyncLLM.checkpoint_prepare)."""
        await engine.collective_rpc("checkpoint_prepare")
        return {"status": "prepared"}

    @r.post("/checkpoint_restore")
    async def checkpoint_restore() -> dict[str, str]:
        """Restore the workers after a checkpoint (vLLM's AsyncLLM.checkpoint_restore)."""
        await engine.collective_rpc("checkpoint_restore")
        return {"status": "restored"}

    if profiler:

        @r.post("/start_profile")
        async def start_profile() -> dict[str, str]:
            """Start the torch profiler on every worker."""
            await engine.profile(is_start=True)
            return {"status": "profiling"}

        @r.post("/stop_profile")
        async def stop_profile() -> dict[str, str]:
            """Stop the torch profiler."""
            await engine.profile(is_start=False)
            return {"status": "stopped"}

    return r
