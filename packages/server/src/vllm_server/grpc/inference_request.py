"""A `vllm.GenerateRequest` (protobuf) as a `TextRequest` of the text layer, and its response options.

Proto3 zero values mean "unset" (the text layer's and the generation config's defaults apply), except
for the `optional` fields (temperature, seed, output_text, the candidate selectors). What the text
layer cannot do is refused, never dropped: `media`, a candidates selector by token ids, and
`bypass_prefix_cache` (Unsupported).
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from vllm_llm import InvalidRequest, TextLlm, TextRequest, TextSamplingParams, Unsupported
from vllm_llm.wire import LoraRequest, StructuredOutputs
from vllm_server.grpc.proto import inference_pb2 as pb
from vllm_server.grpc.proto_struct import struct_to_dict

__all__ = ["OutputOptions", "output_options", "text_request"]


class OutputOptions(NamedTuple):
    """What the responses carry (`ResponseOptions`, with output_text defaulting to true)."""

    prompt_token_ids: bool
    prompt_logprobs: bool
    text: bool
    token_ids: bool
    logprobs: bool


def output_options(request: pb.GenerateRequest) -> OutputOptions:
    """The response options of `request`."""
    r = request.response
    return OutputOptions(
        prompt_token_ids=r.prompt_token_ids,
        prompt_logprobs=r.prompt_logprobs,
        text=r.output_text if r.HasField("output_text") else True,
        token_ids=r.output_token_ids,
        logprobs=r.output_logprobs,
    )


def text_request(
    request: pb.GenerateRequest, text: TextLlm, *, request_id: str, lora_request: LoraRequest | None
) -> TextRequest:
    """The text-layer request of `request`; raises `InvalidRequest` / `Unsupported` for what cannot be."""
    if request.media:
        raise InvalidRequest("multimodal input (media) is not supported by this server", param="media")
    kv = request.kv
    if kv.bypass_prefix_cache:
        raise Unsupported("kv.bypass_prefix_cache is not supported by this server")
    extra_args = (
        {"ec_transfer_params": struct_to_dict(kv.ec_transfer_params)}
        if kv.HasField("ec_transfer_params")
        else None
    )
    return TextRequest(
        request_id=request_id,
        prompt=_prompt(request),
        params=_params(request, extra_args),
        # The text layer truncates (left, as vLLM's generation tokenizers); proto3 0 is unset.
        truncate_prompt_tokens=request.truncate_prompt_tokens or None,
        lora_request=lora_request,
        cache_salt=kv.cache_salt or None,
        priority=request.priority,
        kv_transfer_params=struct_to_dict(kv.kv_transfer_params)
        if kv.HasField("kv_transfer_params")
        else None,
    )


def _prompt(request: pb.GenerateRequest) -> str | list[int]:
    which = request.WhichOneof("prompt")
    if which is None:
        raise InvalidRequest("a prompt (text or token_ids) is required", param="prompt")
    return request.text if which == "text" else list(request.token_ids.ids)


def _params(request: pb.GenerateRequest, extra_args: dict[str, Any] | None) -> TextSamplingParams:
    s, d, stop, r = request.sampling, request.decoding, request.stopping, request.response
    return TextSamplingParams(
        n=s.num_sequences or 1,
        temperature=request.temperature if request.HasField("temperature") else None,
        top_p=s.top_p or None,
        top_k=s.top_k or None,
        min_p=s.min_p or None,
        seed=s.seed if s.HasField("seed") else None,
        presence_penalty=d.presence_penalty or None,
        frequency_penalty=d.frequency_penalty or None,
        repetition_penalty=d.repetition_penalty or None,
        logit_bias=dict(d.logit_bias) or None,
        allowed_token_ids=list(d.allowed_token_ids) or None,
        structured_outputs=_structured_outputs(d),
        max_tokens=stop.max_new_tokens or None,
        min_tokens=stop.min_new_tokens,
        stop_token_ids=list(stop.stop_token_ids),
        stop=list(stop.stop_strings),
        include_stop_str_in_output=stop.include_stop_strings,
        ignore_eos=stop.ignore_eos,
        logprobs=_candidates(r.output_candidates, "output_candidates") if r.output_logprobs else None,
        prompt_logprobs=_candidates(r.prompt_candidates, "prompt_candidates") if r.prompt_logprobs else None,
        extra_args=extra_args,
    )


def _candidates(selector: pb.CandidateTokens, param: str) -> int:
    """The top-logprobs count a selector asks for: top_n, all (-1), none (0)."""
    which = selector.WhichOneof("select")
    if which == "top_n":
        return selector.top_n
    if which == "all":
        return -1 if selector.all else 0
    if which == "token_ids" and selector.token_ids.ids:
        raise InvalidRequest(f"{param}: selecting candidates by token_ids is not supported", param=param)
    return 0


def _structured_outputs(d: pb.DecodingParameters) -> StructuredOutputs | None:
    which = d.WhichOneof("structured_output")
    if which == "json":
        try:
            schema = json.loads(d.json)
        except ValueError as exc:
            raise InvalidRequest(f"decoding.json is not a valid JSON schema: {exc}", param="json") from exc
        return StructuredOutputs(json=schema)
    if which == "regex":
        return StructuredOutputs(regex=d.regex)
    if which == "choice":
        return StructuredOutputs(choice=list(d.choice.choices))
    if which == "grammar":
        return StructuredOutputs(grammar=d.grammar)
    if which == "json_object":
        return StructuredOutputs(json_object=True) if d.json_object else None
    if which == "structural_tag":
        return StructuredOutputs(structural_tag=d.structural_tag)
    return None
