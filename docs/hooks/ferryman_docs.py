"""MkDocs hook: the pages generated from the code, so that they cannot drift from it.

At every build (``hooks:`` in ``mkdocs.yml``) it adds to the site, without writing into the source tree:

- ``reference/settings.md``: every setting of :class:`ferryman.config.Settings` and its nested models, with its
  type, constraints, default and description, found by walking ``model_fields``;
- ``openapi.json``: the OpenAPI 3.1 document the server answers ``GET /openapi.json`` with
  (``ferryman.server.app.openapi()``), and ``reference/http-api.md``, its routes by tag;
- ``reference/errors.md``: the error codes of ``ferryman.errors.FAILURES`` with their HTTP status.

A setting's description is the first found of: the field's ``description``, the string right after the
field in its class (an attribute docstring), the class docstring's ``Attributes:`` entry, the clauses of
the class docstring that name the field in double backticks. Settings without any are listed with an
empty description and named in the build log (``--verbose``); they never fail the build.
"""

from __future__ import annotations

import ast
import functools
import inspect
import json
import logging
import re
import textwrap
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import annotated_types
import docstring_parser
import yaml
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

log = logging.getLogger("mkdocs.hooks.ferryman_docs")

SETTINGS_PAGE = "reference/settings.md"
ROUTES_PAGE = "reference/http-api.md"
ERRORS_PAGE = "reference/errors.md"
OPENAPI_FILE = "openapi.json"

_NOTES_FILE = Path(__file__).with_name("settings_notes.yml")
_NOTES: dict[str, str] = {
    str(key): " ".join(str(value).split())
    for key, value in (yaml.safe_load(_NOTES_FILE.read_text("utf-8")) or {}).items()
}
"""Descriptions of settings whose model gives none (the model's own description wins)."""
_USED_NOTES: set[str] = set()

SERVER_SECTION = "server"
"""The file section that the root's own settings (and ``auth``) are read from (``load_settings``)."""


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the generated pages and the OpenAPI document to the site's files."""
    from ferryman.config import Settings
    from ferryman.errors import FAILURES
    from ferryman.server.app import openapi

    document = openapi()

    generated = {
        SETTINGS_PAGE: settings_page(Settings),
        ROUTES_PAGE: routes_page(document),
        ERRORS_PAGE: errors_page(FAILURES),
        OPENAPI_FILE: json.dumps(document, indent=2, ensure_ascii=False) + "\n",
    }
    for path, content in generated.items():
        existing = files.get_file_from_path(path)
        if existing is not None:
            files.remove(existing)
        files.append(File.generated(config, path, content=content))
    return files


# --- the settings reference --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    """A settings model where it sits in the file: ``path`` (``storage``, ``providers[]``, ``quotas.roles.<role>``)."""

    path: str
    model: type[BaseModel]


def settings_page(root: type[BaseModel]) -> str:
    """The markdown page of every setting under ``root``."""
    lines = [
        "# Settings reference",
        "",
        "<!-- Generated at build time by docs/hooks/ferryman_docs.py from ferryman.config.Settings: do not edit. -->",
        "",
        "Every setting of the configuration file (`ferryman serve --config FILE`), generated from the settings",
        "models when this site was built. How the file is read, `${env.NAME:=default}` substitution and the",
        "flags that override it: see [Configuration](../configuration.md). A limit's effect on security:",
        "see [Security](../security.md#limits).",
        "",
        f"The root's own settings and `auth` are read from the `{SERVER_SECTION}:` section (they are accepted",
        "at the top level of the file too); every other section is a top-level key. `name[]` is a list of",
        "such entries, `name.<…>` a mapping whose keys you choose.",
        "",
    ]
    undocumented: list[str] = []
    sections = list(_sections(root))
    lines += ["| Section | What it configures |", "| --- | --- |"]
    for section in sections:
        lines.append(f"| [`{section.path}`](#{_anchor(section.path)}) | {_cell(_summary(section.model))} |")
    lines.append("")
    for section in sections:
        lines += _section_lines(section, undocumented)
    lines += [
        "## Every default, as a file",
        "",
        "What a file holding every default would say (the lists are empty by default; `auth` is off):",
        "",
        "```yaml",
        _defaults_yaml(root).rstrip(),
        "```",
        "",
    ]
    if undocumented:
        log.info("settings without a description: %s", ", ".join(undocumented))
    unused = sorted(set(_NOTES) - _USED_NOTES)
    if unused:
        log.info("notes in %s for settings that do not exist: %s", _NOTES_FILE.name, ", ".join(unused))
    return "\n".join(lines)


def _sections(root: type[BaseModel]) -> Iterator[Section]:
    yield Section(SERVER_SECTION, root)
    seen: set[str] = set()

    def walk(section: Section) -> Iterator[Section]:
        for name, field in section.model.model_fields.items():
            for suffix, nested in _nested_models(field.annotation):
                child = Section(_child_path(section, name, suffix), nested)
                if child.path not in seen:
                    seen.add(child.path)
                    yield child
                    yield from walk(child)

    yield from walk(Section(SERVER_SECTION, root))


def _child_path(section: Section, name: str, suffix: str) -> str:
    """Where a field's nested model sits: the root's sections are top-level keys, but ``auth`` is ``server.auth``."""
    # A mapping's key is named after the field: ``roles`` -> ``<role>``.
    suffix = suffix.replace("<*>", f"<{name.removesuffix('s') or 'key'}>")
    if section.path == SERVER_SECTION and name != "auth":
        return name + suffix
    return f"{section.path}.{name}{suffix}"


def _nested_models(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """The models a field's type holds, each with how its path goes on: ``""``, ``"[]"`` or ``".<key>"``."""
    annotation = _strip_annotated(annotation)
    if _is_model(annotation):
        return [("", annotation)]
    origin, args = get_origin(annotation), get_args(annotation)
    if origin in (Union, types.UnionType):
        return [found for arg in args for found in _nested_models(arg)]
    if origin in (list, tuple, set, frozenset) and args:
        return [("[]" + suffix, model) for suffix, model in _nested_models(args[0])]
    if origin is dict and len(args) == 2:
        return [(".<*>" + suffix, model) for suffix, model in _nested_models(args[1])]
    return []


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _strip_annotated(annotation: Any) -> Any:
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    return annotation


def _section_lines(section: Section, undocumented: list[str]) -> list[str]:
    model = section.model
    lines = [f"## `{section.path}` {{#{_anchor(section.path)}}}", ""]
    intro = _prose(_docstring(model))
    if intro:
        lines += [intro, ""]
    rows = []
    for name, field in model.model_fields.items():
        path = f"{section.path}.{name}"
        description = _description(model, name, field, _NOTES.get(path, ""))
        _USED_NOTES.add(path)
        children = [_child_path(section, name, suffix) for suffix, _ in _nested_models(field.annotation)]
        if children and section.path == SERVER_SECTION and name != "auth":
            continue  # a top-level section: listed in the table of sections
        if children:
            links = ", ".join(f"[`{child}`](#{_anchor(child)})" for child in children)
            description = f"{description.rstrip('.')} (see {links})." if description else f"See {links}."
        elif not description:
            undocumented.append(path)
        rows.append((name, _type_name(field.annotation, field), _default(field), description))
    lines += ["| Setting | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for name, type_name, default, description in rows:
        lines.append(f"| `{name}` | {_cell(type_name)} | {_cell(default)} | {_cell(_markdown(description))} |")
    lines.append("")
    return lines


def _anchor(path: str) -> str:
    return "s-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ").strip()


# --- types, defaults, constraints


_BASIC = {str: "string", int: "integer", float: "number", bool: "boolean", Any: "any", type(None): "null"}


def _type_name(annotation: Any, field: FieldInfo | None = None) -> str:
    name = _type_text(annotation)
    limits = _constraints(field.metadata) if field is not None else []
    return f"{name} ({', '.join(limits)})" if limits else name


def _type_text(annotation: Any) -> str:
    if get_origin(annotation) is Annotated:
        inner, *metadata = get_args(annotation)
        limits = _constraints(metadata)
        text = _type_text(inner)
        return f"{text} ({', '.join(limits)})" if limits else text
    if annotation in _BASIC:
        return _BASIC[annotation]
    if annotation is SecretStr:
        return "secret string"
    if _is_model(annotation):
        return "mapping"
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return " or ".join(f"`{json.dumps(arg)}`" for arg in args)
    if origin in (Union, types.UnionType):
        return " or ".join(_type_text(arg) for arg in args)
    if origin in (list, tuple, set, frozenset):
        return f"list of {_type_text(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping of {_type_text(args[0])} to {_type_text(args[1])}" if args else "mapping"
    return getattr(annotation, "__name__", str(annotation))


def _constraints(metadata: list[Any]) -> list[str]:
    found = []
    for item in metadata:
        if isinstance(item, annotated_types.Gt):
            found.append(f"> {item.gt}")
        elif isinstance(item, annotated_types.Ge):
            found.append(f"≥ {item.ge}")
        elif isinstance(item, annotated_types.Lt):
            found.append(f"< {item.lt}")
        elif isinstance(item, annotated_types.Le):
            found.append(f"≤ {item.le}")
        elif isinstance(item, annotated_types.MinLen):
            found.append(f"at least {item.min_length} long")
        elif isinstance(item, annotated_types.MaxLen):
            found.append(f"at most {item.max_length} long")
    return found


def _default_value(field: FieldInfo) -> Any:
    if field.default_factory is not None:
        return field.default_factory()  # type: ignore[call-arg]
    return field.default


def _default(field: FieldInfo) -> str:
    if field.default is PydanticUndefined and field.default_factory is None:
        return "required"
    value = _default_value(field)
    if isinstance(value, BaseModel):
        return "(a section)"
    if isinstance(value, SecretStr):
        return "(secret)"
    text = f"`{json.dumps(value, ensure_ascii=False, default=str)}`"
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1024 * 1024 and value % 1024 == 0:
        text += f" ({_size(value)})"
    return text


def _size(value: int) -> str:
    for unit, scale in (("GiB", 1024**3), ("MiB", 1024**2), ("KiB", 1024)):
        if value % scale == 0 or value >= scale * 10:
            amount = value / scale
            return f"{amount:g} {unit}"
    return f"{value} bytes"


def _defaults_yaml(root: type[BaseModel]) -> str:
    data = root().model_dump(mode="json")
    server = {
        name: data.pop(name)
        for name in list(data)
        if name == "auth" or not _nested_models(root.model_fields[name].annotation)
    }
    return yaml.safe_dump({SERVER_SECTION: server, **data}, sort_keys=False, allow_unicode=True)


# --- descriptions


def _description(model: type[BaseModel], name: str, field: FieldInfo, note: str) -> str:
    """The code's own description of a field, else the note, else the clauses of a class docstring naming it."""
    if field.description:
        return " ".join(field.description.split())
    classes = _settings_classes(model)
    for cls in classes:
        explicit = _attribute_docstrings(cls).get(name) or _attributes_section(cls).get(name)
        if explicit:
            return explicit
    if note:
        return note
    for cls in classes:
        mentioned = _mentions(_docstring(cls), name)
        if mentioned:
            return mentioned
    return ""


def _settings_classes(model: type[BaseModel]) -> list[type[BaseModel]]:
    return [cls for cls in model.__mro__ if _is_model(cls) and cls is not BaseModel]


def _docstring(cls: type) -> str:
    doc = cls.__dict__.get("__doc__")
    return inspect.cleandoc(doc) if doc else ""


@functools.cache
def _attribute_docstrings(cls: type) -> dict[str, str]:
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    found = {}
    for before, after in zip(body.body, body.body[1:], strict=False):
        if (
            isinstance(before, ast.AnnAssign)
            and isinstance(before.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            found[before.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return found


@functools.cache
def _attributes_section(cls: type) -> dict[str, str]:
    parsed = docstring_parser.parse(_docstring(cls), style=docstring_parser.DocstringStyle.GOOGLE)
    return {
        param.arg_name: " ".join((param.description or "").split())
        for param in parsed.params
        if param.args and param.args[0] == "attribute"
    }


_SECTION_START = re.compile(r"^(Attributes|Args|Arguments|Raises|Returns|Example|Examples|Note|Notes):\s*$", re.M)


def _prose(doc: str) -> str:
    """A docstring's text before its sections, paragraphs joined into lines, in markdown."""
    cut = _SECTION_START.search(doc)
    text = doc[: cut.start()] if cut else doc
    paragraphs = []
    for paragraph in re.split(r"\n\s*\n", text.strip()):
        if paragraph.rstrip().endswith("::") or paragraph.startswith("    "):
            continue  # a literal block: it reads badly without its example
        paragraphs.append(" ".join(paragraph.split()))
    return _markdown("\n\n".join(paragraphs))


def _mentions(doc: str, name: str) -> str:
    """The clauses of ``doc``'s prose that name ``name`` as ````name````."""
    prose = " ".join(_prose_raw(doc).split())
    needle = f"``{name}``"
    clauses = [clause for clause in _clauses(prose) if needle in clause]
    # Prefer the clauses the setting is the subject of ("``db`` is …") over those that only mention it.
    subject = [clause for clause in clauses if clause.startswith(needle)]
    return " … ".join(subject or clauses)


def _prose_raw(doc: str) -> str:
    cut = _SECTION_START.search(doc)
    return doc[: cut.start()] if cut else doc


def _clauses(text: str) -> list[str]:
    """Sentences and ``;`` clauses of ``text``, not cut inside parentheses."""
    clauses, depth, start = [], 0, 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(depth - 1, 0)
        elif depth == 0 and char in ".;" and (i + 1 == len(text) or text[i + 1] == " "):
            if char == "." and text[max(0, i - 3) : i + 1] in ("e.g.", "i.e."):
                continue
            clauses.append(text[start : i + 1].strip())
            start = i + 1
    if text[start:].strip():
        clauses.append(text[start:].strip())
    return [clause.rstrip(";") for clause in clauses if clause]


_ROLE = re.compile(r":(?:mod|class|func|data|meth|attr|obj|exc):`~?\.*([^`]+)`")


def _markdown(text: str) -> str:
    """RST inline markup of a docstring in markdown: ````x```` and ``:class:`~.x.Y``` become code spans."""
    text = _ROLE.sub(lambda match: f"`{match.group(1).split('.')[-1]}`", text)
    return text.replace("``", "`")


def _summary(model: type[BaseModel]) -> str:
    prose = " ".join(_prose_raw(_docstring(model)).split())
    clauses = _clauses(prose)
    return _markdown(clauses[0]) if clauses else ""


# --- the routes of the OpenAPI document ----------------------------------------------------------------------


def routes_page(document: dict[str, Any]) -> str:
    """The markdown page listing the document's routes by tag."""
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            for tag in operation.get("tags") or ["Other"]:
                by_tag.setdefault(tag, []).append((method.upper(), path, operation))
    count = sum(len(operations) for operations in document["paths"].values())
    info = document["info"]
    lines = [
        "# HTTP API routes",
        "",
        "<!-- Generated by docs/hooks/ferryman_docs.py from ferryman.server.app.openapi(): do not edit. -->",
        "",
        f"The OpenAPI {document['openapi']} document of {info['title']} {info['version']}: "
        f"**[openapi.json](../{OPENAPI_FILE})** ({count} operations), the same document a running server answers",
        "`GET /openapi.json` with, and renders at `/docs`. It is generated from the route tables the server routes",
        "and validates with, so it is what the server serves. Below, its routes by tag; the request and answer",
        "schemas are in the document. **SSE**: the route answers with a `text/event-stream` (always, or with",
        "`stream`); **idempotent**: it takes an `Idempotency-Key` header ([Idempotency](../concepts/idempotency.md)).",
        "",
    ]
    lines += ["| Tag | Routes |", "| --- | --- |"]
    for tag, routes in by_tag.items():
        lines.append(f"| [{tag}](#{_anchor('tag ' + tag)}) | {len(routes)} |")
    lines.append("")
    for tag, routes in by_tag.items():
        lines += [
            f"## {tag} {{#{_anchor('tag ' + tag)}}}",
            "",
            "| Method | Path | What it does | |",
            "| --- | --- | --- | --- |",
        ]
        for method, path, operation in routes:
            notes = []
            content = operation.get("responses", {}).get("200", {}).get("content", {})
            if "text/event-stream" in content:
                notes.append("SSE")
            if any(p.get("name") == "Idempotency-Key" for p in operation.get("parameters", [])):
                notes.append("idempotent")
            summary = operation.get("summary") or ""
            lines.append(f"| `{method}` | `{path}` | {_cell(summary)} | {', '.join(notes)} |")
        lines.append("")
    return "\n".join(lines)


# --- the error codes -----------------------------------------------------------------------------------------


def errors_page(failures: Mapping[Any, tuple[type[Exception], int]]) -> str:
    """The markdown page of the error codes, their HTTP status and meaning."""
    lines = [
        "# Error codes",
        "",
        "<!-- Generated at build time by docs/hooks/ferryman_docs.py from ferryman.errors.FAILURES: do not edit. -->",
        "",
        'Every error answer is JSON: `{"error": {"code": …, "message": …, "field": …}, "detail": …}`',
        "(`field` names the part of the request at fault, when one is). The `code` is also what a failed turn or",
        "response is stored with, and a non-streamed call whose turn failed answers with that code's status.",
        "Error answers carry `x-should-retry: false`. One table in the code (`FAILURES` in",
        "`src/ferryman/errors.py`) pairs each code with its exception and status; this page is generated from it.",
        "The Idempotency-Key answers (`idempotency_key_reused`, `idempotency_key_in_use`) are described in",
        "[Idempotency](../concepts/idempotency.md).",
        "",
        "| Code | Status | When |",
        "| --- | --- | --- |",
    ]
    for code, (cls, status) in failures.items():
        lines.append(f"| `{code}` | {status} | {_cell(_markdown(' '.join(_prose_raw(_docstring(cls)).split())))} |")
    lines.append("")
    return "\n".join(lines)
