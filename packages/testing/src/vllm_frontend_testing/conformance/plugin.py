"""A pytest plugin for vLLM's own test suite: its `RemoteOpenAIServer` starts our worker or vLLM's server.

Loaded by `python -m vllm_frontend_testing.conformance run` (`-p vllm_frontend_testing.conformance.plugin`)
with the sdist's root on `sys.path`, so that `tests.utils` is vLLM's. Chosen by the environment:

- `VLLM_CONFORMANCE_SERVER`: `ours` (`vllm-frontend serve`) or `vllm` (vLLM's
  `python -m vllm.entrypoints.openai.api_server`), or `plan`: no server starts and no test body runs; the
  results name, for each test, the servers (model and arguments) its fixtures asked for, which is how
  `check --jobs N` groups the tests by server and shares them out;
- `VLLM_CONFORMANCE_MODEL`: the model directory served, under the name the test asks for;
- `VLLM_CONFORMANCE_LOGS`: a directory for each server's output (`VLLM_CONFORMANCE_JOB`, when set,
  names the job in the file names: the jobs of one run share the directory);
- `VLLM_CONFORMANCE_RESULTS`: a JSON file the outcome of every test is written to, and whether it
  reached a server (vLLM's modules also hold in-process tests of vLLM's own classes, which do not).

LoRA adapters the tests download (`hf_api().snapshot_download(repo_id=...)`, named in `LORA_ADAPTERS`) are
tiny adapters of the tiny model, one per repository (its own seed), built locally: the same directory is
given to either server, as the tiny model is served under the name the test asks for.

Servers are shared: a test module's `RemoteOpenAIServer(model, args)` with the same model and arguments
as one already started (or released) gets that one. Released servers keep running, the most recently
used `VLLM_CONFORMANCE_IDLE` of them (2 unless set), so that modules asking for the same arguments share
one server even when other modules come between; every server is stopped when the session ends.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

#: How long a server may take to come up (vLLM's harness allows 480 s).
_STARTUP_WITHIN = 480.0
#: How long a stopped server may take to drain before its process group is killed.
_STOP_WITHIN = 30.0
#: Flags whose value is the server's own business here, not part of what makes two servers the same.
_PORT_FLAGS = ("--port", "-p")


#: The LoRA adapter repositories the chosen modules download, each served by a tiny adapter of its own seed.
LORA_ADAPTERS = {
    "typeof/zephyr-7b-beta-lora": 11,  # openai/chat_completion/test_chat.py
    "charent/self_cognition_Alice": 12,  # entrypoints/conftest.py: qwen3_lora_files
    "Jackmin108/Qwen3-0.6B-Meow-LoRA": 13,
    "Jackmin108/Qwen3-0.6B-Woof-LoRA": 14,
    "peft-internal-testing/opt-125m-dummy-lora": 15,
    "jekunz/smollm-135m-lora-fineweb-faroese": 16,  # serve/sagemaker/conftest.py
}


class _AdapterHub:
    """vLLM's `hf_api()` with the downloads of `LORA_ADAPTERS` answered by local tiny adapters (the
    rest, a model's files, go to the real hub, which is offline here and fails as before)."""

    def __init__(self, real: Any, model_dir: str) -> None:
        self._real = real
        self._model_dir = model_dir

    def snapshot_download(self, repo_id: str, **kwargs: Any) -> str:
        seed = LORA_ADAPTERS.get(repo_id)
        if seed is None or "local_dir" in kwargs:
            return str(self._real.snapshot_download(repo_id=repo_id, **kwargs))
        from vllm_frontend_testing.tiny_model import build_tiny_lora

        return str(build_tiny_lora(self._model_dir, seed=seed))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _serve_adapters_locally() -> None:
    repo_utils: Any = importlib.import_module("vllm.transformers_utils.repo_utils")
    hub = _AdapterHub(repo_utils.hf_api(), os.environ["VLLM_CONFORMANCE_MODEL"])
    repo_utils.hf_api = lambda: hub


def _flag_value(args: list[str], *names: str) -> str | None:
    """The value of the last of `names` in `args` (`--flag value` or `--flag=value`), or None."""
    value: str | None = None
    for i, arg in enumerate(args):
        for name in names:
            if arg == name and i + 1 < len(args):
                value = args[i + 1]
            elif arg.startswith(name + "="):
                value = arg.split("=", 1)[1]
    return value


def _has_flag(args: list[str], *names: str) -> bool:
    return any(arg == name or arg.startswith(name + "=") for arg in args for name in names)


def _without_port(args: list[str]) -> list[str]:
    kept: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
        elif arg in _PORT_FLAGS:
            skip = True
        elif not any(arg.startswith(flag + "=") for flag in _PORT_FLAGS):
            kept.append(arg)
    return kept


def _planning() -> bool:
    return os.environ.get("VLLM_CONFORMANCE_SERVER") == "plan"


def _idle_kept() -> int:
    return int(os.environ.get("VLLM_CONFORMANCE_IDLE", "2"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Launch:
    """One server process, shared by every `RemoteOpenAIServer` with the same model and arguments."""

    key: tuple[str, ...]
    proc: subprocess.Popen[bytes] | None  # None in a plan run: no server is started
    port: int | None
    uds: str | None
    log_path: Path
    users: int = 0
    env: dict[str, str] = field(default_factory=dict)
    #: When it was last asked for or released (`time.monotonic()`): the idle servers kept are the latest.
    used: float = 0.0

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGTERM the server; its whole process group is killed if it has not ended within 30 s."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(_STOP_WITHIN)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)


class _Pool:
    """The servers of a session, by key."""

    def __init__(self) -> None:
        self.launches: dict[tuple[str, ...], _Launch] = {}
        self.count = 0
        #: How many times a server was asked for.
        self.acquired = 0
        #: The keys asked for since the current test's setup began (a plan run).
        self.asked: list[tuple[str, ...]] = []
        #: Servers being stopped, each by a thread of its own.
        self.stopping: list[threading.Thread] = []

    def acquire(self, model: str, args: list[str], env_dict: dict[str, str] | None) -> _Launch:
        self.acquired += 1
        key = (model, *_without_port(args), *sorted(f"{k}={v}" for k, v in (env_dict or {}).items()))
        self.asked.append(key)
        launch = self.launches.get(key)
        if launch is not None and (launch.running() or _planning()):
            launch.users += 1
            launch.used = time.monotonic()
            return launch
        if launch is not None:  # it exited: started again below
            del self.launches[key]
        self._keep_idle(_idle_kept() - 1)  # room for the one about to start
        launch = self._plan(key, args) if _planning() else self._start(key, model, args, env_dict)
        launch.users += 1
        launch.used = time.monotonic()
        self.launches[key] = launch
        return launch

    def release(self, launch: _Launch) -> None:
        launch.users = max(0, launch.users - 1)
        launch.used = time.monotonic()
        self._keep_idle(_idle_kept())

    def _keep_idle(self, most: int) -> None:
        """Stop the idle servers (no test holds them) but the `most` most recently used."""
        idle = sorted((x for x in self.launches.values() if x.users == 0), key=lambda x: x.used)
        for launch in idle[: max(0, len(idle) - max(0, most))]:
            # Stopped beside the next start, not before it (an engine takes seconds to end).
            stopping = threading.Thread(target=launch.stop, name=f"stop {launch.log_path.name}", daemon=True)
            stopping.start()
            self.stopping.append(stopping)
            del self.launches[launch.key]

    def _plan(self, key: tuple[str, ...], args: list[str]) -> _Launch:
        """A server that is not started (a plan run): a port nothing listens on."""
        uds = _flag_value(args, "--uds")
        port = None if uds is not None else _free_port()
        return _Launch(key=key, proc=None, port=port, uds=uds, log_path=Path(os.devnull))

    def stop_all(self) -> None:
        for launch in self.launches.values():
            launch.stop()
        self.launches.clear()
        for stopping in self.stopping:
            stopping.join()

    def _start(
        self, key: tuple[str, ...], model: str, args: list[str], env_dict: dict[str, str] | None
    ) -> _Launch:
        which = os.environ.get("VLLM_CONFORMANCE_SERVER", "ours")
        model_dir = os.environ["VLLM_CONFORMANCE_MODEL"]
        logs = Path(os.environ.get("VLLM_CONFORMANCE_LOGS", "conformance-logs"))
        logs.mkdir(parents=True, exist_ok=True)
        self.count += 1
        job = os.environ.get("VLLM_CONFORMANCE_JOB")
        log_path = logs / f"{'' if job is None else f'job-{job}-'}{self.count:03d}-{which}.log"
        served = [] if _has_flag(args, "--served-model-name") else ["--served-model-name", model]
        uds = _flag_value(args, "--uds")
        port = None if uds is not None else int(_flag_value(args, *_PORT_FLAGS) or _free_port())
        rest = _without_port(args)
        if not _has_flag(rest, "--enforce-eager", "-O", "--compilation-config", "-cc"):
            rest.append("--enforce-eager")
        if not _has_flag(rest, "--dtype"):
            rest += ["--dtype", "float32"]
        if port is not None:
            rest += ["--port", str(port)]
        if which == "vllm":
            argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]
        elif which == "ours":
            # Our worker's gRPC listener (not vLLM's, not used by these tests) on a port of its own: the
            # default 50051 may be another server's.
            argv = [sys.executable, "-m", "vllm_server.cli", "serve", "--grpc-port", "0"]
        else:
            raise RuntimeError(f"VLLM_CONFORMANCE_SERVER={which!r}: expected 'ours' or 'vllm'")
        argv += ["--model", model_dir, *served, *rest]
        env = dict(os.environ)
        env.update(env_dict or {})
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        env["HF_HUB_OFFLINE"] = "1"
        env["VLLM_ALLOW_LONG_MAX_MODEL_LEN"] = "1"
        with log_path.open("wb") as log:
            log.write(("$ " + " ".join(argv) + "\n").encode())
            log.flush()
            # Its own process group in this session (not a session of its own: see the developers' guide).
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, process_group=0)
        launch = _Launch(key=key, proc=proc, port=port, uds=uds, log_path=log_path, env=env)
        print(f"\n[conformance] {which} server {self.count} ({log_path}): {' '.join(argv)}", flush=True)
        self._wait_serving(launch)
        return launch

    @staticmethod
    def _wait_serving(launch: _Launch) -> None:
        """Wait until `/health` answers 200 (vLLM's server listens only once its engine started; ours
        answers 503 until then), as vLLM's own harness waits; `/health` needs no API key, which a test
        may set (`VLLM_API_KEY`). A server that exits or takes too long fails the test that asked for
        it, with the end of its log."""
        transport = httpx.HTTPTransport(uds=launch.uds) if launch.uds else None
        base = "http://localhost" if launch.uds else f"http://127.0.0.1:{launch.port}"
        deadline = time.monotonic() + _STARTUP_WITHIN
        with httpx.Client(transport=transport, timeout=5) as client:
            while True:
                if not launch.running():
                    break
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(base + "/health").status_code == 200:
                        return
                if time.monotonic() > deadline:
                    launch.stop()
                    break
                time.sleep(0.5)
        tail = "\n".join(launch.log_path.read_text(errors="replace").splitlines()[-40:])
        code = launch.proc.poll() if launch.proc is not None else None
        raise RuntimeError(f"the server did not come up (exit {code}); its log ends:\n{tail}")


_POOL = _Pool()
#: Each test's outcome (`passed`, `failed`, `skipped`), whether it reached a server, how long it took
#: (`seconds`), and in a plan run the servers it asked for (`servers`: each a model and its arguments).
_RESULTS: dict[str, dict[str, Any]] = {}
#: A plan run: the servers each test asked for.
_PLANNED: dict[str, list[list[str]]] = {}
#: How long each test took, set-up (a server's start included) and tear-down included.
_SECONDS: dict[str, float] = {}
#: The tests that reached a server: one of their fixtures is a server, or they asked for one.
_SERVED: set[str] = set()


def _server_class(base: type[Any]) -> type[Any]:
    """vLLM's `RemoteOpenAIServer`, starting (or sharing) one of the pool's servers."""

    class ConformanceServer(base):  # type: ignore[misc]
        def __init__(
            self,
            model: str,
            vllm_serve_args: list[str],
            *,
            env_dict: dict[str, str] | None = None,
            seed: int | None = 0,
            auto_port: bool = True,
            max_wait_seconds: float | None = None,
            override_hf_configs: dict[str, Any] | None = None,
        ) -> None:
            args = list(vllm_serve_args)
            if seed is not None and not _has_flag(args, "--seed"):
                args += ["--seed", str(seed)]
            if override_hf_configs is not None:
                args += ["--hf-overrides", json.dumps(override_hf_configs)]
            self._shutdown_complete = True
            self._pre_server_gpu_memory = None
            self._request_shutdown_timeout = float(_flag_value(args, "--shutdown-timeout") or 0)
            self.show_hidden_metrics = _has_flag(args, "--show-hidden-metrics-for-version")
            self._launch = _POOL.acquire(model, args, env_dict)
            self._shutdown_complete = False
            self.proc = self._launch.proc
            self.uds = self._launch.uds
            self.host = None if self.uds else "127.0.0.1"
            self.port = self._launch.port

        def _terminate_process_tree(self) -> None:
            _POOL.release(self._launch)

        def _wait_for_gpu_memory_release(self, timeout: float = 0.0, log_interval: float = 0.0) -> None:
            return None

    ConformanceServer.__name__ = ConformanceServer.__qualname__ = "RemoteOpenAIServer"
    return ConformanceServer


_SERVER_TYPES: tuple[type[Any], ...] = ()


def pytest_configure(config: pytest.Config) -> None:
    vllm_test_utils: Any = importlib.import_module("tests.utils")  # vLLM's, from the sdist's root on sys.path
    server = _server_class(vllm_test_utils.RemoteOpenAIServer)
    vllm_test_utils.RemoteOpenAIServer = server
    _serve_adapters_locally()
    global _SERVER_TYPES
    _SERVER_TYPES = (server,)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    before = _POOL.acquired
    try:
        return (yield)
    finally:
        if _POOL.acquired > before or _uses_a_server(item):
            _SERVED.add(item.nodeid)


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """In a plan run, a test's body is not run: its fixtures (which ask for its servers) were set up."""
    return True if _planning() else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Any:
    """In a plan run, the servers asked for while `item`'s fixtures are set up are its own (a fixture that
    then fails, reaching for a server that is not there, still says which server it wanted)."""
    _POOL.asked = []
    try:
        return (yield)
    finally:
        if _planning():
            keys = [list(key) for key in _POOL.asked]
            keys += [list(server._launch.key) for server in _servers_of(item)]
            _PLANNED[item.nodeid] = [key for i, key in enumerate(keys) if key not in keys[:i]]


def _servers_of(item: pytest.Item) -> list[Any]:
    """The servers among the fixtures `item` was given (directly or through another)."""
    info: Any = getattr(item, "_fixtureinfo", None)
    servers: list[Any] = []
    for definitions in getattr(info, "name2fixturedefs", {}).values():
        cached = getattr(definitions[-1], "cached_result", None) if definitions else None
        if cached is not None and isinstance(cached[0], _SERVER_TYPES) and cached[0] not in servers:
            servers.append(cached[0])
    return servers


def _uses_a_server(item: pytest.Item) -> bool:
    """Whether one of the fixtures `item` was given (directly or through another) is a server."""
    return bool(_servers_of(item))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _SECONDS[report.nodeid] = _SECONDS.get(report.nodeid, 0.0) + report.duration
    if report.nodeid in _RESULTS:
        _RESULTS[report.nodeid]["seconds"] = round(_SECONDS[report.nodeid], 1)
    if report.when == "call" or report.outcome != "passed":
        previous = _RESULTS.get(report.nodeid)
        if previous is None or previous["outcome"] == "passed":
            _RESULTS[report.nodeid] = {
                "outcome": report.outcome,
                "server": report.nodeid in _SERVED,
                "seconds": round(_SECONDS[report.nodeid], 1),
            }
            _write_results()  # as it goes: a run that is killed still tells what it ran


def _write_results() -> None:
    results = os.environ.get("VLLM_CONFORMANCE_RESULTS")
    if results:
        for node, servers in _PLANNED.items():
            _RESULTS.setdefault(node, {"outcome": "planned", "server": bool(servers)})["servers"] = servers
        Path(results).write_text(json.dumps(_RESULTS, indent=1, sort_keys=True) + "\n")


def pytest_unconfigure(config: pytest.Config) -> None:
    _POOL.stop_all()
    _write_results()
