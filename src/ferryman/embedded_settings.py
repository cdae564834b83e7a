"""The ``embedded:`` section of the settings: which runtime serves the embedded model."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

Runtime = Literal["auto", "xllamacpp", "llama-cpp-python"]
"""An embedded runtime, or ``auto``: the first installed (:func:`ferryman.inference.embedded_runtime.pick_runtime`)."""


class EmbeddedSettings(BaseModel):
    """The embedded model's runtime: ``auto`` takes xllamacpp when installed, else llama-cpp-python."""

    runtime: Runtime = "auto"
