"""The builtin calculator evaluates arithmetic and nothing else."""

from __future__ import annotations

import pytest

from ferryman.tools.calculator import Calculator, CalculatorError, evaluate


@pytest.mark.parametrize(
    ("expression", "value"),
    [("6 * 7", 42), ("2 ** 10", 1024), ("(1 + 2) / 4", 0.75), ("sqrt(16) + abs(-1)", 5.0), ("-3 // 2", -2)],
)
def test_evaluates_arithmetic(expression: str, value: float) -> None:
    assert evaluate(expression) == value


@pytest.mark.parametrize("expression", ["__import__('os')", "x + 1", "(1).real", "[1, 2]", "2 ** 100000", "1 +"])
def test_rejects_anything_else(expression: str) -> None:
    with pytest.raises(CalculatorError):
        evaluate(expression)


@pytest.mark.anyio
async def test_tool_reports_errors_in_its_result() -> None:
    result = await Calculator().invoke({"expression": "1 / 0"})
    assert result.content is None and result.error_message and "division by zero" in result.error_message
    missing = await Calculator().invoke({})
    assert missing.error_message == "missing string argument 'expression'"
