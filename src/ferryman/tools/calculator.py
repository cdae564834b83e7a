"""``builtin::math``: exact arithmetic evaluated safely, without ``eval``."""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Any

from ferryman.api.content import ToolParameter
from ferryman.api.registry import Tool, ToolInvocationResult

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "sqrt": math.sqrt,
    "abs": abs,
    "round": round,
    "min": min,
    "max": max,
    "log": math.log,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
}
_CONSTANTS = {"pi": math.pi, "e": math.e}
_MAX_EXPONENT = 10_000
_MAX_LENGTH = 500


class CalculatorError(Exception):
    """The expression is not plain arithmetic, or too large to compute."""


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression.

    Raises:
        CalculatorError: for anything but numbers, operators, known functions and constants.
    """
    if len(expression) > _MAX_LENGTH:
        raise CalculatorError(f"expression longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as exc:
        raise CalculatorError(f"not an arithmetic expression: {exc.msg}") from exc
    value: int | float = _eval(tree.body)
    return value


def _eval(node: ast.expr) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
            raise CalculatorError("exponent too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _FUNCTIONS[node.func.id](*(_eval(arg) for arg in node.args))
    raise CalculatorError(f"unsupported element: {ast.unparse(node)}")


_DEFINITION = Tool(
    identifier="calculator",
    toolgroup_id="builtin::math",
    description="Evaluate an arithmetic expression exactly, e.g. '(17 * 23) + sqrt(16)'.",
    parameters=[
        ToolParameter(
            name="expression",
            parameter_type="string",
            description=(
                "Arithmetic with + - * / // % ** and sqrt, log, exp, sin, cos, tan, abs, round, min, max, pi, e"
            ),
            required=True,
        )
    ],
)


class Calculator:
    """The ``calculator`` tool of the ``builtin::math`` toolgroup."""

    @property
    def definition(self) -> Tool:
        """The tool's listing."""
        return _DEFINITION

    async def invoke(self, arguments: dict[str, Any]) -> ToolInvocationResult:
        """Evaluate ``arguments['expression']``."""
        expression = arguments.get("expression")
        if not isinstance(expression, str):
            return ToolInvocationResult(error_message="missing string argument 'expression'", error_code=400)
        try:
            value = evaluate(expression)
        except (CalculatorError, ArithmeticError, ValueError, TypeError) as exc:
            return ToolInvocationResult(error_message=f"cannot evaluate {expression!r}: {exc}", error_code=400)
        return ToolInvocationResult(content=str(value))
