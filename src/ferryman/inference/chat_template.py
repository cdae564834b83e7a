"""A GGUF model's chat template: read from the file's metadata and rendered in a Jinja sandbox.

The xllamacpp runtime gets a prompt rendered here rather than llama.cpp's chat endpoint, which
parses tool calls itself and refuses a grammar next to tools: rendering the template in Python, the
way llama-cpp-python does, keeps both runtimes' prompts and raw output the same.
"""

from __future__ import annotations

import functools
import struct
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from jinja2 import Template
from jinja2.sandbox import ImmutableSandboxedEnvironment

_MAGIC = b"GGUF"
_STRING, _ARRAY = 8, 9
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_WANTED = {
    "tokenizer.chat_template",
    "tokenizer.ggml.tokens",
    "tokenizer.ggml.bos_token_id",
    "tokenizer.ggml.eos_token_id",
    "tokenizer.ggml.add_bos_token",
}
CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
"""llama.cpp's own fallback for a model without a template."""


class _Reader:
    """Reads GGUF metadata values, keeping only the wanted ones."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file

    def scalar(self, fmt: str) -> Any:
        return struct.unpack(fmt, self._file.read(struct.calcsize(fmt)))[0]

    def string(self) -> str:
        return self._file.read(self.scalar("<Q")).decode("utf-8", errors="replace")

    def value(self, kind: int, keep: bool) -> Any:
        if kind == _STRING:
            return self.string() if keep else self._skip(self.scalar("<Q"))
        if kind == _ARRAY:
            item_kind, count = self.scalar("<I"), self.scalar("<Q")
            if not keep and item_kind in _SCALARS:
                return self._skip(count * struct.calcsize(_SCALARS[item_kind]))
            return [self.value(item_kind, keep) for _ in range(count)]
        return self.scalar(_SCALARS[kind])

    def _skip(self, size: int) -> None:
        self._file.seek(size, 1)


def read_metadata(path: str | Path, wanted: set[str]) -> dict[str, Any]:
    """Return the ``wanted`` metadata values of a GGUF file (tensors are not read).

    Raises:
        ValueError: The file is not a GGUF file (version 2 or later).
    """
    found: dict[str, Any] = {}
    with open(path, "rb") as file:
        reader = _Reader(file)
        if file.read(4) != _MAGIC or reader.scalar("<I") < 2:
            raise ValueError(f"{path} is not a GGUF file of version 2 or later")
        reader.scalar("<Q")  # tensor count
        for _ in range(reader.scalar("<Q")):
            key = reader.string()
            value = reader.value(reader.scalar("<I"), keep=key in wanted)
            if key in wanted:
                found[key] = value
    return found


def _raise_exception(message: str) -> None:
    raise ValueError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now().astimezone().strftime(fmt)


@functools.lru_cache(maxsize=8)
def _compiled(source: str) -> Template:
    """The template compiled once per process: compiling costs ~100 times a render, on every request."""
    # A template comes from a downloaded file: it runs sandboxed, like llama-cpp-python's.
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals.update(raise_exception=_raise_exception, strftime_now=_strftime_now)
    return environment.from_string(source)


@dataclass(frozen=True)
class ChatTemplate:
    """A model's chat template with the special tokens it refers to.

    Attributes:
        source: The Jinja template text.
        bos_token: The beginning-of-sequence token's text.
        eos_token: The end-of-sequence token's text.
        adds_bos: Whether the runtime adds the BOS token itself when it tokenizes a prompt.
        longest_token: The most UTF-8 bytes a token of the vocabulary is written with (0: unknown), at least
            as many as the prompt bytes one token stands for: a prompt of N bytes holds at least N / this tokens.
    """

    source: str
    bos_token: str = ""
    eos_token: str = ""
    adds_bos: bool = False
    longest_token: int = 0

    @classmethod
    def from_gguf(cls, path: str | Path) -> ChatTemplate:
        """Read a GGUF file's template (ChatML when it has none, as llama.cpp does)."""
        meta = read_metadata(path, _WANTED)
        tokens: list[str] = meta.get("tokenizer.ggml.tokens", [])

        def token(key: str) -> str:
            index = meta.get(key)
            return tokens[index] if isinstance(index, int) and 0 <= index < len(tokens) else ""

        return cls(
            source=meta.get("tokenizer.chat_template") or CHATML,
            bos_token=token("tokenizer.ggml.bos_token_id"),
            eos_token=token("tokenizer.ggml.eos_token_id"),
            adds_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
            # A byte-level BPE writes each byte as one character of 1-2 UTF-8 bytes, SentencePiece a space as
            # three bytes and a fallback byte as six: never fewer bytes than the token stands for.
            longest_token=max((len(text.encode()) for text in tokens), default=0),
        )

    def render(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> str:
        """Render a conversation, ending with the assistant's generation prompt.

        Raises:
            ValueError: The template refuses the conversation (its ``raise_exception``).
            jinja2.TemplateError: The template itself is broken, or breaks the sandbox's rules.
        """
        prompt = _compiled(self.source).render(
            messages=messages,
            tools=tools,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
            add_generation_prompt=True,
        )
        if self.adds_bos and self.bos_token and prompt.startswith(self.bos_token):
            prompt = prompt[len(self.bos_token) :]  # the runtime adds it: twice would confuse the model
        return str(prompt)
