"""`RemoteLlm`: an `Llm` over a server's `vllm.internal.Llm` and `grpc.health.v1`, and nothing else.

- `connect` calls Info and adopts the server's `LlmInfo` (dtype included), after checking that the
  server's wire revision is within one of ours.
- The target is any gRPC target string; several workers behind it are balanced by gRPC itself
  (round_robin or prefix-keyed ring_hash, under outlier detection, with client-side health checking;
  see `_routing` and `_channel`). A request a worker fails before taking it (a status other than
  INVALID_ARGUMENT, UNIMPLEMENTED or UNAVAILABLE, which gRPC retries itself), or fails after taking it
  but before its first output (the worker died, or its engine failed the request), is sent once more,
  to the balancer's next pick: nothing has reached the caller yet. A deadline or the idle bound is not
  failed over (the request would wait twice).
- Readiness is the servers' health status of `vllm.internal.Llm`, watched (true while any worker
  serves); health stays true: a failing server makes this Llm unready, not failed.
- `generate` encodes the request before it starts the call: a value the wire cannot carry (an int
  beyond 64 bits) is the caller's `InvalidRequest`, never a mangled message sent to a worker.
- `generate` returns its stream once the server accepted the request (initial metadata marked
  `x-vllm-accepted`, see `protocol`) and its first output came, so a validation error of the server
  (the call's status, which arrives before acceptance) and a failure before the first output are
  raised by `generate` itself (after the failover above); the first output is read then, and the
  stream's first read returns it.
- `abort` cancels the calls of the requests this RemoteLlm started, which reaches exactly the worker
  serving each (see `_call`); ids it did not start go to the server through the Abort RPC.
- A worker that goes silent on an open stream is caught twice: keepalive pings, each of which must be
  acknowledged within the keepalive timeout, catch a dead, partitioned or stopped (SIGSTOP) worker
  (see `_channel`); `idle_timeout` catches one whose transport still answers but whose Llm stopped
  producing (a wedged engine or event loop).
- Responses are decoded by the wire's decoders, which refuse foreign MessagePack extension types in
  `any` values: such an output or LlmInfo is a `Remote(code="DATA_LOSS")` error, never decoded.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import grpc
import msgspec

from vllm_llm import (
    GenerateStream,
    InvalidRequest,
    Llm,
    PromptTooLong,
    Remote,
    Unavailable,
    Watch,
    WatchSender,
)
from vllm_llm.wire import (
    GENERATE,
    INFO,
    SERVICE_NAME,
    WIRE_REVISION,
    AbortRequest,
    GenerateRequest,
    InfoRequest,
    LlmInfo,
    decode,
    encode,
)
from vllm_remote_llm._call import CallOutputs, output_deserializer
from vllm_remote_llm._channel import Keepalive, RemoteTls, open_channel
from vllm_remote_llm._errors import WireRevisionMismatch, translate_errors
from vllm_remote_llm._mux import MuxSession, SessionEnded
from vllm_remote_llm._readiness import ReadinessWatch
from vllm_remote_llm._routing import PREFIX_HASH_HEADER, OutlierDetection, Routing, prefix_hash
from vllm_remote_llm.stub import LlmStub

logger = logging.getLogger(__name__)

DEFAULT_KEEPALIVE = Keepalive()
DEFAULT_OUTLIER_DETECTION = OutlierDetection()
#: Prefix routing hashes at most this many leading KV blocks of a prompt (64 tokens at vLLM's 16).
DEFAULT_PREFIX_BLOCKS = 4
#: The KV block size assumed when the server does not report one (vLLM's default).
DEFAULT_BLOCK_SIZE = 16
#: Calls a request gets when workers fail it before its first output (each on the balancer's next pick).
FAILOVER_ATTEMPTS = 2

#: The default `idle_timeout` (seconds): far above any healthy gap between two outputs of a running
#: request, yet bounded. See `RemoteLlm.connect`.
DEFAULT_IDLE_TIMEOUT = 120.0


class _Revision(msgspec.Struct):
    """The one field of LlmInfo read before the rest, so any revision can be told apart."""

    wire_revision: int


class RemoteLlm(Llm):
    """An `Llm` served by one or more remote servers behind a gRPC target; build it with `connect`."""

    def __init__(
        self,
        channel: grpc.aio.Channel,
        info: LlmInfo,
        *,
        metadata: tuple[tuple[str, str], ...],
        timeout: float | None,
        idle_timeout: float | None = None,
        max_message_bytes: int = 64 << 20,
        prefix_blocks: int | None = None,
        mux: bool = False,
    ) -> None:
        """Use `connect`; this takes over an open channel and the already adopted info."""
        _check_idle_timeout(idle_timeout)
        self._max_message_bytes = max_message_bytes
        self._prefix_blocks = prefix_blocks
        self._channel = channel
        self._stub = LlmStub(channel)
        # Generate takes the bytes `_encoded` made (the stub's serializer would fail inside grpc).
        self._generate = channel.unary_stream(
            GENERATE.path,
            request_serializer=None,
            response_deserializer=output_deserializer(),
            _registered_method=True,
        )
        self._info = info
        self._metadata = metadata
        self._timeout = timeout
        self._idle_timeout = idle_timeout
        self._health = WatchSender(True)
        self._readiness = ReadinessWatch(channel, SERVICE_NAME, metadata)
        self._calls: dict[str, set[CallOutputs]] = {}
        self._shut_down = False
        #: GenerateMux: whether to use it, and the current session (opened on first use).
        self._mux = mux
        self._session: MuxSession | None = None

    @classmethod
    async def connect(
        cls,
        target: str,
        *,
        tls: RemoteTls | None = None,
        api_key: str | None = None,
        timeout: float | None = None,  # noqa: ASYNC109  # a per-call setting kept by the RemoteLlm
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        keepalive: Keepalive | None = DEFAULT_KEEPALIVE,
        max_message_bytes: int = 64 << 20,
        connect_timeout: float | None = 30.0,
        routing: Routing = "round_robin",
        prefix_blocks: int = DEFAULT_PREFIX_BLOCKS,
        outlier_detection: OutlierDetection | None = None,
        mux: bool = False,
    ) -> RemoteLlm:
        """Connect to `target`, wait (up to `connect_timeout` s) for a serving worker and adopt its info.

        `timeout` bounds unary calls, and the waits for acceptance and a request's first output (None: none).

        `idle_timeout` bounds every wait for an output of a running request (the first included): when
        no output arrives for that many seconds the call is cancelled (which aborts the request on the
        worker) and the stream raises `Unavailable`, a 503 the client may retry. Only the time spent
        waiting counts, never the time a slow consumer takes between reads. None: no bound.

        The default, 120 s, is deliberately generous. A healthy request goes quiet legitimately: while it
        is preempted (vLLM recomputes it once KV cache frees up), while the engine is paused with its
        requests kept, or behind other requests' long prefills; a bound near those gaps would cut good
        streams. What it is for is a worker whose transport still answers keepalive pings while its Llm
        produces nothing (a wedged engine or event loop) — a dead or stopped worker is caught sooner by
        keepalive. 120 s sits between nginx's `proxy_read_timeout` (60 s) and Envoy's
        `stream_idle_timeout` (300 s), the usual bounds a proxy puts on a silent upstream stream. A
        deployment that pauses engines for longer (e.g. weight updates with requests kept) raises it or
        passes None.

        `keepalive`: pings every `keepalive.time` s, each to be acknowledged within `keepalive.timeout`
        s, else the connection (and every call on it) fails with UNAVAILABLE. None: no keepalive.

        `routing`: how a worker is picked (`_routing`): `round_robin`, or `prefix` (gRPC's ring_hash on a
        hash of the prompt's first `prefix_blocks` KV blocks). `outlier_detection`: which failing workers
        gRPC ejects (None, the default: none; gRPC's ejection has no panic mode, see `_routing`).

        `mux`: send requests on one `GenerateMux` stream instead of a Generate call each (`_mux`): one
        message per write for all of them, not one per output per request. The stream is one call, so
        gRPC puts all of it on one worker: for a target that is one worker (a router or a scaled-out
        frontend in front of it), not a balanced set. A worker without the method (an older revision)
        answers UNIMPLEMENTED once; this RemoteLlm then uses Generate calls.
        """
        _check_idle_timeout(idle_timeout)
        if prefix_blocks < 1:
            raise ValueError(f"prefix_blocks must be at least 1, got {prefix_blocks}")
        channel = open_channel(
            target,
            tls=tls,
            keepalive=keepalive,
            max_message_bytes=max_message_bytes,
            routing=routing,
            outliers=outlier_detection,
        )
        metadata = (("authorization", f"Bearer {api_key}"),) if api_key is not None else ()
        llm: RemoteLlm | None = None
        try:
            info = await _fetch_info(channel, metadata, within=connect_timeout)
            llm = cls(
                channel,
                info,
                metadata=metadata,
                timeout=timeout,
                idle_timeout=idle_timeout,
                max_message_bytes=max_message_bytes,
                prefix_blocks=prefix_blocks if routing == "prefix" else None,
                mux=mux,
            )
            await llm._readiness.start(first_within=connect_timeout)
        except BaseException:
            await (llm.shutdown() if llm is not None else channel.close())
            raise
        return llm

    # ---- the Llm interface ------------------------------------------------------------------------

    def info(self) -> LlmInfo:
        """The server's LlmInfo, adopted at connect."""
        return self._info

    async def refresh_info(self, within: float | None = 5.0) -> LlmInfo:
        """Ask a server behind the target for its LlmInfo again (its LoRA adapters change at runtime) and
        adopt it; `Unavailable` when none answers within `within` seconds."""
        self._check_open()
        self._info = await _fetch_info(self._channel, self._metadata, within=within)
        return self._info

    def subscribe_health(self) -> Watch[bool]:
        """Always true: a failing server makes this Llm unready, not failed."""
        return self._health.subscribe()

    def subscribe_readiness(self) -> Watch[bool]:
        """True while a server behind the target serves `vllm.internal.Llm`."""
        return self._readiness.subscribe()

    async def generate(self, request: GenerateRequest) -> GenerateStream:
        """Check what LlmInfo allows, start the call and return its stream once its first output came (a
        request failed before then goes to the next worker, up to FAILOVER_ATTEMPTS calls)."""
        self._check(request)
        body = _encoded(request)
        if len(body) > self._max_message_bytes:
            raise InvalidRequest(
                f"request {request.request_id!r} is {len(body)} bytes on the wire, more than the "
                f"{self._max_message_bytes}-byte gRPC message limit (max_message_bytes); send fewer "
                "or smaller media",
                param="messages" if request.mm_features else None,
            )
        if self._mux:
            stream = await self._generate_mux(request, len(body))
            if stream is not None:
                return stream
        metadata = self._call_metadata(request)
        for attempt in range(FAILOVER_ATTEMPTS):
            last = attempt + 1 >= FAILOVER_ATTEMPTS
            call = self._generate(body, metadata=metadata)
            outputs = CallOutputs(call, request.request_id, self._forget, idle=self._idle_timeout)
            self._calls.setdefault(request.request_id, set()).add(outputs)
            try:
                await outputs.start(self._timeout)
            except Remote:
                # The worker failed the request before taking it (not a validation error: that is
                # RemoteInvalidRequest; UNAVAILABLE gRPC retries itself): nothing reached the caller, so
                # another worker may take it. Without the prefix hash, ring_hash picks at random.
                if last:
                    raise
                metadata = self._metadata
                continue
            # Taken. Until its first output nothing reaches the caller either: a worker that dies or
            # fails the request before then (a status, not a deadline or a stall) is failed over too.
            failed = await outputs.peek()
            if failed is None:
                break
            if last:
                raise failed
            metadata = self._metadata

        async def on_abort() -> None:
            outputs.close()

        return GenerateStream(request.request_id, outputs, on_abort)

    async def abort(self, request_ids: Sequence[str]) -> None:
        """Abort by external id: cancel our own calls, send the other ids to the server's Abort."""
        if not request_ids:
            raise InvalidRequest("request_ids must not be empty", param="request_ids")
        self._check_open()
        elsewhere: list[str] = []
        session = self._session
        for rid in dict.fromkeys(request_ids):
            calls = self._calls.get(rid)
            if session is not None and session.running(rid):
                session.cancel(rid, deliver_abort=True)
            elif calls:
                for outputs in list(calls):
                    outputs.abort()
            else:
                elsewhere.append(rid)
        if elsewhere:
            with translate_errors():
                await self._stub.Abort(
                    AbortRequest(request_ids=elsewhere), metadata=self._metadata, timeout=self._timeout
                )

    async def shutdown(self) -> None:
        """Cancel every call, stop watching and close the channel."""
        if self._shut_down:
            return
        self._shut_down = True
        if self._session is not None:
            await self._session.close()
        for calls in list(self._calls.values()):
            for outputs in list(calls):
                outputs.close()
        await self._readiness.close()
        await self._channel.close()

    # ---- internals ---------------------------------------------------------------------------------

    async def _generate_mux(self, request: GenerateRequest, size: int) -> GenerateStream | None:
        """`generate` on the GenerateMux session; None when the worker does not serve GenerateMux (from
        then on this RemoteLlm uses Generate calls)."""
        rid = request.request_id
        for attempt in range(FAILOVER_ATTEMPTS):
            session = self._session
            if session is None or not session.alive:
                session = self._session = MuxSession(
                    self._channel,
                    self._metadata,
                    idle=self._idle_timeout,
                    max_message_bytes=self._max_message_bytes,
                )
            channel = session.start(request, size)
            try:
                async with asyncio.timeout(self._timeout):
                    failed = await channel.first()
            except TimeoutError as exc:
                session.cancel(rid, deliver_abort=False)
                raise Unavailable(f"no output from the server within {self._timeout} s") from exc
            except BaseException:
                session.cancel(rid, deliver_abort=False)
                raise
            if failed is None:

                async def on_abort(session: MuxSession = session) -> None:
                    session.cancel(rid, deliver_abort=False)

                return GenerateStream(rid, channel, on_abort)
            if session.status == grpc.StatusCode.UNIMPLEMENTED:
                logger.warning("the worker does not serve GenerateMux (%s); using Generate calls", failed)
                self._mux = False
                return None
            # The stream ended before this request's first output (the worker went away, drained or
            # stopped): nothing reached the caller, so a new stream may take it once.
            if not isinstance(failed, SessionEnded) or attempt + 1 >= FAILOVER_ATTEMPTS:
                raise failed
        raise AssertionError("unreachable")

    def _check(self, request: GenerateRequest) -> None:
        """Reject locally what the adopted LlmInfo already rules out (the server checks the rest)."""
        self._check_open()
        prompt = request.prompt_token_ids
        if not prompt:
            raise InvalidRequest(
                f"request {request.request_id!r} has an empty prompt", param="prompt_token_ids"
            )
        vocab = self._info.vocab_size
        if min(prompt) < 0 or max(prompt) >= vocab:
            raise InvalidRequest(f"prompt token ids must be in [0, {vocab})", param="prompt_token_ids")
        if len(prompt) >= self._info.max_model_len:
            raise PromptTooLong(max_model_len=self._info.max_model_len, prompt_len=len(prompt))

    def _call_metadata(self, request: GenerateRequest) -> tuple[tuple[str, str], ...]:
        """The call's metadata: with prefix routing, the hash ring_hash picks the worker by."""
        if self._prefix_blocks is None:
            return self._metadata
        key = prefix_hash(
            request.prompt_token_ids,
            block_size=self._info.block_size or DEFAULT_BLOCK_SIZE,
            max_blocks=self._prefix_blocks,
            salt=(request.lora_request.lora_name if request.lora_request else None, request.cache_salt),
        )
        return self._metadata if key is None else (*self._metadata, (PREFIX_HASH_HEADER, key))

    def _check_open(self) -> None:
        if self._shut_down:
            raise Unavailable("the RemoteLlm was shut down")

    def _forget(self, outputs: CallOutputs) -> None:
        calls = self._calls.get(outputs.request_id)
        if calls is not None:
            calls.discard(outputs)
            if not calls:
                del self._calls[outputs.request_id]


def _check_idle_timeout(idle_timeout: float | None) -> None:
    if idle_timeout is not None and not 0 < idle_timeout < float("inf"):
        raise ValueError(
            f"idle_timeout must be a positive, finite number of seconds or None, not {idle_timeout!r}"
        )


def _encoded(request: GenerateRequest) -> bytes:
    """The request's MessagePack bytes; `InvalidRequest` when a value does not fit the wire."""
    try:
        return encode(request)
    except (OverflowError, TypeError) as exc:
        raise InvalidRequest(f"request {request.request_id!r} cannot be sent: {exc}") from exc


async def _fetch_info(
    channel: grpc.aio.Channel, metadata: tuple[tuple[str, str], ...], *, within: float | None
) -> LlmInfo:
    """The server's LlmInfo, once a worker serves; its wire revision must be adjacent to ours."""
    # Raw bytes, so a server at any revision gets the revision error rather than a decoding error.
    info_call = channel.unary_unary(INFO.path, request_serializer=encode, response_deserializer=None)
    try:
        with translate_errors():
            raw: bytes = await info_call(
                InfoRequest(), metadata=metadata, timeout=within, wait_for_ready=True
            )
    except Unavailable as exc:
        bound = f" within {within} s" if within is not None else ""
        raise Unavailable(f"no server behind the target served{bound}: {exc.message}") from exc
    try:
        revision = decode(raw, _Revision).wire_revision
        if abs(revision - WIRE_REVISION) > 1:
            raise WireRevisionMismatch(server_revision=revision, client_revision=WIRE_REVISION)
        return decode(raw, LlmInfo)
    except msgspec.DecodeError as exc:  # ValidationError and a foreign extension type included
        raise Remote(f"the server sent an undecodable LlmInfo: {exc}", code="DATA_LOSS") from exc
    except RecursionError as exc:
        raise Remote("the server sent an undecodable LlmInfo: nested too deeply", code="DATA_LOSS") from exc
