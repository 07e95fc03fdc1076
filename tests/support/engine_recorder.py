"""Record every request a vLLM engine core receives, inside the engine-core process itself.

`activate()` wraps vLLM's `EngineCoreProc.preprocess_add_request`, the first engine-side code that sees
an `EngineCoreRequest` after it crossed the ZMQ socket and was decoded. On CPU vLLM *spawns* the engine
core (its CPU platform forces `VLLM_WORKER_MULTIPROC_METHOD=spawn`), so `install(path)` registers
`activate` as a vLLM general plugin (an entry point in a dist-info put on `sys.path`, which spawn hands
to its children); vLLM loads general plugins in every process it starts, engine core included. The
wrapper appends the request, encoded with vLLM's own msgpack encoder (every field, private
`SamplingParams` fields and tensors included), as one JSON line to `path`; `EngineRecorder.received`
decodes it back in the test.

A request whose external id starts with `REFUSE_PREFIX` is recorded and then refused: vLLM's own
preprocessing-error path answers it with an ERROR output, so a request with parameters the tiny engine
must not run (an adapter path that does not exist, KV-transfer parameters) still proves what arrived.
Recording costs one encode and one short write per request; nothing else changes for the engine.
"""

from __future__ import annotations

import base64
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

#: Requests whose external id starts with this are recorded, then refused with an ERROR output.
REFUSE_PREFIX = "refuse-after-recording-"

_ENV = "TESTS_ENGINE_RECORD_PATH"  # not VLLM_*: vLLM warns about names it does not know
_lock = threading.Lock()


class RefusedAfterRecording(Exception):
    """Raised in the engine for a request marked with `REFUSE_PREFIX`, once recorded."""


class EngineRecorder:
    """Reads what the engine-core process recorded."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def received(self, external_id: str) -> list[Any]:
        """Every `EngineCoreRequest` the engine received for `external_id`, decoded, oldest first."""
        from vllm.v1.engine import EngineCoreRequest
        from vllm.v1.serial_utils import MsgpackDecoder

        decoder = MsgpackDecoder(EngineCoreRequest)
        found = []
        for line in self.path.read_text().splitlines():
            entry = json.loads(line)
            if entry["external_req_id"] == external_id:
                found.append(decoder.decode([bytearray(base64.b64decode(f)) for f in entry["frames"]]))
        return found

    def received_one(self, external_id: str) -> Any:
        """The one `EngineCoreRequest` the engine received for `external_id`."""
        found = self.received(external_id)
        assert len(found) == 1, (
            f"the engine core recorded {len(found)} requests for {external_id!r}"
            " (none at all: did the engine-core process load the recorder plugin?)"
        )
        return found[0]


def install(path: Path) -> EngineRecorder:
    """Record into `path` in every engine core started from this process from now on."""
    path.touch()
    os.environ[_ENV] = str(path)
    _register_plugin(path.parent / "plugin")
    activate()
    return EngineRecorder(path)


def activate() -> None:
    """The vLLM general plugin: wrap the engine core's request intake (once per process)."""
    from vllm.v1.engine.core import EngineCoreProc

    if not getattr(EngineCoreProc.preprocess_add_request, "_records", False):
        _wrap(EngineCoreProc)


def _register_plugin(root: Path) -> None:
    dist = root / "vllm_test_engine_recorder-0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm-test-engine-recorder\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(f"[vllm.general_plugins]\nengine_recorder = {__name__}:activate\n")
    # A spawned child starts with the parent's sys.path, so it finds the plugin (and this module).
    if str(root) not in sys.path:
        sys.path.append(str(root))


def _wrap(engine_core_proc: Any) -> None:
    preprocess = engine_core_proc.preprocess_add_request
    on_error = engine_core_proc._handle_request_preproc_error

    def preprocess_add_request(self: Any, request: Any) -> Any:
        _record(request)
        if (request.external_req_id or "").startswith(REFUSE_PREFIX):
            raise RefusedAfterRecording(request.external_req_id)
        return preprocess(self, request)

    def handle_request_preproc_error(self: Any, request: Any) -> None:
        # A refusal of ours is expected: answer with the ERROR output, without logging a traceback.
        if isinstance(sys.exc_info()[1], RefusedAfterRecording):
            self._send_error_outputs_to_client([request.request_id], request.client_index)
            return
        on_error(self, request)

    preprocess_add_request._records = True  # type: ignore[attr-defined]
    engine_core_proc.preprocess_add_request = preprocess_add_request
    engine_core_proc._handle_request_preproc_error = handle_request_preproc_error


def _record(request: Any) -> None:
    path = os.environ.get(_ENV)
    if not path:
        return
    from vllm.v1.serial_utils import MsgpackEncoder

    encoded: list[Any] = list(MsgpackEncoder().encode(request))  # the message, then tensor buffers
    frames = [base64.b64encode(bytes(f)).decode() for f in encoded]
    line = json.dumps({"external_req_id": request.external_req_id, "frames": frames})
    with _lock, open(path, "a") as out:
        out.write(line + "\n")
