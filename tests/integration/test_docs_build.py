"""The documentation's generated pages keep up with the code: every setting, every route, every error code.

The site itself is built by ``mkdocs build --strict`` (``.ci/run``); these tests run the build hook's page
generators directly, without MkDocs' full build, so that a setting added without a place in the settings
reference fails here, with its name.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ferryman.config import Settings
from ferryman.errors import FAILURES

pytest.importorskip("mkdocs", reason="the docs tools come with the dev extra")

HOOK = Path(__file__).parents[2] / "docs" / "hooks" / "ferryman_docs.py"


@pytest.fixture(scope="module")
def hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ferryman_docs_hook", HOOK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _settings_rows(page: str) -> dict[str, set[str]]:
    """Section path -> the setting names of its table."""
    rows: dict[str, set[str]] = {}
    section = None
    for line in page.splitlines():
        heading = re.match(r"## `([^`]+)` \{#", line)
        if heading:
            section = heading.group(1)
            rows[section] = set()
        elif section is not None and (cell := re.match(r"\| `([^`]+)` \|", line)):
            rows[section].add(cell.group(1))
    return rows


def test_every_setting_has_a_row_with_its_default(hook: ModuleType) -> None:
    page = hook.settings_page(Settings)
    rows = _settings_rows(page)
    sections = {section.path: section.model for section in hook._sections(Settings)}
    assert set(sections) == set(rows)
    for path, model in sections.items():
        for name, field in model.model_fields.items():
            is_section = bool(hook._nested_models(field.annotation))
            if path == hook.SERVER_SECTION and is_section and name != "auth":
                assert f"[`{name}" in page, f"section {name} is not listed"
            else:
                assert name in rows[path], f"{path}.{name} has no row"
    assert "| `max_bytes` | integer (> 0) | `536870912` (512 MiB) |" in page  # files.max_bytes, with its unit
    assert "\n  turn_lease_seconds: 30.0\n" in page  # the file of every default


def test_every_route_of_the_openapi_document_is_listed(hook: ModuleType) -> None:
    from ferryman.server.app import openapi

    document = openapi()

    page = hook.routes_page(document)
    for path, operations in document["paths"].items():
        for method in operations:
            assert f"| `{method.upper()}` | `{path}` |" in page


def test_every_error_code_is_listed_with_its_status(hook: ModuleType) -> None:
    page = hook.errors_page(FAILURES)
    for code, (_, status) in FAILURES.items():
        assert f"| `{code}` | {status} |" in page


def test_sphinx_roles_read_as_code() -> None:
    spec = importlib.util.spec_from_file_location("griffe_rst_roles", HOOK.with_name("griffe_rst_roles.py"))
    assert spec is not None and spec.loader is not None
    pytest.importorskip("griffe")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "See :class:`~ferryman.client.Agent` and :meth:`Agent.create_turn`, :mod:`.scratch`."
    assert module.plain_roles(text) == "See `Agent` and `Agent.create_turn`, `scratch`."
