"""Uploaded files' metadata as records of the kernel (their bytes are in a blob store, not here).

A file is a root record of kind ``file``, its body the :class:`FileRecord`'s
fields, created at its ``created_at`` and indexed by purpose; its owner rides in
the record's own write, so a caller's page of files is filtered in the query.
"""

from __future__ import annotations

from dataclasses import asdict

from ..kernel.model import Json
from ..kernel.protocol import Kernel
from ..knowledge import FileRecord
from .kinds import FILE
from .records import Records


class FileCodec:
    """A file's metadata as its fields (``expires_at`` null when it never expires)."""

    def dump(self, value: FileRecord) -> Json:
        """The file's body."""
        return asdict(value)

    def load(self, body: Json) -> FileRecord:
        """The file ``dump`` stored."""
        return FileRecord(**body)


def files(kernel: Kernel) -> Records[FileRecord]:
    """Files, by id, in creation order."""
    return Records(kernel, FILE, FileCodec(), lambda file: file.file_id)
