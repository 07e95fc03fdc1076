# ruff: noqa: E501
# (the real-world templates below are kept as written)
"""Chat-template content format detection (`vllm_llm.chat._content_format`) equals vLLM 0.32's
`--chat-template-content-format auto` (`vllm.renderers.hf._detect_content_format`) on templates of every
shape it looks for, real-world templates written inline, and the templates vLLM ships."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.quiet_import import quietly_import
from vllm_frontend_testing.tiny_model import CHAT_TEMPLATE
from vllm_llm.chat._content_format import detect_content_format

LLAMA_3 = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}"
    "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

LLAMA_3_1 = """{{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\\n\\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\\n" }}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\\n" }}
{{- "Today Date: " + date_string + "\\n\\n" }}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- if tools_in_user_message and not tools is none %}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
    {%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\\n\\n' -}}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\\n\\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
            {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\\n\\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

LLAMA_3_2_VISION = """{{- bos_token }}
{%- for message in messages %}
    {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' }}
    {%- if message['content'] is string %}
        {{- message['content'] }}
    {%- else %}
        {%- for content in message['content'] %}
            {%- if content['type'] == 'image' %}
                {{- '<|image|>' }}
            {%- elif content['type'] == 'text' %}
                {{- content['text'] }}
            {%- endif %}
        {%- endfor %}
    {%- endif %}
    {{- '<|eot_id|>' }}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}
{%- endif %}
"""

QWEN_2_5 = """{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are Qwen, created by Alibaba Cloud. You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n" }}
    {{- "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments " }}
    {{- "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n" }}
    {{- '{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- else %}
    {%- if messages[0]['role'] == 'system' %}
        {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
    {%- else %}
        {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
    {%- endif %}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant" and not message.tool_calls) %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- elif message.role == "assistant" %}
        {{- '<|im_start|>' + message.role }}
        {%- if message.content %}
            {{- '\\n' + message.content }}
        {%- endif %}
        {%- for tool_call in message.tool_calls %}
            {%- if tool_call.function is defined %}
                {%- set tool_call = tool_call.function %}
            {%- endif %}
            {{- '\\n<tool_call>\\n{"name": "' }}
            {{- tool_call.name }}
            {{- '", "arguments": ' }}
            {{- tool_call.arguments | tojson }}
            {{- '}\\n</tool_call>' }}
        {%- endfor %}
        {{- '<|im_end|>\\n' }}
    {%- elif message.role == "tool" %}
        {%- if (loop.index0 == 0) or (messages[loop.index0 - 1].role != "tool") %}
            {{- '<|im_start|>user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' }}
        {{- message.content }}
        {{- '\\n</tool_response>' }}
        {%- if loop.last or (messages[loop.index0 + 1].role != "tool") %}
            {{- '<|im_end|>\\n' }}
        {%- endif %}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

QWEN_2_VL = (
    "{% set image_count = namespace(value=0) %}{% set video_count = namespace(value=0) %}"
    "{% for message in messages %}{% if loop.first and message['role'] != 'system' %}"
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "<|im_start|>{{ message['role'] }}\n"
    "{% if message['content'] is string %}{{ message['content'] }}<|im_end|>\n"
    "{% else %}{% for content in message['content'] %}"
    "{% if content['type'] == 'image' or 'image' in content or 'image_url' in content %}"
    "{% set image_count.value = image_count.value + 1 %}"
    "{% if add_vision_id %}Picture {{ image_count.value }}: {% endif %}"
    "<|vision_start|><|image_pad|><|vision_end|>"
    "{% elif content['type'] == 'video' or 'video' in content %}"
    "{% set video_count.value = video_count.value + 1 %}"
    "{% if add_vision_id %}Video {{ video_count.value }}: {% endif %}"
    "<|vision_start|><|video_pad|><|vision_end|>"
    "{% elif 'text' in content %}{{ content['text'] }}{% endif %}{% endfor %}<|im_end|>\n"
    "{% endif %}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

MISTRAL_V03 = (
    "{%- if messages[0]['role'] == 'system' %}{%- set system_message = messages[0]['content'] %}"
    "{%- set loop_messages = messages[1:] %}{%- else %}{%- set loop_messages = messages %}{%- endif %}"
    "{{- bos_token }}{%- for message in loop_messages %}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{- raise_exception('After the optional system message, conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{%- endif %}"
    "{%- if message['role'] == 'user' %}{%- if loop.first and system_message is defined %}"
    "{{- ' [INST] ' + system_message + '\n\n' + message['content'] + ' [/INST]' }}"
    "{%- else %}{{- ' [INST] ' + message['content'] + ' [/INST]' }}{%- endif %}"
    "{%- elif message['role'] == 'assistant' %}{{- ' ' + message['content'] + eos_token}}"
    "{%- else %}{{- raise_exception('Only user and assistant roles are supported, with the exception "
    "of an initial optional system message!') }}{%- endif %}{%- endfor %}"
)

MISTRAL_SMALL_3_1 = """{%- set today = strftime_now("%Y-%m-%d") %}
{%- set default_system_message = "You are Mistral Small 3, a Large Language Model (LLM) created by Mistral AI." %}
{{- bos_token }}
{%- if messages[0]['role'] == 'system' %}
    {%- if messages[0]['content'] is string %}
        {%- set system_message = messages[0]['content'] %}
    {%- else %}
        {%- set system_message = messages[0]['content'][0]['text'] %}
    {%- endif %}
    {%- set loop_messages = messages[1:] %}
{%- else %}
    {%- set system_message = default_system_message %}
    {%- set loop_messages = messages %}
{%- endif %}
{{- '[SYSTEM_PROMPT]' + system_message + '[/SYSTEM_PROMPT]' }}
{%- for message in loop_messages %}
    {%- if message['role'] == 'user' %}
        {%- if message['content'] is string %}
            {{- '[INST]' + message['content'] + '[/INST]' }}
        {%- else %}
            {{- '[INST]' }}
            {%- for block in message['content'] %}
                {%- if block['type'] == 'text' %}
                    {{- block['text'] }}
                {%- elif block['type'] in ['image', 'image_url'] %}
                    {{- '[IMG]' }}
                {%- else %}
                    {{- raise_exception('Only text and image blocks are supported in message content!') }}
                {%- endif %}
            {%- endfor %}
            {{- '[/INST]' }}
        {%- endif %}
    {%- elif message['role'] == 'system' %}
        {{- '[SYSTEM_PROMPT]' + message['content'] + '[/SYSTEM_PROMPT]' }}
    {%- elif message['role'] == 'assistant' %}
        {{- message['content'] + eos_token }}
    {%- else %}
        {{- raise_exception('Only user, system and assistant roles are supported!') }}
    {%- endif %}
{%- endfor %}
"""

GEMMA_2 = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}"
    "{{ raise_exception('System role not supported') }}{% endif %}"
    "{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}"
    "{% else %}{% set role = message['role'] %}{% endif %}"
    "{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

GEMMA_3 = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

_LOOP = "{% for m in messages %}"
_END = "{% endfor %}"

#: (name, template, the format vLLM detects).
TEMPLATES: list[tuple[str, str, str]] = [
    ("tiny_model", CHAT_TEMPLATE, "openai"),
    ("string_only", "{% for m in messages %}{{ m['content'] }}{% endfor %}", "string"),
    ("string_attr", "{% for m in messages %}{{ m.role }}: {{ m.content | trim }}\n{% endfor %}", "string"),
    ("empty", "", "string"),
    ("no_messages_at_all", "Hello {{ name }}", "string"),
    ("parts_loop_getitem", _LOOP + "{% for p in m['content'] %}{{ p['text'] }}{% endfor %}" + _END, "openai"),
    ("parts_loop_getattr", _LOOP + "{% for p in m.content %}{{ p.text }}{% endfor %}" + _END, "openai"),
    (
        "parts_loop_filtered",
        _LOOP + "{% for p in m.content | selectattr('type') %}{{ p.text }}{% endfor %}" + _END,
        "openai",
    ),
    ("parts_loop_sliced", _LOOP + "{% for p in m['content'][1:] %}{{ p.text }}{% endfor %}" + _END, "openai"),
    (
        "parts_loop_conditional",
        _LOOP + "{% for p in m.content if p.type == 'text' %}{{ p.text }}{% endfor %}" + _END,
        "openai",
    ),
    ("content_index_only", _LOOP + "{{ m.content[0]['text'] }}" + _END, "string"),
    ("content_index_then_loop", _LOOP + "{% for c in m.content[0] %}{{ c }}{% endfor %}" + _END, "string"),
    (
        "is_string_check",
        _LOOP + "{% if m.content is string %}{{ m.content }}{% else %}"
        "{% for p in m.content %}{{ p.text }}{% endfor %}{% endif %}" + _END,
        "openai",
    ),
    ("is_string_only", _LOOP + "{% if m.content is string %}{{ m.content }}{% endif %}" + _END, "string"),
    (
        "loop_over_other_list",
        "{% for item in items %}{% for p in item.content %}{{ p }}{% endfor %}{% endfor %}",
        "string",
    ),
    (
        "alias_set",
        "{% set msgs = messages %}{% for m in msgs %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}",
        "openai",
    ),
    (
        "alias_chain",
        "{% set a = messages[1:] %}{% set b = a | list %}{% for m in b %}{% for p in m['content'] %}{{ p }}"
        "{% endfor %}{% endfor %}",
        "openai",
    ),
    (
        "alias_self",
        "{% set messages = messages[1:] %}" + _LOOP + "{% for p in m.content %}{{ p }}{% endfor %}" + _END,
        "openai",
    ),
    (
        "alias_of_element",
        "{% set first = messages[0] %}{% for p in first.content %}{{ p }}{% endfor %}",
        "string",
    ),
    (
        "filtered_messages",
        "{% for m in messages | rejectattr('role', 'eq', 'system') %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}",
        "openai",
    ),
    (
        "named_content_var",
        _LOOP + "{% set content = m.content %}{% for p in content %}{{ p }}{% endfor %}" + _END,
        "openai",
    ),
    ("content_var_without_messages", "{% for p in content %}{{ p }}{% endfor %}", "openai"),
    (
        "macro_positional",
        "{% macro render(parts) %}{% for p in parts %}{{ p.text }}{% endfor %}{% endmacro %}"
        + _LOOP
        + "{{ render(m.content) }}"
        + _END,
        "openai",
    ),
    (
        "macro_keyword",
        "{% macro render(x, parts=none) %}{% for p in parts %}{{ p.text }}{% endfor %}{% endmacro %}"
        + _LOOP
        + "{{ render(1, parts=m['content']) }}"
        + _END,
        "openai",
    ),
    (
        "macro_other_argument",
        "{% macro render(parts) %}{% for p in parts %}{{ p }}{% endfor %}{% endmacro %}"
        + _LOOP
        + "{{ render(m.role) }}"
        + _END,
        "string",
    ),
    (
        "macro_content_param_never_passed",
        "{% macro render(content) %}{% for p in content %}{{ p }}{% endfor %}{% endmacro %}"
        + _LOOP
        + "{{ m.content }}"
        + _END,
        "string",
    ),
    (
        "macro_call_block",
        "{% macro wrap(parts) %}{% for p in parts %}{{ caller() }}{{ p }}{% endfor %}{% endmacro %}"
        + _LOOP
        + "{% call wrap(m.content) %}-{% endcall %}"
        + _END,
        "openai",
    ),
    ("tuple_loop_over_messages", "{% for i, m in messages %}{{ m }}{% endfor %}", "string"),
    (
        "tuple_loop_over_messages_with_parts_loop",
        "{% for i, m in messages %}{{ m }}{% endfor %}"
        + _LOOP
        + "{% for p in m.content %}{{ p }}{% endfor %}"
        + _END,
        "string",
    ),
    ("tuple_loop_over_parts", _LOOP + "{% for k, v in m.content %}{{ k }}{% endfor %}" + _END, "string"),
    (
        "parts_loop_then_tuple_loop",
        _LOOP
        + "{% for p in m.content %}{{ p }}{% endfor %}{% for k, v in m.content %}{{ k }}{% endfor %}"
        + _END,
        "openai",
    ),
    (
        "tuple_set_from_messages",
        "{% set a, b = messages %}" + _LOOP + "{% for p in m.content %}{{ p }}{% endfor %}" + _END,
        "string",
    ),
    (
        "namespace_set_from_messages",
        "{% set ns = namespace() %}{% set ns.m = messages %}"
        + _LOOP
        + "{% for p in m.content %}{{ p }}{% endfor %}"
        + _END,
        "string",
    ),
    (
        "with_block_alias",
        "{% with msgs = messages %}{% for m in msgs %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}{% endwith %}",
        "string",
    ),
    (
        "loop_controls_and_generation",
        _LOOP
        + "{% if m.role == 'x' %}{% continue %}{% endif %}{% generation %}{% for p in m.content %}{{ p }}{% break %}{% endfor %}{% endgeneration %}"
        + _END,
        "openai",
    ),
    ("syntax_error", _LOOP + "{% for p in m.content %}{{ p }}" + _END, "string"),
    (
        "unknown_filter",
        _LOOP + "{% for p in m.content %}{{ p | no_such_filter }}{% endfor %}" + _END,
        "string",
    ),
    (
        "unknown_filter_in_if",
        _LOOP + "{% for p in m.content %}{% if p %}{{ p | no_such_filter }}{% endif %}{% endfor %}" + _END,
        "openai",
    ),
    (
        # Jinja resolves tests and filters inside `if` blocks at render time: this compiles.
        "unknown_test",
        _LOOP + "{% for p in m.content %}{% if p is no_such_test %}x{% endif %}{% endfor %}" + _END,
        "openai",
    ),
    ("llama_3", LLAMA_3, "string"),
    ("llama_3_1", LLAMA_3_1, "string"),
    ("llama_3_2_vision", LLAMA_3_2_VISION, "openai"),
    ("qwen_2_5", QWEN_2_5, "string"),
    ("qwen_2_vl", QWEN_2_VL, "openai"),
    ("mistral_v0_3", MISTRAL_V03, "string"),
    ("mistral_small_3_1", MISTRAL_SMALL_3_1, "openai"),
    ("gemma_2", GEMMA_2, "string"),
    ("gemma_3", GEMMA_3, "openai"),
]


@pytest.fixture(scope="module")
def vllm_detect() -> Callable[[str], str]:
    hf = quietly_import("vllm.renderers.hf")

    def detect(template: str) -> str:
        # As vLLM's `_resolve_chat_template_content_format` calls it.
        return str(hf._detect_content_format(template, default="string"))

    return detect


@pytest.mark.parametrize(("template", "expected"), [pytest.param(t, e, id=n) for n, t, e in TEMPLATES])
def test_content_format_equals_vllm(template: str, expected: str, vllm_detect: Callable[[str], str]) -> None:
    assert vllm_detect(template) == expected
    assert detect_content_format(template) == expected


def _vllm_shipped_templates() -> list[Path]:
    spec = __import__("importlib.util").util.find_spec("vllm")
    assert spec is not None and spec.origin is not None
    return sorted((Path(spec.origin).parent / "transformers_utils" / "chat_templates").glob("*.jinja"))


@pytest.mark.parametrize("path", _vllm_shipped_templates(), ids=lambda p: p.stem)
def test_content_format_of_vllm_shipped_templates(path: Path, vllm_detect: Callable[[str], str]) -> None:
    template = path.read_text(encoding="utf-8")
    assert detect_content_format(template) == vllm_detect(template)


def test_set_cycles_end() -> None:
    """vLLM's search never returns on a cycle of `set`s (not compared); ours follows each variable once."""
    template = (
        "{% set a = messages %}{% set b = a %}{% set a = b %}"
        "{% for m in b %}{% for p in m.content %}{{ p }}{% endfor %}{% endfor %}"
    )
    assert detect_content_format(template) == "openai"
