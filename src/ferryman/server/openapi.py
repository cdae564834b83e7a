"""The OpenAPI 3.1 document, generated from the route tables, and the ``/docs`` page that renders it.

Schemas come from the same pydantic types the routes validate with (``validation`` mode)
and answer with (``serialization`` mode), in one pass so that a shared model is one
component. The page's scripts and styles are Swagger UI's, served from the
``swagger-ui-bundle-v2`` package: the page works offline.
"""

from __future__ import annotations

import html
import json
from collections.abc import Sequence
from http import HTTPStatus
from importlib import metadata
from typing import Any

from pydantic import TypeAdapter
from pydantic.json_schema import JsonSchemaMode
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from swagger_ui_bundle import swagger_ui_path

from ferryman.api.errors import ErrorResponse
from ferryman.api.limits import Id

from .contract import IDEMPOTENCY_KEY, PATH_PARAMS, Endpoint, EventStream, Param

REF_TEMPLATE = "#/components/schemas/{model}"
Mounts = Sequence[tuple[str, Sequence[Endpoint]]]
_Key = tuple[int, JsonSchemaMode]


class _Schemas:
    """Every body type of the tables, turned into JSON schemas in one pass."""

    def __init__(self, mounts: Mounts) -> None:
        inputs: dict[_Key, TypeAdapter[Any]] = {(id(ErrorResponse), "serialization"): TypeAdapter(ErrorResponse)}
        for _, table in mounts:
            for entry in table:
                uses: list[tuple[Any, JsonSchemaMode]] = [(entry.body, "validation"), (entry.response, "serialization")]
                uses += [(data, "serialization") for data in (entry.stream.data if entry.stream else ())]
                for kind, mode in uses:
                    if kind is not None and (id(kind), mode) not in inputs:
                        inputs[(id(kind), mode)] = TypeAdapter(kind)
        refs, defs = TypeAdapter.json_schemas(
            [(key, key[1], adapter) for key, adapter in inputs.items()], ref_template=REF_TEMPLATE
        )
        self._refs = {key: schema for (key, _), schema in refs.items()}
        self.components: dict[str, Any] = defs.get("$defs", {})
        _require_tags(self.components, self.components)

    def of(self, kind: Any, mode: JsonSchemaMode) -> dict[str, Any]:
        """The schema (usually a ``$ref``) of one type."""
        return self._refs[(id(kind), mode)]


def _require_tags(node: Any, components: dict[str, Any]) -> None:
    """Mark the tag of every member of a tagged union required, as the server's validation has it.

    pydantic gives a tag field its default, so its schema lists it as optional; but a
    union member is only chosen by its tag, and a body without one is refused.
    """
    if isinstance(node, list):
        for child in node:
            _require_tags(child, components)
    elif isinstance(node, dict):
        discriminator = node.get("discriminator")
        if isinstance(discriminator, dict):
            tag = discriminator["propertyName"]
            for ref in discriminator.get("mapping", {}).values():
                member = components[ref.removeprefix(REF_TEMPLATE.format(model=""))]
                if tag not in member.setdefault("required", []):
                    member["required"].append(tag)
        for child in node.values():
            _require_tags(child, components)


def _parameter(param: Param, location: str) -> dict[str, Any]:
    schema = TypeAdapter(param.annotation).json_schema()
    spec: dict[str, Any] = {"name": param.name, "in": location, "required": param.required, "schema": schema}
    if param.description:
        spec["description"] = param.description
    if location == "query" and schema.get("type") == "array":
        spec["explode"] = True
    if param.own:
        spec["x-ferryman-extension"] = True
    return spec


_ID_SCHEMA = {**TypeAdapter(Id).json_schema(), "minLength": 1}


def _path_parameter(name: str) -> dict[str, Any]:
    return {"name": name, "in": "path", "required": True, "description": PATH_PARAMS[name], "schema": dict(_ID_SCHEMA)}


def _event_schema(stream: EventStream, schemas: _Schemas) -> dict[str, Any]:
    """One server-sent event (as schemathesis and OpenAPI 3.2's ``itemSchema`` read it): its JSON ``data``."""
    data: dict[str, Any] = {"type": "string"}
    if stream.data:
        data["contentMediaType"] = "application/json"
        data["contentSchema"] = {"anyOf": [schemas.of(kind, "serialization") for kind in stream.data]}
    return {
        "type": "object",
        "description": "One server-sent event.",
        "required": ["data"],
        "properties": {"id": {"type": "string"}, "event": {"type": "string"}, "data": data},
    }


def _success(entry: Endpoint, schemas: _Schemas) -> dict[str, Any]:
    content: dict[str, Any] = {}
    if entry.response is not None:
        content["application/json"] = {"schema": schemas.of(entry.response, "serialization")}
    if entry.stream is not None:
        content["text/event-stream"] = {"schema": _event_schema(entry.stream, schemas)}
    if not content:
        return {"description": "Done; the body is empty."}
    if entry.stream is None or entry.stream.only:
        return {"description": "OK", "content": content}
    return {"description": "The JSON object, or with `stream` an event stream.", "content": content}


def _operation(prefix: str, entry: Endpoint, schemas: _Schemas) -> dict[str, Any]:
    parameters = [_path_parameter(name) for name in entry.path_params()]
    parameters += [_parameter(param, "query") for param in entry.query]
    headers = (*entry.headers, IDEMPOTENCY_KEY) if entry.creates else entry.headers
    parameters += [_parameter(param, "header") for param in headers]
    error = {"application/json": {"schema": schemas.of(ErrorResponse, "serialization")}}
    responses: dict[str, Any] = {str(entry.status): _success(entry, schemas)}
    errors = set(entry.errors)
    if parameters:  # a parameter that is no id a store can hold (see contract.check_parameters)
        errors.add(400)
    if entry.body is not None:  # a body over its limit, refused while it arrives
        errors.add(413)
    if entry.creates:  # with an Idempotency-Key: 409 while the first call runs, 422 when it came with another body
        errors |= {409, 422}
    for status in sorted(errors):
        responses[str(status)] = {"description": HTTPStatus(status).phrase, "content": error}
    operation: dict[str, Any] = {
        "operationId": f"{prefix.strip('/')}_{entry.handler.__name__}",
        "summary": entry.summary,
        "tags": [entry.tag],
        "responses": responses,
    }
    if entry.handler.__doc__:
        operation["description"] = entry.handler.__doc__.strip()
    if entry.own:
        operation["x-ferryman-extension"] = True
    if parameters:
        operation["parameters"] = parameters
    if entry.body is not None:
        body: dict[str, Any] = {entry.body_media_type: {"schema": schemas.of(entry.body, "validation")}}
        if entry.example is not None:
            body[entry.body_media_type]["example"] = entry.example
        operation["requestBody"] = {"required": True, "content": body}
    return operation


def openapi_document(mounts: Mounts) -> dict[str, Any]:
    """The OpenAPI 3.1 document of the endpoints of every mount (prefix, table)."""
    schemas = _Schemas(mounts)
    paths: dict[str, dict[str, Any]] = {}
    for prefix, table in mounts:
        for entry in table:
            paths.setdefault(prefix + entry.openapi_path(), {})[entry.method.lower()] = _operation(
                prefix, entry, schemas
            )
    package = metadata.metadata("ferryman")
    info = {"title": package["Name"], "version": package["Version"], "summary": package["Summary"]}
    return {"openapi": "3.1.0", "info": info, "paths": paths, "components": {"schemas": schemas.components}}


async def openapi_json(request: Request) -> Response:
    """The OpenAPI document (``app.state.openapi()``, which ``create_app`` sets: it builds it once, when first
    called)."""
    return JSONResponse(request.app.state.openapi())


_ASSETS = "/docs/assets"


async def docs(request: Request) -> Response:
    """A page that renders the document with Swagger UI, from assets this server serves."""
    root = request.scope.get("root_path", "")
    title = html.escape(request.app.state.openapi()["info"]["title"])
    # validatorUrl None: Swagger UI would otherwise send the document's URL to an outside validator (for any
    # host but localhost) and show its badge; the document is checked by the tests instead.
    settings = {"url": f"{root}/openapi.json", "dom_id": "#swagger-ui", "deepLinking": True, "validatorUrl": None}
    config = json.dumps(settings)
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{title} API</title>
<link rel="stylesheet" href="{root}{_ASSETS}/swagger-ui.css">
<link rel="icon" type="image/png" href="{root}{_ASSETS}/favicon-32x32.png">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{root}{_ASSETS}/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({config});</script>
</body>
</html>
"""
    return HTMLResponse(page)


def docs_routes() -> list[BaseRoute]:
    """``/openapi.json``, ``/docs`` and the page's assets."""
    return [
        Route("/openapi.json", openapi_json, methods=["GET"]),
        Route("/docs", docs, methods=["GET"]),
        Mount(_ASSETS, app=StaticFiles(directory=str(swagger_ui_path)), name="docs-assets"),
    ]
