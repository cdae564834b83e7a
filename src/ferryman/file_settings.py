"""The ``files:`` section of the settings: where uploaded files go, and what extracting their text may cost."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from ferryman.home import ferryman_home

DEFAULT_EXTRACTION_MEMORY_MB = 1024
"""The address space of the child process that parses a file (``files.extraction_memory_mb``)."""
DEFAULT_EXTRACTION_TIMEOUT_SECONDS = 60.0
"""The time that child gets to answer (``files.extraction_timeout_seconds``)."""


class FileSettings(BaseModel):
    """Uploaded files: where their bytes go (``dir``; default ``$FERRYMAN_HOME/files``, shared by replicas),
    the largest accepted (``max_bytes``), and how long an ingestion job's claim lasts unrenewed.

    The text of an HTML, PDF, JSON or CSV file is parsed in a child process whose address space is capped at
    ``extraction_memory_mb`` (1 GiB: about two million HTML elements with their text, or the largest stream
    pypdf unpacks, 75 MB, several times over) and which is killed after ``extraction_timeout_seconds`` (60 s:
    50 MB of markup takes under 10, pypdf reads about 40 pages a second); a file over either fails its
    ingestion with ``last_error`` naming the setting. With ingestion's two jobs at once, parsing holds at most
    twice the memory limit.
    """

    dir: str | None = None
    max_bytes: int = Field(default=512 * 1024 * 1024, gt=0)
    ingestion_lease_seconds: float = Field(default=60.0, gt=0)
    extraction_memory_mb: int = Field(default=DEFAULT_EXTRACTION_MEMORY_MB, ge=64)
    extraction_timeout_seconds: float = Field(default=DEFAULT_EXTRACTION_TIMEOUT_SECONDS, gt=0)

    def directory(self) -> Path:
        """The blob directory: the configured one or ``$FERRYMAN_HOME/files``."""
        if self.dir:
            return Path(self.dir)
        return ferryman_home() / "files"
