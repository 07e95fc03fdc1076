"""Start-up hook for vLLM's spawned processes.

This directory is put on ``PYTHONPATH`` by ``vllm_llm.engine_core._vision_compat.child_environment`` so that
interpreters vLLM spawns, before importing anything, watch the frontend that started them
(``vllm_llm.engine_core._parent_watch``: an engine core ends itself when its frontend dies) and
install the torchvision-free import hook (``vllm_llm.engine_core._vision_compat``). Another
``sitecustomize`` shadowed by this one is still run.
"""

import importlib.util
import os
import sys


def _run_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        if not entry or os.path.abspath(entry) == here:
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            if spec is not None and spec.loader is not None:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            return


try:
    from vllm_llm.engine_core._parent_watch import watch_parent

    watch_parent()
except ImportError:  # the environment no longer has vllm_llm: nothing to watch
    pass
try:
    from vllm_llm.engine_core._vision_compat import install

    install()
except ImportError:  # the environment no longer has vllm_llm: nothing to patch
    pass
_run_shadowed()
