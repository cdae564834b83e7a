"""Running untrusted Python: bubblewrap-confined kernels with rlimits, one per session."""

from .confinement import ConfinementUnavailable
from .kernel import Execution
from .manager import ProducedFile, RunOutcome, Sandbox, SandboxUnavailable

__all__ = [
    "ConfinementUnavailable",
    "Execution",
    "ProducedFile",
    "RunOutcome",
    "Sandbox",
    "SandboxUnavailable",
]
