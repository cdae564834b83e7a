"""Pulled models: the GGUF files ``ferryman models pull`` put under ``$FERRYMAN_HOME/models``.

The manifest ``$FERRYMAN_HOME/models/models.json`` lists them; ``ferryman serve``
reads it at start-up and serves each one through an embedded provider, so a
pulled model survives restarts without a server running at pull time.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ferryman.errors import ConfigurationError
from ferryman.home import ferryman_home

MANIFEST = "models.json"


def models_dir() -> Path:
    """Where pulled models live: ``$FERRYMAN_HOME/models``."""
    return ferryman_home() / "models"


@dataclass(frozen=True)
class PulledModel:
    """One pulled GGUF file.

    Attributes:
        name: The model id it is served under (by default the file's stem).
        repo_id: The Hub repository it came from (``owner/name``).
        filename: Its path inside the repository.
        commit: The repository commit it was downloaded at.
        sha256: The file's SHA-256, as verified against the Hub.
        size: Its size in bytes.
        path: The file, relative to the models directory.
        pulled_at: When it was pulled (Unix seconds).
    """

    name: str
    repo_id: str
    filename: str
    commit: str
    sha256: str
    size: int
    path: str
    pulled_at: int

    def file(self, directory: Path) -> Path:
        """The GGUF file, given the models directory."""
        return directory / self.path


class PulledModels:
    """The manifest of a models directory.

    Args:
        directory: The models directory (default: :func:`models_dir`).
    """

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or models_dir()
        self.manifest = self.directory / MANIFEST

    def all(self) -> list[PulledModel]:
        """Every pulled model, in pull order (none when nothing was pulled yet).

        Raises:
            ConfigurationError: The manifest is not one this version wrote.
        """
        if not self.manifest.is_file():
            return []
        try:
            data = json.loads(self.manifest.read_text(encoding="utf-8"))
            return [PulledModel(**entry) for entry in data["models"]]
        except (ValueError, KeyError, TypeError) as exc:
            raise ConfigurationError(f"unreadable pulled-models manifest {self.manifest}: {exc}") from exc

    def get(self, name: str) -> PulledModel | None:
        """The pulled model named ``name``, if any."""
        return next((model for model in self.all() if model.name == name), None)

    def add(self, model: PulledModel) -> None:
        """Record ``model``, replacing any model of the same name."""
        models = [known for known in self.all() if known.name != model.name]
        self._write([*models, model])

    def remove(self, name: str) -> PulledModel | None:
        """Forget the model named ``name`` (its file stays); return it, or None if there was none."""
        models = self.all()
        found = next((model for model in models if model.name == name), None)
        if found is not None:
            self._write([model for model in models if model.name != name])
        return found

    def _write(self, models: list[PulledModel]) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        document: dict[str, Any] = {"models": [asdict(model) for model in models]}
        # Written whole, then renamed: a serve starting meanwhile reads the old manifest or the new one.
        with tempfile.NamedTemporaryFile(
            "w", encoding="utf-8", dir=self.directory, prefix=".models-", suffix=".json", delete=False
        ) as handle:
            json.dump(document, handle, indent=2)
        os.replace(handle.name, self.manifest)
