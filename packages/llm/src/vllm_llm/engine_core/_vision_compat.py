"""Make vLLM's vision models importable where torchvision is absent (the CPU build's environment).

vLLM 0.32's LLaVA family imports ``vllm.model_executor.models.pixtral``, which imports
``transformers.models.pixtral.image_processing_pixtral`` for one helper (the image-token count).
In transformers 5 that module is the torchvision backend, and PyPI's torchvision is a CUDA build
that breaks beside the CPU torch. transformers ships the same helper in its PIL backend
(``image_processing_pil_pixtral``); when torchvision is missing, this module answers the import of
the torchvision module with the PIL one (its names, plus ``PixtralImageProcessor`` as the PIL
class), and nothing else changes.

vLLM runs the model code in processes of its own: the engine core and its workers are *spawned*
(the CPU platform forces spawn) and model inspection runs ``python -m
vllm.model_executor.models.registry`` in a subprocess. None of them inherits an import hook, so
:func:`child_environment` puts the ``_startup`` directory (one ``sitecustomize.py`` that calls
:func:`install`) on ``PYTHONPATH``; every interpreter started from that environment installs the
hook before it imports anything else. The same start-up hook runs the parent-death watch
(``vllm_llm.engine_core._parent_watch``), so :func:`install_for_children` puts the directory there
whether or not torchvision is missing.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import os
import pathlib
import sys
import types
from collections.abc import Mapping, Sequence

_TARGET = "transformers.models.pixtral.image_processing_pixtral"
_SOURCE = "transformers.models.pixtral.image_processing_pil_pixtral"
#: The directory whose ``sitecustomize.py`` installs the hook in a new interpreter.
STARTUP_DIR = str(pathlib.Path(__file__).with_name("_startup"))


class _PilPixtralLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        source = importlib.import_module(_SOURCE)
        module.__dict__.update({k: v for k, v in vars(source).items() if not k.startswith("__")})
        module.PixtralImageProcessor = source.PixtralImageProcessorPil  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: types.ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != _TARGET:
            return None
        return importlib.machinery.ModuleSpec(fullname, _PilPixtralLoader())


def needed() -> bool:
    """Whether torchvision is missing (so the hook has something to do)."""
    return importlib.util.find_spec("torchvision") is None


def install() -> None:
    """Install the import hook in this interpreter, once, if torchvision is missing."""
    if any(isinstance(f, _Finder) for f in sys.meta_path) or not needed():
        return
    sys.meta_path.insert(0, _Finder())


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: this process's) with the start-up directory first on ``PYTHONPATH``."""
    out = dict(os.environ if env is None else env)
    paths = [p for p in out.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR]
    out["PYTHONPATH"] = os.pathsep.join([STARTUP_DIR, *paths])
    return out


def install_for_children() -> None:
    """Install the hook here, and run the start-up hook in every process this one starts from now on
    (it installs the import hook where torchvision is missing, and watches this process)."""
    install()
    os.environ["PYTHONPATH"] = child_environment()["PYTHONPATH"]
