"""The ``websearch:`` config section."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferryman.config import Settings, load_settings
from ferryman.errors import ConfigurationError


def test_the_section_comes_from_the_file_with_the_key_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TAVILY_KEY", "tvly-from-env")
    config = tmp_path / "ferryman.yaml"
    config.write_text(
        "websearch:\n  provider: tavily\n  api_key: ${env.TAVILY_KEY}\n  max_results: 8\n  timeout_seconds: 3\n"
    )
    settings = load_settings(str(config))
    web = settings.websearch
    assert (web.provider, web.max_results, web.timeout_seconds, web.base_url) == ("tavily", 8, 3.0, None)
    assert web.api_key is not None and web.api_key.get_secret_value() == "tvly-from-env"
    assert "tvly-from-env" not in repr(settings)
    # Worker processes get the settings as JSON: the key must survive the trip.
    again = Settings.model_validate_json(settings.model_dump_json()).websearch
    assert again.api_key is not None and again.api_key.get_secret_value() == "tvly-from-env"
    assert load_settings(None).websearch.provider is None


@pytest.mark.parametrize(
    "section",
    ["websearch:\n  provider: searxng\n", "websearch:\n  provider: bing\n", "websearch:\n  max_results: 0\n"],
)
def test_a_bad_section_is_refused(tmp_path: Path, section: str) -> None:
    config = tmp_path / "ferryman.yaml"
    config.write_text(section)
    with pytest.raises(ConfigurationError):
        load_settings(str(config))
