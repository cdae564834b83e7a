"""The text of an uploaded file: plain text and Markdown, HTML, JSON, CSV and PDF.

The kind of a file is told by its name's extension, else by its MIME type
(a PDF without either is still recognised by its ``%PDF-`` header). Text is
decoded as UTF-8 (with or without a byte order mark) or UTF-16 with a byte
order mark; bytes that are not UTF-8 are read as Windows-1252 / Latin-1 only
when they look like text, so that binary data is refused rather than indexed
as garbage.

HTML is parsed by lexbor (through ``selectolax``), an HTML5 parser in C that
reads any markup the way browsers do, about ten times as fast as
BeautifulSoup's ``html.parser`` and with a smaller tree. The parsed kinds
(:data:`PARSED_KINDS`) can still cost far more than their size: the server
parses them in a child process under limits (:mod:`.isolated`).
"""

from __future__ import annotations

import codecs
import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from selectolax.lexbor import LexborHTMLParser

UnreadableCode = Literal["unsupported_file", "invalid_file"]

_TEXT_EXTENSIONS = frozenset(
    ".txt .text .md .markdown .rst .log .tex .xml .yaml .yml .toml .ini .cfg "
    ".py .js .ts .java .c .h .cpp .hpp .cs .go .rb .php .rs .sh .css .sql".split()
)
_EXTENSIONS = {".html": "html", ".htm": "html", ".json": "json", ".jsonl": "jsonl", ".csv": "csv", ".tsv": "tsv"}
_MIME_TYPES = {
    "text/html": "html",
    "application/xhtml+xml": "html",
    "application/json": "json",
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "text/csv": "csv",
    "text/tab-separated-values": "tsv",
    "application/pdf": "pdf",
    "text/markdown": "text",
    "application/xml": "text",
    "application/x-yaml": "text",
}
PARSED_KINDS = frozenset({"html", "pdf", "json", "jsonl", "csv", "tsv"})
"""The kinds whose parse can cost far more than the file's size (a tree, an object graph, unpacked streams)."""
_CONTROL_BYTES = bytes(sorted(frozenset(range(32)) - {9, 10, 12, 13}))
_MOST_CONTROL_BYTES = 0.01
"""Above this share of control bytes, a file that is not UTF-8 is taken for binary data."""
_HIDDEN_TAGS = ["script", "style", "noscript", "template", "svg", "head", "iframe"]
_BLOCK_TAGS = ",".join(
    "address article aside blockquote dd div dl dt fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 "
    "header hr li main nav ol p pre section table tr ul title caption".split()
)
"""A CSS selector of the elements that start and end a line."""
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_SPACES = re.compile(r"[ \t\r\f\v\u00a0]+")


class UnreadableFile(Exception):
    """A file whose text cannot be had.

    Attributes:
        code: ``unsupported_file`` (a kind of file not read) or ``invalid_file`` (broken, empty or without text),
            OpenAI's ``last_error.code`` of a vector store file.
        message: Why, for a person.
    """

    def __init__(self, code: UnreadableCode, message: str) -> None:
        super().__init__(message)
        self.code: UnreadableCode = code
        self.message = message


def extract_text(data: bytes, filename: str, mime_type: str | None) -> str:
    """The text of a file, as a person would read it (in this process: see :mod:`.isolated` for the server's way).

    Args:
        data: The file's bytes.
        filename: Its name; the extension tells its kind first.
        mime_type: Its MIME type, when the extension tells nothing.

    Raises:
        UnreadableFile: an unsupported kind, or an empty, broken or textless file.
    """
    return read_as(file_kind(data, filename, mime_type), data)


def file_kind(data: bytes, filename: str, mime_type: str | None) -> str:
    """The kind of a file (``text``, ``html``, ``json``, ``jsonl``, ``csv``, ``tsv`` or ``pdf``), for :func:`read_as`.

    Raises:
        UnreadableFile: the file is empty, or of a kind that is not read.
    """
    if not data:
        raise UnreadableFile("invalid_file", "empty file")
    return _kind(data, filename, mime_type)


def read_as(kind: str, data: bytes) -> str:
    """The text of a file of a kind :func:`file_kind` told.

    Raises:
        UnreadableFile: a broken or textless file.
    """
    text = without_nul(_READERS[kind](data))
    if not text.strip():
        raise UnreadableFile("invalid_file", "the file holds no text")
    return text


def without_nul(text: str) -> str:
    """``text`` without NUL characters: never text (JSON's ``\\u0000``, some PDFs), and PostgreSQL refuses them."""
    return text.replace("\x00", "")


def _kind(data: bytes, filename: str, mime_type: str | None) -> str:
    extension = PurePosixPath(filename.replace("\\", "/")).suffix.lower()
    if extension in _EXTENSIONS:
        return _EXTENSIONS[extension]
    if extension == ".pdf":
        return "pdf"
    if extension in _TEXT_EXTENSIONS:
        return "text"
    mime = (mime_type or "").split(";")[0].strip().lower()
    if mime in _MIME_TYPES:
        return _MIME_TYPES[mime]
    if mime.startswith("text/"):
        return "text"
    if data.startswith(b"%PDF-"):
        return "pdf"
    described = f"'{extension}' files" if extension else f"files of type '{mime or 'unknown'}'"
    raise UnreadableFile("unsupported_file", f"{described} are not supported")


def decode_text(data: bytes) -> str:
    """Bytes of a text file as text (see the module docstring for the encodings tried).

    Raises:
        UnreadableFile: the bytes are not text (``invalid_file``).
    """
    if data.startswith(codecs.BOM_UTF8):
        return _strict(data, "utf-8-sig")
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return _strict(data, "utf-16")
    if b"\x00" in data:
        raise UnreadableFile("invalid_file", "the file holds binary data, not text")
    if len(data) - len(data.translate(None, _CONTROL_BYTES)) > len(data) * _MOST_CONTROL_BYTES:
        raise UnreadableFile("invalid_file", "the file holds binary data, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return data.decode("cp1252")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def _strict(data: bytes, encoding: str) -> str:
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise UnreadableFile("invalid_file", f"the file is not valid {encoding.removesuffix('-sig').upper()}") from exc
    if "\x00" in text:
        raise UnreadableFile("invalid_file", "the file holds binary data, not text")
    return text


def _html(data: bytes) -> str:
    markup = _XML_DECLARATION.sub("", decode_text(data), count=1)
    if "<" not in markup:
        return markup
    tree = _parse_html(markup)
    title_element = tree.css_first("title")
    title = title_element.text(separator=" ", strip=True) if title_element else ""
    tree.strip_tags(_HIDDEN_TAGS)
    for br in tree.css("br"):
        br.replace_with("\n")
    for block in tree.css(_BLOCK_TAGS):
        block.insert_before("\n")
        block.insert_after("\n")
    text = _tidy(tree.root.text() if tree.root else "")
    return f"{title}\n\n{text}" if title and not text.startswith(title) else text


def _parse_html(markup: str) -> LexborHTMLParser:
    # Imported here: the extraction child of an HTML file loads no PDF reader, and the reverse.
    from selectolax.lexbor import LexborHTMLParser, SelectolaxError

    try:
        return LexborHTMLParser(markup)
    except SelectolaxError as exc:
        # An HTML5 parser takes any markup: lexbor fails only when it cannot allocate its tree.
        raise MemoryError("the HTML parser could not allocate the document's tree") from exc


def _tidy(text: str) -> str:
    """Spaces collapsed in each line; runs of blank lines made one."""
    lines = [_SPACES.sub(" ", line).strip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def _load_json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise UnreadableFile("invalid_file", f"the file is not valid JSON: {exc}") from exc


def _json(data: bytes) -> str:
    return "\n".join(_json_lines(_load_json(decode_text(data)), 0))


def _jsonl(data: bytes) -> str:
    records = [_load_json(line) for line in decode_text(data).splitlines() if line.strip()]
    return "\n\n".join("\n".join(_json_lines(record, 0)) for record in records)


def _json_lines(value: Any, depth: int) -> Iterator[str]:
    """A JSON value as indented ``key: value`` lines, lists as ``-`` items: its text without the syntax."""
    indent = "  " * depth
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, dict | list) and item:
                yield f"{indent}{key}:"
                yield from _json_lines(item, depth + 1)
            else:
                yield f"{indent}{key}: {_scalar(item)}"
    elif isinstance(value, list):
        for item in value:
            lines = list(_json_lines(item, depth + 1))
            if lines:
                yield f"{indent}- {lines[0].lstrip()}"
                yield from lines[1:]
    else:
        yield f"{indent}{_scalar(value)}"


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return "{}" if isinstance(value, dict) else "[]"
    return str(value)


def _table(data: bytes, delimiter: str) -> str:
    """Each row after the header as one line of ``column: value`` pairs."""
    try:
        rows = [row for row in csv.reader(io.StringIO(decode_text(data), newline=""), delimiter=delimiter) if any(row)]
    except csv.Error as exc:
        raise UnreadableFile("invalid_file", f"the file is not valid CSV: {exc}") from exc
    if len(rows) < 2:
        return "\n".join(", ".join(row) for row in rows)
    header = [name.strip() or f"column {i + 1}" for i, name in enumerate(rows[0])]
    lines = []
    for row in rows[1:]:
        names = header + [f"column {i + 1}" for i in range(len(header), len(row))]
        lines.append(
            "; ".join(f"{name}: {value.strip()}" for name, value in zip(names, row, strict=False) if value.strip())
        )
    return "\n".join(lines)


def _pdf(data: bytes) -> str:
    import pypdf  # here, as selectolax in _parse_html
    import pypdf.errors

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise UnreadableFile("invalid_file", "the PDF is encrypted")
        pages = [page.extract_text() for page in reader.pages]
    except (pypdf.errors.PyPdfError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise UnreadableFile("invalid_file", f"the PDF cannot be read: {exc}") from exc
    text = "\n\n".join(page.strip() for page in pages if page.strip())
    if not text:
        raise UnreadableFile("invalid_file", "the PDF has no text layer (scanned pages would need OCR)")
    return text


_READERS: dict[str, Callable[[bytes], str]] = {
    "text": decode_text,
    "html": _html,
    "json": _json,
    "jsonl": _jsonl,
    "csv": lambda data: _table(data, ","),
    "tsv": lambda data: _table(data, "\t"),
    "pdf": _pdf,
}
