"""``@client_tool``: the tool definition from hints and docstrings, argument conversion, failures told to the model."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from ferryman.api.content import ToolCall
from ferryman.client import ClientTool, client_tool


class Location(BaseModel):
    """A place on the map."""

    lat: float
    lon: float


def call(tool: ClientTool, arguments: dict[str, object] | str) -> ToolCall:
    """A model's call of ``tool``."""
    return ToolCall(call_id="c1", tool_name=tool.name, arguments=arguments)


@client_tool
def forecast(city: str, days: int = 3) -> dict[str, object]:
    """Forecast of a city.

    Looks the weather up.

    Args:
        city: The city's name.
        days: How many days ahead.
    """
    return {"city": city, "days": days}


@client_tool(name="where_is")
async def locate(place: Location, label: str | None = None) -> Location:
    """Echo a location.

    :param place: Where it is.
    :param label: What to call it.
    """
    await asyncio.sleep(0)
    return place


def test_google_docstring_gives_description_and_parameters() -> None:
    assert forecast.name == "forecast"
    assert forecast.description == "Forecast of a city.\n\nLooks the weather up."
    schema = forecast.input_schema
    assert schema["required"] == ["city"]
    assert schema["properties"]["city"] == {"description": "The city's name.", "title": "City", "type": "string"}
    assert schema["properties"]["days"]["default"] == 3
    assert schema["properties"]["days"]["description"] == "How many days ahead."
    flat = {p.name: (p.parameter_type, p.required, p.default) for p in forecast.tool_def().parameters or []}
    assert flat == {"city": ("string", True, None), "days": ("integer", False, 3)}


def test_sphinx_docstring_and_a_pydantic_parameter() -> None:
    assert locate.name == "where_is"
    assert locate.description == "Echo a location."
    schema = locate.input_schema
    assert schema["properties"]["place"]["description"] == "Where it is."
    assert schema["properties"]["label"]["description"] == "What to call it."
    assert schema["$defs"]["Location"]["required"] == ["lat", "lon"]
    function = locate.function_tool()
    assert (function.name, function.parameters) == ("where_is", schema)


def test_arguments_are_validated_and_converted() -> None:
    assert forecast.arguments('{"city": "Paris", "days": "5"}') == {"city": "Paris", "days": 5}
    assert locate.arguments({"place": {"lat": "1.5", "lon": 2}})["place"] == Location(lat=1.5, lon=2)
    with pytest.raises(ValueError, match="not a JSON object"):
        forecast.arguments("[1]")


def test_sync_and_async_tools_run_from_both_shells() -> None:
    assert forecast.run(call(forecast, {"city": "Oslo"})).content == '{"city": "Oslo", "days": 3}'
    placed = asyncio.run(locate.arun(call(locate, {"place": {"lat": 1, "lon": 2}})))
    assert placed.content == '{"lat":1.0,"lon":2.0}'
    assert locate.run(call(locate, {"place": {"lat": 1, "lon": 2}})).content == '{"lat":1.0,"lon":2.0}'
    assert asyncio.run(forecast.arun(call(forecast, {"city": "Rome"}))).content == '{"city": "Rome", "days": 3}'
    assert forecast(city="Bern") == {"city": "Bern", "days": 3}  # the function itself is unchanged


def test_failures_become_error_results_for_the_model() -> None:
    @client_tool
    def broken(x: int) -> str:
        """Always fails."""
        raise RuntimeError(f"boom {x}")

    failed = broken.run(call(broken, {"x": 1}))
    assert (failed.content, failed.metadata) == ("error: RuntimeError: boom 1", {"error": True})
    invalid = forecast.run(call(forecast, {"days": "soon"}))
    assert isinstance(invalid.content, str) and invalid.content.startswith("error: invalid arguments:")
    assert "city" in invalid.content and invalid.metadata == {"error": True}
    assert broken.run(call(broken, "not json")).metadata == {"error": True}


def test_a_parameter_without_a_hint_is_refused() -> None:
    def untyped(x):  # type: ignore[no-untyped-def]
        return x

    with pytest.raises(TypeError, match="needs a type hint"):
        client_tool(untyped)
