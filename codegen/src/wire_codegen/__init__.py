"""Generator and compatibility linter for the vllm.internal wire spec (`spec/llm.yaml`)."""

from wire_codegen.compat import Finding, lint
from wire_codegen.loader import SpecError, load_spec, load_spec_text
from wire_codegen.model import Spec
from wire_codegen.render import render
from wire_codegen.table import compat_table

__all__ = [
    "Finding",
    "Spec",
    "SpecError",
    "compat_table",
    "lint",
    "load_spec",
    "load_spec_text",
    "render",
]
