"""The files a response's file searches found, and the ``file_citation`` annotations of its answer."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ferryman.api.responses import FileSearchResult

_MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class Source:
    """A file a passage came from."""

    file_id: str
    filename: str


@dataclass
class Sources:
    """What the file searches of one response found, for citing.

    ``numbered`` are the passages of the latest search, in the order the tool
    numbered them for the model (from 1); ``files`` every file any search of the
    response returned a passage of, each once, in the order found.
    """

    numbered: list[Source] = field(default_factory=list)
    files: list[Source] = field(default_factory=list)

    def add_search(self, results: list[FileSearchResult]) -> None:
        """Record a finished search's passages."""
        self.numbered = [Source(r.file_id, r.filename) for r in results]
        for source in self.numbered:
            if source not in self.files:
                self.files.append(source)

    def citations(self, text: str) -> list[dict[str, Any]]:
        """The ``file_citation`` annotations of an answer written after the searches.

        The rule, in order:

        1. each ``[n]`` in the text, where ``n`` numbers a passage of the latest
           search, cites that passage's file at the index just after the marker;
        2. each mention of a found file's name cites that file at the index just
           after the name;
        3. an answer that cites nothing either way is annotated with every file
           whose passages were returned, each once, at the end of the text.

        Nothing is annotated when no search returned anything. The text itself is
        left as the model wrote it (the markers stay: the client already streamed them).
        """
        if not self.files:
            return []
        found: list[tuple[int, Source]] = []
        for match in _MARKER.finditer(text):
            number = int(match.group(1))
            if 1 <= number <= len(self.numbered):
                found.append((match.end(), self.numbered[number - 1]))
        for source in (s for s in self.files if s.filename):
            for match in re.finditer(re.escape(source.filename), text):
                found.append((match.end(), source))
        if not found:
            found = [(len(text), source) for source in self.files]
        return [_citation(index, source) for index, source in sorted(found, key=lambda pair: pair[0])]


def _citation(index: int, source: Source) -> dict[str, Any]:
    return {"type": "file_citation", "file_id": source.file_id, "filename": source.filename, "index": index}
