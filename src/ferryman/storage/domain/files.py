"""Uploaded files' metadata as records of the kernel (their bytes are in a blob store, not here).

A file is a root record of kind ``file``, its body the :class:`FileRecord`'s
fields, created at its ``created_at`` and indexed by purpose; its owner rides in
the record's own write, so a caller's page of files is filtered in the query.
"""

from __future__ import annotations

from ferryman.storage.domain.kinds import FILE
from ferryman.storage.domain.records import FieldsCodec, Records
from ferryman.storage.kernel.protocol import Kernel
from ferryman.storage.knowledge import FileRecord


def files(kernel: Kernel) -> Records[FileRecord]:
    """Files, by id, in creation order."""
    return Records(kernel, FILE, FieldsCodec(FileRecord), lambda file: file.file_id)
