"""The server side of B1: a MockLlm behind a GrpcFrontend, in its own process.

    python -m vllm_frontend_bench.hop_worker --step-interval 0.01

prints `PORT <n>` once it serves, and stops on SIGTERM / SIGINT or when its stdin closes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from collections.abc import Sequence

from vllm_llm import MockLlm
from vllm_server import runtime
from vllm_server.grpc.listener import GrpcFrontend


async def serve(step_interval: float, port: int) -> None:
    """Serve until a signal or the end of stdin."""
    llm = MockLlm(step_interval=step_interval)
    frontend = GrpcFrontend(llm)
    bound = await frontend.start("127.0.0.1", port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    loop.add_reader(sys.stdin.fileno(), lambda: stop.set() if not os.read(sys.stdin.fileno(), 4096) else None)
    runtime.freeze_heap()  # as `vllm-frontend serve` does once its Llm is ready
    print(f"PORT {bound}", flush=True)
    await stop.wait()
    loop.remove_reader(sys.stdin.fileno())
    await frontend.stop(0)
    await llm.shutdown()


def main(argv: Sequence[str] | None = None) -> int:
    """Parse the flags and serve."""
    parser = argparse.ArgumentParser(prog="hop_worker", description=__doc__.splitlines()[0])
    parser.add_argument("--step-interval", type=float, default=0.01, help="seconds per step; 0: flat out")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    runtime.run(serve(args.step_interval, args.port))  # the loop `vllm-frontend serve` runs on
    return 0


if __name__ == "__main__":
    sys.exit(main())
