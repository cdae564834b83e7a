"""``ferryman models|files|vector-stores`` against a running server, human and ``--json``."""

from __future__ import annotations

from pathlib import Path

import pytest
from cli_support import cli

from ferryman.inference.local_embeddings import local_embeddings_available

needs_embeddings = pytest.mark.skipif(not local_embeddings_available(), reason="all-MiniLM-L6-v2 is not installed")

RIVER = "Ferrymen carry passengers across rivers.\n\nThe toll is paid in silver coins before the crossing."
STARS = "Sailors steer by the stars at night.\n\nThe pole star stays still while the others turn."


def test_models_are_listed_registered_and_unregistered(
    capsys: pytest.CaptureFixture[str], served_base_url: str
) -> None:
    base = served_base_url
    models = cli(capsys, base, "models", "list", "--json").json()
    provider = next(m["provider_id"] for m in models if m["identifier"] == "scripted-model")

    registered = cli(
        capsys, base, "models", "register", "cli-alias", "--provider-id", provider,
        "--provider-model-id", "scripted-model", "--metadata", '{"purpose": "tests"}', "--json",
    ).json()  # fmt: skip
    assert (registered["identifier"], registered["provider_resource_id"]) == ("cli-alias", "scripted-model")
    assert registered["metadata"] == {"purpose": "tests"}
    table = cli(capsys, base, "models", "list")
    assert table.code == 0 and "cli-alias" in table.out and "scripted-model" in table.out

    assert cli(capsys, base, "models", "unregister", "cli-alias", "--json").json() == {
        "identifier": "cli-alias",
        "deleted": True,
    }
    assert "cli-alias" not in [m["identifier"] for m in cli(capsys, base, "models", "list", "--json").json()]
    again = cli(capsys, base, "models", "unregister", "cli-alias")
    assert again.code == 1 and again.err.startswith("error: not_found: ")
    bad = cli(capsys, base, "models", "register", "x", "--metadata", "{not json")
    assert bad.code == 1 and bad.err.startswith("error: ") and bad.err.count("\n") == 1


def test_files_are_uploaded_with_progress_and_listed(
    capsys: pytest.CaptureFixture[str], served_base_url: str, tmp_path: Path
) -> None:
    base = served_base_url
    river, stars = tmp_path / "river.txt", tmp_path / "stars.md"
    river.write_text(RIVER)
    stars.write_text(STARS)
    uploaded = cli(capsys, base, "files", "upload", str(river), str(stars), "--json").json()
    assert [(f["filename"], f["bytes"]) for f in uploaded] == [("river.txt", len(RIVER)), ("stars.md", len(STARS))]
    listed = cli(capsys, base, "files", "list", "--json").json()
    assert {f["id"] for f in uploaded} <= {f["id"] for f in listed}

    human = cli(capsys, base, "files", "upload", str(river))
    assert human.code == 0 and "river.txt" in human.out
    table = cli(capsys, base, "files", "list")
    assert table.code == 0 and uploaded[0]["id"] in table.out

    missing = cli(capsys, base, "files", "upload", str(tmp_path / "nope.txt"))
    assert missing.code == 1 and missing.err.startswith("error: ") and "nope.txt" in missing.err


@needs_embeddings
def test_vector_stores_are_created_fed_with_files_and_searched(
    capsys: pytest.CaptureFixture[str], served_base_url: str, tmp_path: Path
) -> None:
    base = served_base_url
    river, stars = tmp_path / "river.txt", tmp_path / "stars.txt"
    river.write_text(RIVER)
    stars.write_text(STARS)
    [uploaded] = cli(capsys, base, "files", "upload", str(river), "--json").json()

    store = cli(capsys, base, "vector-stores", "create", "crossings", "--json").json()
    assert store["name"] == "crossings" and store["file_counts"]["total"] == 0
    # a file id and a local path (uploaded first), ids by a unique prefix; ``add`` waits for the ingestion to finish
    store_prefix, file_prefix = store["id"][:12], uploaded["id"][:14]
    added = cli(capsys, base, "vector-stores", "add", store_prefix, file_prefix, str(stars), "--json").json()
    assert added["id"] == store["id"]
    assert added["file_counts"]["completed"] == 2 and added["status"] == "completed"

    found = cli(capsys, base, "vector-stores", "search", store["id"], "how is the toll paid?", "--json").json()
    assert found["data"] and "silver coins" in found["data"][0]["content"][0]["text"]
    assert found["data"][0]["filename"] == "river.txt"
    human = cli(capsys, base, "vector-stores", "search", store_prefix, "pole star", "--max-results", "1")
    assert human.code == 0 and "stars.txt" in human.out and "pole star" in human.out

    listed = cli(capsys, base, "vector-stores", "list", "--json").json()
    assert store["id"] in [s["id"] for s in listed]
    unknown = cli(capsys, base, "vector-stores", "search", "vs_missing", "anything")
    assert unknown.code == 1 and unknown.err.startswith("error: not_found: ")
