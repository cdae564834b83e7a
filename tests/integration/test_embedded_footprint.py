"""The embedded model costs the server its own size and a bounded rest, which conversations do not grow.

The shipped model runs in its own process on xllamacpp, as ``ferryman serve`` runs it: one long
conversation, then others taking the slot in turn. The process's resident memory is read before
the runtime is imported, after the first answer and after the last. llama.cpp's server defaults
once held 283 MiB after one answer in a server that held 98 MiB idle, and kept a copy of every
conversation that left the slot (up to 8 GiB): 350 MiB after a few of them and a 1,580-token prompt.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from embedded_support import shipped_model

MIB = 1 << 20
RUNTIME_BEYOND_THE_MODEL = 100 * MIB
"""What the runtime may hold besides the model's file (issue #23). Measured 91-93 MiB with SmolLM2-135M
(1 to 16 threads): its 2048-token KV cache (45), llama.cpp's heap (23, the vocabulary's most), xllamacpp's
code (12). A 512-token batch, llama.cpp's default, measured 103."""
GROWTH_ACROSS_CONVERSATIONS = 8 * MIB
"""Measured 0.1 MiB; llama.cpp's host-memory prompt cache kept the long conversation (20 MiB) once it left the slot."""

_PROBE = """
import ctypes, json, sys

from ferryman.inference.xllamacpp_source import XllamacppSource

# Pages as the runtime touches them: where the kernel backs memory with huge pages on its own
# (transparent_hugepage=always), a page touched would count 2 MiB.
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)  # PR_SET_THP_DISABLE


def resident():
    fields = dict(line.split(":", 1) for line in open("/proc/self/status"))
    return {name: int(fields[name].split()[0]) * 1024 for name in ("VmRSS", "VmHWM", "RssAnon", "RssFile")}


def answer(source, messages):
    list(source.stream({"messages": messages, "max_tokens": 8, "temperature": 0}))


before = resident()
source = XllamacppSource(sys.argv[1])
source.load()
# Over 600 tokens: a prompt longer than one batch of llama.cpp's default (512) fills its buffers.
facts = " ".join(f"Ferry {n} leaves the harbour at {n % 12 + 1} o'clock." for n in range(60))
answer(source, [{"role": "user", "content": facts + " Which ferry leaves at noon?"}])
first = resident()
for topic in ("the tide", "the harbour", "the island"):
    answer(source, [{"role": "user", "content": f"Say one thing about {topic}."}])
print(json.dumps({"before": before, "first": first, "last": resident()}))
source.close()
"""


@pytest.fixture(scope="module")
def footprint() -> dict[str, dict[str, int]]:
    """Resident memory of a process serving the shipped model: before the runtime, after one answer, at the end."""
    if sys.platform != "linux":
        pytest.skip("resident memory is read from /proc")
    model = shipped_model("xllamacpp")
    done = subprocess.run([sys.executable, "-c", _PROBE, model], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    measured: dict[str, dict[str, int]] = json.loads(done.stdout.splitlines()[-1])
    measured["model"] = {"size": Path(model).stat().st_size}
    return measured


def test_the_runtime_holds_the_model_and_at_most_100_mib_more(footprint: dict[str, dict[str, int]]) -> None:
    added = footprint["first"]["VmHWM"] - footprint["before"]["VmRSS"]
    assert added <= footprint["model"]["size"] + RUNTIME_BEYOND_THE_MODEL, footprint


def test_conversations_taking_the_slot_in_turn_do_not_grow_it(footprint: dict[str, dict[str, int]]) -> None:
    growth = footprint["last"]["VmRSS"] - footprint["first"]["VmRSS"]
    assert growth <= GROWTH_ACROSS_CONVERSATIONS, footprint
