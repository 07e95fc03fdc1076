"""`Admission`: a burst of new requests starts a few per event-loop turn, in order, so what the started
ones scheduled (a router's GenerateMux writer, running streams' tokens) runs between them; and the
`--prepare-per-turn` flag that sets it (4 for a router, off elsewhere).

The loop's turns are counted by a callback that schedules itself again each turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import dataclass, field

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, Response

from vllm_server.cli import ROUTER_PREPARE_PER_TURN, parse_serve_args, serve_config
from vllm_server.http.admission import Admission
from vllm_server.http.direct import DirectRoutes


@dataclass
class Turns:
    """The event loop's turn number, counted while `run` runs."""

    now: int = 0
    _running: bool = field(default=False, repr=False)

    def _tick(self) -> None:
        if self._running:
            self.now += 1
            asyncio.get_running_loop().call_soon(self._tick)

    async def run(self, work: Awaitable[object]) -> None:
        self._running = True
        asyncio.get_running_loop().call_soon(self._tick)
        try:
            await work
        finally:
            self._running = False


Log = list[tuple[str, int, int]]


async def _admitted(admission: Admission | None, n: int, turns: Turns, log: Log) -> None:
    """`n` requests arriving in one turn, each noting the turn it started in and scheduling a callback
    (the writer's wake-up a request's start causes)."""

    async def request(i: int) -> None:
        waiting = None if admission is None else admission.turn()
        if waiting is not None:
            await waiting
        log.append(("start", i, turns.now))
        asyncio.get_running_loop().call_soon(lambda: log.append(("scheduled", i, turns.now)))

    await turns.run(asyncio.wait_for(asyncio.gather(*(request(i) for i in range(n))), 10))


async def test_a_burst_starts_per_turn_in_arrival_order() -> None:
    turns, log = Turns(), Log()
    await _admitted(Admission(2), 5, turns, log)
    started = [(i, turn) for kind, i, turn in log if kind == "start"]
    assert [i for i, _ in started] == [0, 1, 2, 3, 4]
    first = started[0][1]
    # Two at once; the next turn runs what they scheduled; then two, and the last one a turn later.
    assert [turn - first for _, turn in started] == [0, 0, 2, 2, 3]


async def test_what_a_started_request_scheduled_runs_before_the_next_ones_start() -> None:
    turns, log = Turns(), Log()
    await _admitted(Admission(1), 3, turns, log)
    assert [(kind, i) for kind, i, _ in log] == [
        ("start", 0),
        ("scheduled", 0),
        ("start", 1),
        ("scheduled", 1),
        ("start", 2),
        ("scheduled", 2),
    ]


async def test_without_admission_a_burst_starts_before_anything_it_scheduled() -> None:
    turns, log = Turns(), Log()
    await _admitted(None, 3, turns, log)
    assert [(kind, i) for kind, i, _ in log] == [
        ("start", 0),
        ("start", 1),
        ("start", 2),
        ("scheduled", 0),
        ("scheduled", 1),
        ("scheduled", 2),
    ]


async def test_a_waiter_that_left_gives_its_place_to_the_next() -> None:
    admission = Admission(1)
    assert admission.turn() is None
    gone, next_one = admission.turn(), admission.turn()
    assert gone is not None and next_one is not None and admission.waiting == 2
    gone.cancel()
    await asyncio.wait_for(next_one, 5)
    assert admission.waiting == 0
    # The quota of the turn in which `next_one` started is used; a new turn lets the next one in at once.
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert admission.turn() is None


def test_a_quota_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Admission(0)


# ---- DirectRoutes waits for the turn ---------------------------------------------------------------


def _app(admission: Admission | None, turns: Turns) -> FastAPI:
    app = FastAPI()

    async def started(raw: Request) -> Response:
        return PlainTextResponse(str(turns.now))

    app.add_api_route("/started", started, methods=["POST"])
    app.add_middleware(DirectRoutes, fastapi_app=app, admission=admission)
    return app


async def _starting_turns(admission: Admission | None) -> list[int]:
    turns = Turns()
    transport = httpx.ASGITransport(app=_app(admission, turns))
    answers: list[httpx.Response] = []
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:

        async def ask() -> None:
            answers.append(await client.post("/started"))

        await client.post("/started")  # Starlette builds the middleware on the first request
        await turns.run(asyncio.wait_for(asyncio.gather(*(ask() for _ in range(3))), 10))
    return sorted(int(a.text) for a in answers)


async def test_a_direct_route_waits_for_its_turn() -> None:
    at_once = await _starting_turns(None)
    assert at_once[0] == at_once[-1]
    paced = await _starting_turns(Admission(1))
    assert paced[1] > paced[0] and paced[2] > paced[1]


# ---- the flag -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "per_turn"),
    [
        (["--remote", "127.0.0.1:1"], ROUTER_PREPARE_PER_TURN),
        (["--remote", "127.0.0.1:1", "--prepare-per-turn", "0"], 0),
        (["--mock"], 0),
        (["--mock", "--prepare-per-turn", "2"], 2),
        (["--model", "/models/m"], 0),
    ],
)
def test_the_flag_and_its_default_per_source(argv: list[str], per_turn: int) -> None:
    assert serve_config([*argv]).server.prepare_per_turn == per_turn


def test_a_negative_quota_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_serve_args(["--mock", "--prepare-per-turn", "-1"])
    assert "must be an integer >= 0" in capsys.readouterr().err
