"""``ferryman models pull``: a GGUF from a stand-in Hub, verified, recorded, and served after a restart."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from huggingface_hub import constants
from huggingface_hub.constants import DOWNLOAD_CHUNK_SIZE

from ferryman.cli import serve, serve_model
from ferryman.cli.main import main
from ferryman.config import Settings
from ferryman.errors import NotFoundError, UpstreamError
from ferryman.inference.embedded import DEFAULT_MODEL_ID, default_model_path
from ferryman.inference.hub_pull import PullRequest, pull
from ferryman.inference.pulled import PulledModels
from hub_standin import COMMIT, HubStandIn, hub_standin
from support import ferryman_proc, free_port, running

REPO = "ferryman-tests/tiny-GGUF"
FILE = "tiny-q4_k_m.gguf"
TOKEN = "hf_standin_secret_token"


@pytest.fixture()
def fake_gguf(tmp_path: Path) -> Path:
    """Any bytes: nothing loads this file."""
    path = tmp_path / "served" / FILE
    path.parent.mkdir()
    path.write_bytes(b"GGUF" + bytes(range(256)) * 1024)
    return path


@pytest.fixture()
def hub(fake_gguf: Path) -> Iterator[HubStandIn]:
    with hub_standin(HubStandIn(files={(REPO, FILE): fake_gguf})) as standin:
        yield standin


def _pull(hub: HubStandIn, home: Path) -> tuple[PulledModels, Path]:
    models = PulledModels(home / "models")
    model = pull(PullRequest(REPO, FILE), models, endpoint=hub.url)
    return models, model.file(models.directory)


def _cli(home: Path, hub: HubStandIn, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``ferryman`` in a process of its own: the Hub's settings are read from the environment at import."""
    environ = {
        **os.environ,
        "FERRYMAN_HOME": str(home),
        "HF_HOME": str(home / "hf"),
        "HF_ENDPOINT": hub.url,
        "NO_PROXY": "127.0.0.1,localhost",
        **env,
    }
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_OFFLINE"):
        if name not in env:
            environ.pop(name, None)
    command = [sys.executable, "-m", "ferryman.cli.main", *argv]
    return subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120, check=False)


def test_a_pull_puts_the_file_in_the_models_directory_and_records_it(
    hub: HubStandIn, fake_gguf: Path, tmp_path: Path
) -> None:
    models, path = _pull(hub, tmp_path / "home")
    assert path == (tmp_path / "home" / "models" / REPO / FILE).resolve()
    assert path.read_bytes() == fake_gguf.read_bytes()
    [model] = models.all()
    assert (model.name, model.repo_id, model.filename, model.commit) == ("tiny-q4_k_m", REPO, FILE, COMMIT)
    assert model.sha256 == hashlib.sha256(fake_gguf.read_bytes()).hexdigest()
    assert model.size == fake_gguf.stat().st_size
    manifest = json.loads((tmp_path / "home" / "models" / "models.json").read_text())
    assert [entry["path"] for entry in manifest["models"]] == [f"{REPO}/{FILE}"]


def test_bytes_that_do_not_match_the_hubs_checksum_are_refused(hub: HubStandIn, tmp_path: Path) -> None:
    hub.corrupt = True
    with pytest.raises(UpstreamError, match="does not match the Hub's checksum"):
        _pull(hub, tmp_path / "home")
    assert not (tmp_path / "home" / "models" / REPO / FILE).exists()
    assert PulledModels(tmp_path / "home" / "models").all() == []


def test_a_download_cut_midway_resumes_with_a_range_request(hub: HubStandIn, tmp_path: Path) -> None:
    # huggingface_hub keeps what it received in whole chunks: the cut must come after the first one.
    big = tmp_path / "served" / "big.gguf"
    big.write_bytes(os.urandom(2 * DOWNLOAD_CHUNK_SIZE + 4096))
    hub.files[(REPO, FILE)] = big
    hub.cut_once = True
    _, path = _pull(hub, tmp_path / "home")
    assert path.read_bytes() == big.read_bytes()
    first, second = hub.gets()
    assert "range" not in first.headers
    assert second.headers["range"] == f"bytes={DOWNLOAD_CHUNK_SIZE}-"


def test_a_file_the_hub_lacks_is_not_found(hub: HubStandIn, tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=f"no file {REPO}/missing.gguf at {hub.url} ") as raised:
        pull(PullRequest(REPO, "missing.gguf"), PulledModels(tmp_path / "models"), endpoint=hub.url)
    assert all(setting in raised.value.message for setting in ("HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE"))


def test_a_hub_out_of_reach_is_named_with_the_settings_that_change_it(tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    with pytest.raises(UpstreamError) as raised:
        pull(PullRequest(REPO, FILE), PulledModels(tmp_path / "models"), endpoint=endpoint)
    message = raised.value.message
    assert message.startswith(f"could not pull {REPO}/{FILE} from {endpoint}: ")
    assert all(setting in message for setting in ("HF_ENDPOINT", "HF_TOKEN", "HF_HUB_OFFLINE"))


def test_hf_token_is_sent_as_a_bearer_token(hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hub.token = TOKEN
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(NotFoundError, match=re.escape(f"no repository {REPO} (or HF_TOKEN may not read it)")):
        _pull(hub, tmp_path)
    hub.seen.clear()
    done = _cli(tmp_path, hub, "models", "pull", REPO, FILE, HF_TOKEN=TOKEN)
    assert done.returncode == 0, done.stderr
    assert "serve it as the default model: ferryman serve --model tiny-q4_k_m" in done.stdout
    files = [seen for seen in hub.seen if "/resolve/" in seen.path]
    assert files and all(seen.headers["authorization"] == f"Bearer {TOKEN}" for seen in files)
    assert TOKEN not in done.stdout + done.stderr


def test_offline_mode_finds_a_pulled_file_and_names_what_was_never_pulled(
    hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    never = _cli(tmp_path, hub, "models", "pull", f"hf://{REPO}/{FILE}", HF_HUB_OFFLINE="1")
    assert never.returncode == 2
    assert f"HF_HUB_OFFLINE is set and {REPO}/{FILE} was never pulled" in never.stderr
    _pull(hub, tmp_path)
    hub.seen.clear()
    again = _cli(tmp_path, hub, "models", "pull", f"hf://{REPO}/{FILE}", "--json", HF_HUB_OFFLINE="1")
    assert again.returncode == 0, again.stderr
    assert hub.seen == []
    assert json.loads(again.stdout)["commit"] == COMMIT
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    assert main(["models", "pulled", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [(m["name"], m["repo_id"], m["filename"]) for m in listed] == [("tiny-q4_k_m", REPO, FILE)]


def test_serve_with_an_unknown_model_names_the_pulled_ones(
    hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _pull(hub, tmp_path)
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    assert main(["serve", "--model", "nope", "--db", str(tmp_path / "f.db")]) == 2
    assert "no pulled model 'nope' (pulled: tiny-q4_k_m;" in capsys.readouterr().err


def _chat_models(base: str) -> list[tuple[str, str]]:
    models = httpx.get(f"{base}/v1/models", timeout=30).json()["data"]
    return [(m["identifier"], m["provider_id"]) for m in models if m["model_type"] == "llm"]


def test_a_pulled_model_is_served_after_a_restart_and_by_default_with_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    smollm2 = default_model_path()
    assert smollm2 is not None, "the 'local' extra ships the SmolLM2 GGUF"
    name = "smollm2-pulled.Q4_1"
    served = HubStandIn(files={("ferryman-tests/SmolLM2-GGUF", f"{name}.gguf"): Path(smollm2)})
    with hub_standin(served) as hub:
        pull(PullRequest("ferryman-tests/SmolLM2-GGUF", f"{name}.gguf"), PulledModels(tmp_path / "models"), hub.url)
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))

    proc, base = ferryman_proc(tmp_path, None, tmp_path / "serve.db", "--model", name)
    with running(proc.start()):
        assert _chat_models(base)[0] == (name, "embedded")
        client = openai.OpenAI(base_url=f"{base}/v1", api_key="unused", max_retries=0)
        completion = client.chat.completions.create(
            model=name, messages=[{"role": "user", "content": "Say hello."}], max_tokens=4, temperature=0
        )
        assert completion.choices[0].message.content

    proc, base = ferryman_proc(tmp_path, None, tmp_path / "serve.db")
    with running(proc.start()):
        assert _chat_models(base) == [(DEFAULT_MODEL_ID, "embedded"), (name, f"embedded-{name}")]


@pytest.fixture()
def serve_from_hub(hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Settings]]:
    """``ferryman serve`` in this process, its Hub the stand-in (as HF_ENDPOINT sets it); nothing is started.

    Yields the settings each successful run would have served.
    """
    monkeypatch.setenv("FERRYMAN_HOME", str(tmp_path))
    # What HF_ENDPOINT sets when huggingface_hub is imported.
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", hub.url + "/{repo_id}/resolve/{revision}/{filename}")
    for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    served: list[Settings] = []
    monkeypatch.setattr(serve, "services_from_settings", served.append)
    monkeypatch.setattr(serve, "create_app", lambda services, **_: services)
    monkeypatch.setattr(serve.uvicorn, "run", lambda app, **options: None)
    monkeypatch.setattr(serve, "migrate_apart", lambda db: None)  # no database is opened: uvicorn.run is replaced
    monkeypatch.setattr(serve, "pick_runtime", lambda runtime: "xllamacpp")
    monkeypatch.setattr(serve_model, "interactive", lambda: False)
    yield served


def _serve(tmp_path: Path, *argv: str) -> int:
    return main(["serve", "--port", str(free_port()), "--db", str(tmp_path / "serve.db"), *argv])


def test_serve_pulls_a_missing_hub_model_with_pull_and_serves_it(
    serve_from_hub: list[Settings], hub: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _serve(tmp_path, "--model", f"{REPO}/{FILE}", "--pull") == 0
    [settings] = serve_from_hub
    default = settings.providers[0]
    assert (default.provider_id, default.model_id) == ("embedded", "tiny-q4_k_m")
    assert Path(default.model_path or "") == (tmp_path / "models" / REPO / FILE).resolve()
    shown = capsys.readouterr().err
    assert f"pulling {REPO}/{FILE} from {hub.url}" in shown and "pulled tiny-q4_k_m into " in shown

    hub.seen.clear()  # pulled now: served again without asking the Hub
    assert _serve(tmp_path, "--model", f"hf://{REPO}/{FILE}") == 0
    assert serve_from_hub[1].providers[0].model_id == "tiny-q4_k_m" and hub.seen == []


def test_serve_without_a_terminal_or_pull_says_to_pass_pull(
    serve_from_hub: list[Settings], hub: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _serve(tmp_path, "--model", f"{REPO}/{FILE}") == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.startswith(f"ferryman: {REPO}/{FILE} is not pulled: pass --pull to download it from {hub.url}")
    assert hub.seen == [] and serve_from_hub == [] and PulledModels(tmp_path / "models").all() == []


def test_serve_on_a_terminal_asks_before_pulling(
    serve_from_hub: list[Settings],
    hub: HubStandIn,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(serve_model, "interactive", lambda: True)
    monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
    assert _serve(tmp_path, "--model", f"{REPO}/{FILE}") == 2
    asked = capsys.readouterr().err
    assert f"{REPO}/{FILE} is not pulled: download it from {hub.url} into " in asked and "[Y/n]" in asked
    assert asked.splitlines()[-1].endswith(f"ferryman: not pulling {REPO}/{FILE}: nothing was started")
    assert hub.seen == [] and serve_from_hub == []

    monkeypatch.setattr("sys.stdin", io.StringIO("\n"))  # Enter: yes
    assert _serve(tmp_path, "--model", f"{REPO}/{FILE}") == 0
    assert [model.name for model in PulledModels(tmp_path / "models").all()] == ["tiny-q4_k_m"]


def test_a_failed_pull_names_the_hub_it_tried(
    serve_from_hub: list[Settings], hub: HubStandIn, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _serve(tmp_path, "--model", f"{REPO}/missing.gguf", "--pull") == 2
    line = capsys.readouterr().err.splitlines()[-1]
    assert line.startswith(f"ferryman: no file {REPO}/missing.gguf at {hub.url} (HF_ENDPOINT ")
    assert serve_from_hub == []
