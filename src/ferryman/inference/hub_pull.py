"""Download a GGUF from the Hugging Face Hub into the models directory and record it.

``huggingface_hub`` does the transfer: it follows ``HF_ENDPOINT``, sends
``HF_TOKEN``, honours ``HF_HUB_OFFLINE``, shows a progress bar, and resumes a
body cut mid-way with a range request. Each repository gets its own
``local_dir`` under the models directory (``models/OWNER/NAME/FILE``), so the
files are plain files, not links into the Hub's cache. The Hub does not check
what it wrote, so the file is hashed here against the Hub's ETag (the SHA-256
of an LFS file) before it is recorded.
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import httpx2
from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url, is_offline_mode
from huggingface_hub.errors import (
    GatedRepoError,
    HfHubHTTPError,
    HFValidationError,
    LocalEntryNotFoundError,
    OfflineModeIsEnabled,
    RemoteEntryNotFoundError,
    RepositoryNotFoundError,
    RevisionNotFoundError,
)
from huggingface_hub.utils import validate_repo_id  # type: ignore[attr-defined]  # exported lazily

from ferryman.errors import ConfigurationError, InvalidRequestError, NotFoundError, UpstreamError

from .pulled import PulledModel, PulledModels

HF_SCHEME = "hf://"
SETTINGS_HINT = (
    "HF_ENDPOINT names the Hub or a mirror, HF_TOKEN authenticates, HF_HUB_OFFLINE=1 uses only files pulled before"
)
"""The settings that change where and how a pull downloads, named by its errors (with the endpoint tried)."""
_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class PullRequest:
    """What to pull: a file of a Hub repository, and the name to serve it under."""

    repo_id: str
    filename: str
    revision: str | None = None
    name: str | None = None

    @property
    def model_name(self) -> str:
        """The name it is served under: the one given, else the file's stem."""
        return self.name or Path(self.filename).stem


def parse_source(source: str, filename: str | None) -> tuple[str, str]:
    """Split ``REPO FILE`` or ``hf://OWNER/NAME/PATH/TO/FILE`` into the repository and the file.

    Raises:
        InvalidRequestError: Neither form.
    """
    if source.startswith(HF_SCHEME):
        if filename is not None:
            raise InvalidRequestError(f"give either {HF_SCHEME}OWNER/NAME/FILE or REPO FILE, not both")
        parts = source.removeprefix(HF_SCHEME).split("/")
        if len(parts) < 3 or not all(parts):
            raise InvalidRequestError(f"expected {HF_SCHEME}OWNER/NAME/FILE, got {source}")
        return "/".join(parts[:2]), "/".join(parts[2:])
    if filename is None:
        raise InvalidRequestError(f"name the file to pull: REPO FILE, or {HF_SCHEME}OWNER/NAME/FILE")
    return source, filename


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub a pull downloads from: ``endpoint``, else ``HF_ENDPOINT`` (read at import), else huggingface.co."""
    return (endpoint or constants.ENDPOINT).rstrip("/")


def pull(
    request: PullRequest,
    models: PulledModels | None = None,
    endpoint: str | None = None,
    token: str | None = None,
) -> PulledModel:
    """Download (or find, offline) the file, verify it, and record it in the manifest.

    Args:
        request: The repository, file, revision and name.
        models: The models directory's manifest (default: ``$FERRYMAN_HOME/models``).
        endpoint: The Hub (default: ``HF_ENDPOINT``, else huggingface.co).
        token: The Hub token (default: ``HF_TOKEN``, else the Hub's login).

    Raises:
        NotFoundError: No such repository, revision or file (or the token may not read it).
        ConfigurationError: Offline, and the file was never pulled.
        UpstreamError: The Hub cannot be reached, or what came does not match its checksum.
    """
    models = models or PulledModels()
    local_dir = _local_dir(models.directory, request)
    where = hub_endpoint(endpoint)
    try:
        if is_offline_mode():
            return _record(models, request, _offline_copy(request, local_dir))
        return _record(models, request, _download(request, local_dir, where, token))
    except (OfflineModeIsEnabled, LocalEntryNotFoundError) as exc:
        raise ConfigurationError(
            f"HF_HUB_OFFLINE is set and {request.repo_id}/{request.filename} was never pulled: "
            f"unset HF_HUB_OFFLINE to download it from {where} (HF_ENDPOINT names another Hub or a mirror)"
        ) from exc
    except (RepositoryNotFoundError, RevisionNotFoundError, RemoteEntryNotFoundError) as exc:
        raise NotFoundError(f"{_not_found(request, exc)} at {where} ({SETTINGS_HINT})") from exc
    except (HfHubHTTPError, httpx2.HTTPError, OSError) as exc:
        raise UpstreamError(
            f"could not pull {request.repo_id}/{request.filename} from {where}: {_first_line(exc)} ({SETTINGS_HINT})"
        ) from exc


def _local_dir(directory: Path, request: PullRequest) -> Path:
    """The repository's folder under ``directory``, once neither it nor the file can point elsewhere.

    Raises:
        InvalidRequestError: The repository's id is not one the Hub allows, or the file's path is
            absolute or climbs out.
    """
    try:
        validate_repo_id(request.repo_id)
    except HFValidationError as exc:
        raise InvalidRequestError(f"not a Hub repository (OWNER/NAME): {request.repo_id}") from exc
    parts = PurePosixPath(request.filename).parts
    if not parts or parts[0] == "/" or "\\" in request.filename or any(part in (".", "..") for part in parts):
        raise InvalidRequestError(f"not a file path inside the repository: {request.filename}")
    return directory / request.repo_id


@dataclass(frozen=True)
class _Fetched:
    path: Path
    commit: str
    sha256: str


def _download(request: PullRequest, local_dir: Path, endpoint: str | None, token: str | None) -> _Fetched:
    url = hf_hub_url(request.repo_id, request.filename, revision=request.revision, endpoint=endpoint)
    metadata = get_hf_file_metadata(url, token=token, endpoint=endpoint)
    if metadata.commit_hash is None or metadata.etag is None:
        raise UpstreamError(f"{url} answered without a commit or an ETag: is HF_ENDPOINT a Hugging Face Hub?")
    path = Path(
        hf_hub_download(
            request.repo_id,
            request.filename,
            revision=metadata.commit_hash,
            local_dir=local_dir,
            endpoint=endpoint,
            token=token,
        )
    )
    return _Fetched(path, metadata.commit_hash, _verified(path, metadata.etag))


def _offline_copy(request: PullRequest, local_dir: Path) -> _Fetched:
    """The file pulled before, found without the network (``huggingface_hub`` checks nothing offline)."""
    path = Path(hf_hub_download(request.repo_id, request.filename, revision=request.revision, local_dir=local_dir))
    return _Fetched(path, request.revision or "", _sha256(path))


def _verified(path: Path, etag: str) -> str:
    """The file's SHA-256 once it matches the Hub's ETag; a file that does not is deleted.

    An LFS file's ETag is its SHA-256; a small file kept in git has its git blob SHA-1 instead.
    """
    digest = _sha256(path)
    if _SHA256.fullmatch(etag):
        matches = digest == etag
    elif _GIT_SHA1.fullmatch(etag):
        matches = _git_blob_sha1(path) == etag
    else:
        raise UpstreamError(f"the Hub's ETag for {path.name} is no checksum ({etag}); refusing an unverified file")
    if not matches:
        path.unlink(missing_ok=True)
        raise UpstreamError(f"{path.name} does not match the Hub's checksum {etag}: deleted it; pull again")
    return digest


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def _git_blob_sha1(path: Path) -> str:
    header = f"blob {path.stat().st_size}\0".encode()
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, lambda: hashlib.sha1(header, usedforsecurity=False)).hexdigest()


def _record(models: PulledModels, request: PullRequest, fetched: _Fetched) -> PulledModel:
    previous = models.get(request.model_name)
    commit = fetched.commit
    if not commit and previous is not None and previous.sha256 == fetched.sha256:
        commit = previous.commit  # offline: the same bytes as before, so the same commit
    model = PulledModel(
        name=request.model_name,
        repo_id=request.repo_id,
        filename=request.filename,
        commit=commit,
        sha256=fetched.sha256,
        size=fetched.path.stat().st_size,
        path=fetched.path.relative_to(models.directory.resolve()).as_posix(),
        pulled_at=int(time.time()),
    )
    models.add(model)
    return model


def _not_found(request: PullRequest, exc: Exception) -> str:
    what = f"{request.repo_id}/{request.filename}" + (f"@{request.revision}" if request.revision else "")
    if isinstance(exc, GatedRepoError):
        return f"{request.repo_id} is gated: accept its terms on the Hub and set HF_TOKEN"
    if isinstance(exc, RepositoryNotFoundError):
        return f"no repository {request.repo_id} (or HF_TOKEN may not read it)"
    if isinstance(exc, RevisionNotFoundError):
        return f"no revision {request.revision} in {request.repo_id}"
    return f"no file {what}"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
