"""Engine-core admin handlers (dev mode), routed only over an EngineCoreLlm the server owns.

Paths and bodies follow vLLM's own server: /reset_prefix_cache, /sleep, /wake_up, /is_sleeping,
/pause, /resume, /is_paused, /abort_requests, /collective_rpc, /checkpoint_prepare, /checkpoint_restore,
and /start_profile, /stop_profile when a profiler is configured. Each function here makes one handler
over `engine`; `vllm_server.http.routes.route_table` gives them their paths.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Body, Query

from vllm_llm import EngineCoreLlm
from vllm_server.errors import BadRequest
from vllm_server.http.route import Handler

PauseMode = Literal["abort", "wait", "keep"]


def reset_prefix_cache(engine: EngineCoreLlm) -> Handler:
    """Reset the prefix cache."""

    async def reset_prefix_cache(
        reset_running_requests: bool = False, reset_external: bool = False
    ) -> dict[str, Any]:
        """Reset the prefix cache of every engine."""
        ok = await engine.reset_prefix_cache(
            reset_running_requests=reset_running_requests, reset_connector=reset_external
        )
        if not ok:
            raise BadRequest("the prefix cache could not be reset (requests are running)")
        return {"status": "ok"}

    return reset_prefix_cache


def sleep(engine: EngineCoreLlm) -> Handler:
    """Put the engines to sleep."""

    async def sleep(
        level: Annotated[int, Query(ge=0, le=2)] = 1, mode: Annotated[PauseMode, Query()] = "abort"
    ) -> dict[str, Any]:
        """Put the engines to sleep."""
        await engine.sleep(level=level, mode=mode)
        return {"status": "sleeping", "level": level}

    return sleep


def wake_up(engine: EngineCoreLlm) -> Handler:
    """Wake the engines up."""

    async def wake_up(tags: Annotated[list[str] | None, Query()] = None) -> dict[str, Any]:
        """Wake the engines up."""
        await engine.wake_up(tags or None)
        sleeping = await engine.is_sleeping()
        return {"status": "sleeping" if sleeping else "awake", "tags": tags or None}

    return wake_up


def is_sleeping(engine: EngineCoreLlm) -> Handler:
    """Whether the engines sleep."""

    async def is_sleeping() -> dict[str, bool]:
        """Whether the engines sleep."""
        return {"is_sleeping": await engine.is_sleeping()}

    return is_sleeping


def pause(engine: EngineCoreLlm) -> Handler:
    """Pause the scheduler."""

    async def pause(
        mode: Annotated[PauseMode, Query()] = "abort", clear_cache: Annotated[bool, Query()] = True
    ) -> dict[str, str]:
        """Pause the scheduler (readiness turns false)."""
        await engine.pause(mode=mode, clear_cache=clear_cache)
        return {"status": "paused"}

    return pause


def resume(engine: EngineCoreLlm) -> Handler:
    """Resume the scheduler."""

    async def resume() -> dict[str, str]:
        """Resume the scheduler."""
        await engine.resume()
        return {"status": "resumed"}

    return resume


def is_paused(engine: EngineCoreLlm) -> Handler:
    """Whether the scheduler is paused."""

    async def is_paused() -> dict[str, bool]:
        """Whether the scheduler is paused."""
        return {"is_paused": await engine.is_paused()}

    return is_paused


def abort_requests(engine: EngineCoreLlm) -> Handler:
    """Abort requests by external id."""

    async def abort_requests(
        request_ids: Annotated[list[str], Body(embed=True, min_length=1)],
    ) -> dict[str, Any]:
        """Abort requests by external id (an empty list is rejected: it would abort everyone's)."""
        await engine.abort(request_ids)
        return {"status": "aborted", "aborted": len(request_ids)}

    return abort_requests


def collective_rpc(engine: EngineCoreLlm) -> Handler:
    """Call a worker method on every worker."""

    async def collective_rpc(
        method: Annotated[str, Body(embed=True)],
        args: Annotated[list[str], Body(embed=True)] = [],  # noqa: B006 - FastAPI copies defaults
        kwargs: Annotated[dict[str, str], Body(embed=True)] = {},  # noqa: B006
        timeout: Annotated[float | None, Body(embed=True)] = None,  # noqa: ASYNC109 - vLLM's body field
    ) -> dict[str, Any]:
        """Call a worker method on every worker (string arguments only, as vLLM's)."""
        results = await engine.collective_rpc(method, rpc_timeout=timeout, args=tuple(args), kwargs=kwargs)
        return {"results": [r if r is None or isinstance(r, dict | list) else str(r) for r in results]}

    return collective_rpc


def checkpoint_prepare(engine: EngineCoreLlm) -> Handler:
    """Prepare the workers for a checkpoint."""

    async def checkpoint_prepare() -> dict[str, str]:
        """Prepare the workers for a checkpoint (vLLM's AsyncLLM.checkpoint_prepare)."""
        await engine.collective_rpc("checkpoint_prepare")
        return {"status": "prepared"}

    return checkpoint_prepare


def checkpoint_restore(engine: EngineCoreLlm) -> Handler:
    """Restore the workers after a checkpoint."""

    async def checkpoint_restore() -> dict[str, str]:
        """Restore the workers after a checkpoint (vLLM's AsyncLLM.checkpoint_restore)."""
        await engine.collective_rpc("checkpoint_restore")
        return {"status": "restored"}

    return checkpoint_restore


def start_profile(engine: EngineCoreLlm) -> Handler:
    """Start the torch profiler."""

    async def start_profile() -> dict[str, str]:
        """Start the torch profiler on every worker."""
        await engine.profile(is_start=True)
        return {"status": "profiling"}

    return start_profile


def stop_profile(engine: EngineCoreLlm) -> Handler:
    """Stop the torch profiler."""

    async def stop_profile() -> dict[str, str]:
        """Stop the torch profiler."""
        await engine.profile(is_start=False)
        return {"status": "stopped"}

    return stop_profile
