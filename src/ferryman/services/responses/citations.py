"""What a response's searches found (files, web pages), and the citation annotations of its answer."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_MARKER = re.compile(r"\[(\d{1,3})\]")


@dataclass(frozen=True)
class Source:
    """A file or a web page a search result came from.

    A file is cited with a ``file_citation`` (``file_id`` and ``filename``), a
    page with a ``url_citation`` (``url`` and ``title``), a file code wrote in a
    container with a ``container_file_citation``. ``mention`` is the text
    whose appearance in the answer cites it: the file's name, the page's URL.
    """

    file_id: str = ""
    filename: str = ""
    url: str = ""
    title: str = ""
    container_id: str = ""

    @property
    def mention(self) -> str:
        """The text that cites this source where the answer writes it."""
        return self.url or self.filename

    def annotation(self, start: int, end: int) -> dict[str, Any]:
        """The annotation citing this source for the answer's text ``[start:end]``."""
        if self.container_id:
            return {
                "type": "container_file_citation",
                "container_id": self.container_id,
                "file_id": self.file_id,
                "filename": self.filename,
                "start_index": start,
                "end_index": end,
            }
        if self.url:
            return {
                "type": "url_citation",
                "url": self.url,
                "title": self.title,
                "start_index": start,
                "end_index": end,
            }
        return {"type": "file_citation", "file_id": self.file_id, "filename": self.filename, "index": end}


@dataclass
class Sources:
    """What the searches of one response found, for citing.

    ``numbered`` are the results of the latest search, in the order the tool
    numbered them for the model (from 1); ``found`` every source any search of
    the response returned, each once, in the order found.
    """

    numbered: list[Source] = field(default_factory=list)
    found: list[Source] = field(default_factory=list)
    attached: list[Source] = field(default_factory=list)
    """Files code wrote since the last answer: that answer cites each, at its end."""

    def add_search(self, results: list[Source]) -> None:
        """Record a finished search's results, numbered as the model read them."""
        self.numbered = list(results)
        for source in self.numbered:
            if source not in self.found:
                self.found.append(source)

    def attach(self, files: list[Source]) -> None:
        """Record files the code wrote, for the next answer to cite."""
        self.attached.extend(files)

    def citations(self, text: str) -> list[dict[str, Any]]:
        """The annotations of an answer: what it cites of the searches (:meth:`searched`), then the attached files.

        The attached files are cited once: the next answer starts without them.
        """
        attached, self.attached = self.attached, []
        return [*self.searched(text), *(source.annotation(len(text), len(text)) for source in attached)]

    def searched(self, text: str) -> list[dict[str, Any]]:
        """The ``file_citation`` and ``url_citation`` annotations of an answer written after the searches.

        The rule, in order:

        1. each ``[n]`` in the text, where ``n`` numbers a result of the latest
           search, cites that result's source (a file at the index just after
           the marker; a page over the marker's span);
        2. each mention of a found file's name or a found page's URL cites it
           (at the index just after it; over its span);
        3. an answer that cites nothing either way is annotated with every
           source the searches returned, each once, at the end of the text.

        Nothing is annotated when no search returned anything. The text itself is
        left as the model wrote it (the markers stay: the client already streamed them).
        """
        if not self.found:
            return []
        cited: list[tuple[int, int, Source]] = []
        for match in _MARKER.finditer(text):
            number = int(match.group(1))
            if 1 <= number <= len(self.numbered):
                cited.append((match.start(), match.end(), self.numbered[number - 1]))
        for source in (s for s in self.found if s.mention):
            for match in re.finditer(re.escape(source.mention), text):
                cited.append((match.start(), match.end(), source))
        if not cited:
            cited = [(len(text), len(text), source) for source in self.found]
        return [source.annotation(start, end) for start, end, source in sorted(cited, key=lambda c: c[1])]
