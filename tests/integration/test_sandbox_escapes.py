"""The code interpreter's sandbox, attacked for real (bubblewrap, rlimits, the kernel per session).

Small limits keep the kills quick: 1 CPU second, a 3 s wall clock, 256 MB of address space.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ferryman.sandbox import Sandbox
from ferryman.sandbox_settings import SandboxSettings
from ferryman.server.app import build_services
from ferryman.storage.sql.sqlite import SqliteStore
from ferryman.testing import ScriptedModel
from ferryman.tools.code_interpreter import CodeInterpreter
from inprocess import agent_and_session, migrated_sqlite, serving

pytestmark = pytest.mark.anyio

SESSION = "session-1"
SECRET = "the server's database"


def settings(home: Path, wall_seconds: float = 3) -> SandboxSettings:
    return SandboxSettings(
        dir=str(home / "sandbox"),
        cpu_seconds=1,
        wall_seconds=wall_seconds,
        memory_mb=256,
        max_processes=16,
        output_chars=4000,
    )


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A FERRYMAN_HOME with a database file in it, as a server's."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "ferryman.db").write_text(SECRET)
    monkeypatch.setenv("FERRYMAN_HOME", str(home))
    return home


@pytest.fixture()
async def sandbox(home: Path) -> AsyncIterator[Sandbox]:
    box = Sandbox(settings(home))
    assert box.unavailable is None, box.unavailable
    yield box
    await box.close()


async def result_of(box: Sandbox, code: str) -> str | None:
    outcome = await box.run(SESSION, code)
    assert outcome.execution.killed is None and outcome.execution.error is None, outcome.execution
    return outcome.execution.result


async def test_no_socket_reaches_the_host_or_the_outside(sandbox: Sandbox) -> None:
    with socket.create_connection(("127.0.0.1", 5432), timeout=2):  # the host's PostgreSQL answers out here
        pass
    code = (
        "import socket\n"
        "def attempt(address):\n"
        "    try:\n"
        "        socket.create_connection(address, timeout=2).close()\n"
        "        return 'connected'\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
        "[attempt(('127.0.0.1', 5432)), attempt(('1.1.1.1', 443)), attempt(('8.8.8.8', 53))]"
    )
    result = await result_of(sandbox, code)
    assert result is not None and "connected" not in result
    assert result == "['ConnectionRefusedError', 'OSError', 'OSError']"


async def test_the_host_files_are_not_there(sandbox: Sandbox, home: Path) -> None:
    outcome = await sandbox.run(SESSION, f"open({str(home / 'ferryman.db')!r}).read()")
    assert outcome.execution.error is not None and "FileNotFoundError" in outcome.execution.error
    assert SECRET not in str(outcome)
    listing = await result_of(sandbox, "import os; sorted(os.listdir('/')), sorted(os.listdir('/usr'))")
    assert listing is not None
    top, usr = eval(listing)  # noqa: S307 (a repr the test's own code made)
    assert set(top) <= {"bin", "dev", "lib", "lib64", "proc", "tmp", "usr", "work"}
    assert set(usr) <= {"bin", "lib", "lib64"}
    assert await result_of(sandbox, "import os; os.getuid() != 0 and not os.path.exists('/etc/passwd')") == "True"


async def test_nothing_outside_the_scratch_directory_can_be_written(sandbox: Sandbox, home: Path) -> None:
    code = (
        "def attempt(path):\n"
        "    try:\n"
        "        open(path, 'w').write('x')\n"
        "        return 'written'\n"
        "    except OSError as exc:\n"
        "        return type(exc).__name__\n"
        f"[attempt(p) for p in ('/usr/lib/planted', '/planted', '/proc/planted', {str(home / 'planted')!r})]"
    )
    result = await result_of(sandbox, code)
    assert result is not None and "written" not in result
    assert not (home / "planted").exists()
    assert await result_of(sandbox, "open('/work/mine.txt', 'w').write('ok')") == "2"


async def test_a_fork_bomb_is_contained(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(SESSION, "import os\nwhile True:\n    os.fork()")
    assert outcome.execution.killed or "BlockingIOError" in (outcome.execution.error or ""), outcome.execution
    host = await asyncio.create_subprocess_exec("true")  # the host still forks
    assert await host.wait() == 0
    assert await result_of(sandbox, "6 * 7") == "42"


async def test_four_gigabytes_are_refused_and_said_so(sandbox: Sandbox) -> None:
    outcome = await sandbox.run(SESSION, "block = bytearray(4 * 1024 ** 3)")
    assert outcome.execution.error is not None
    assert outcome.execution.error.endswith("MemoryError\n[sandbox] memory limit of 256 MB reached (sandbox.memory_mb)")


async def test_endless_code_is_killed_at_the_cpu_limit_and_the_state_restarts(home: Path) -> None:
    box = Sandbox(settings(home, wall_seconds=60))  # a loaded CI host may take long for one CPU second
    try:
        await result_of(box, "x = 1")
        spinning = await box.run(SESSION, "while True:\n    pass")
        assert spinning.execution.killed == "killed: CPU time limit of 1 s reached (sandbox.cpu_seconds)"
        after = await box.run(SESSION, "x")
        assert after.restarted and "NameError" in (after.execution.error or "")
    finally:
        await box.close()


async def test_a_sleeping_call_is_killed_at_the_wall_clock_limit(sandbox: Sandbox) -> None:
    await result_of(sandbox, "x = 1")
    sleeping = await sandbox.run(SESSION, "import time\ntime.sleep(60)")
    assert not sleeping.restarted
    assert sleeping.execution.killed == "killed: time limit of 3 s reached (sandbox.wall_seconds)"
    after = await sandbox.run(SESSION, "x")
    assert after.restarted and "NameError" in (after.execution.error or "")


async def test_state_persists_in_a_session_and_not_across_sessions(sandbox: Sandbox) -> None:
    await result_of(sandbox, "x = 1")
    assert await result_of(sandbox, "x + 1") == "2"
    other = await sandbox.run("session-2", "x")
    assert "NameError" in (other.execution.error or "")


async def test_written_files_come_back_and_links_do_not(sandbox: Sandbox, home: Path) -> None:
    code = (
        "import os\n"
        "open('report.csv', 'w').write('a,b\\n1,2\\n')\n"
        "os.makedirs('plots', exist_ok=True)\n"
        "open('plots/p.txt', 'wb').write(b'png')\n"
        f"os.symlink({str(home / 'ferryman.db')!r}, 'leak')\n"
        "os.symlink('/proc/self/environ', 'environ')\n"
        "print('done')"
    )
    outcome = await sandbox.run(SESSION, code)
    assert outcome.execution.stdout == "done\n"
    assert {f.path: f.data for f in outcome.files} == {"plots/p.txt": b"png", "report.csv": b"a,b\n1,2\n"}
    unchanged = await sandbox.run(SESSION, "open('report.csv').read()")
    assert unchanged.files == []


async def test_an_agent_turn_runs_code_and_its_session_delete_removes_the_scratch_directory(home: Path) -> None:
    model = ScriptedModel()
    model.enqueue_tool_call("code_interpreter", {"code": "open('answer.txt', 'w').write('42')\nprint(6 * 7)"})
    model.enqueue_text("It is 42.")
    box = Sandbox(settings(home))
    services = build_services(SqliteStore(migrated_sqlite(home / "turns.db")), [model], sandbox=box)
    async with serving(services) as http:
        agent_id, session_id = await agent_and_session(http)
        body = {"messages": [{"role": "user", "content": "6*7?"}], "toolgroups": ["builtin::code_interpreter"]}
        turn = (await http.post(f"/v1/agents/{agent_id}/session/{session_id}/turn", json=body)).json()
        assert turn["status"] == "completed", turn
        step = next(s for s in turn["steps"] if s["step_type"] == "tool_execution")
        [response] = step["tool_responses"]
        assert "[stdout]\n42" in str(response["content"])
        [stored] = response["metadata"]["files"]
        assert stored["filename"] == "answer.txt" and stored["bytes"] == 2
        assert (await http.get(f"/v1/files/{stored['file_id']}/content")).content == b"42"
        scratch = home / "sandbox" / session_id
        assert (scratch / "answer.txt").is_file()

        assert (await http.delete(f"/v1/agents/{agent_id}/session/{session_id}")).status_code == 200
        assert not scratch.exists()
    model.check()
    assert os.listdir(home / "sandbox") == []


async def test_without_bubblewrap_the_tool_refuses_and_says_why(home: Path) -> None:
    box = Sandbox(settings(home).model_copy(update={"bwrap": str(home / "no-bwrap")}))
    result = await CodeInterpreter(box).invoke({"code": "1 + 1"})
    assert result.error_message is not None
    assert "cannot be run confined" in result.error_message and "no-bwrap" in result.error_message
    assert not (home / "sandbox").exists()


async def test_confinement_off_runs_unconfined_only_when_configured(home: Path) -> None:
    box = Sandbox(settings(home).model_copy(update={"confinement": "off"}))
    try:
        result = await CodeInterpreter(box).invoke({"code": "import os\nos.getcwd()"})
    finally:
        await box.close()
    assert result.content is not None and str(home / "sandbox") in str(result.content)
