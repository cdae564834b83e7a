"""The system calls the sandboxed code may not make: a seccomp program that bubblewrap loads (``--seccomp FD``).

Above all, the code must not create a user namespace: in one of its own it holds
every capability over its own mounts, and a tmpfs it mounts there is host memory
outside every limit. Unprivileged, bubblewrap's ``--disable-userns`` sees to
that; run by root, bubblewrap makes no user namespace for the sandbox (the code
runs as a uid of the host), so that option does not apply and this filter is
what refuses it. It is loaded either way, one rule set for both.

``clone3`` passes its flags in memory that a filter cannot read, so it fails
with ``ENOSYS`` and the C library falls back to ``clone``, whose flags it can.
The mount calls are refused as well, though without a user namespace the code
lacks the capability they need; so are anonymous files (``memfd_create``) and
System V shared memory, memory that ``RLIMIT_AS`` does not count (a memfd
written to and never mapped, a segment detached and left).

The kernel's keyrings are refused too: they outlive every process, kept per
uid (a root server's kernels are host uids, reused from session to session) or
in the session keyring every kernel inherits from the server, so a key one
session's code added would be read by another's. And ``io_uring``, whose
operations no seccomp filter sees, and which sandboxed Python has no use for.

The program is compiled by libseccomp (through ``pyseccomp``), which also
refuses the calls of the architecture's other ABIs (i386, x32) that the rules
do not list.
"""

from __future__ import annotations

import errno
import functools
import os
import platform

_CLONE_NEWUSER = 0x10000000
_MOUNT_CALLS = (
    "mount",
    "umount2",
    "pivot_root",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "mount_setattr",
)
_UNCOUNTED_MEMORY_CALLS = ("memfd_create", "memfd_secret", "shmget")
_SHARED_STATE_CALLS = ("add_key", "request_key", "keyctl")
_UNSEEN_IO_CALLS = ("io_uring_setup", "io_uring_enter", "io_uring_register")


class FilterUnavailable(Exception):
    """libseccomp is missing, or could not compile the program."""


@functools.cache
def program() -> bytes:
    """The compiled BPF program (made once per process).

    Raises:
        FilterUnavailable: libseccomp is not installed, or refused a rule.
    """
    try:
        import pyseccomp as seccomp
    # RuntimeError: libseccomp.so.2 is not found; OSError: what was found does not load.
    except (ImportError, RuntimeError, OSError) as exc:
        raise FilterUnavailable(f"libseccomp is not available ({exc}; Debian: apt-get install libseccomp2)") from exc
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
        refuse = seccomp.ERRNO(errno.EPERM)
        clone_flags = 1 if platform.machine().startswith("s390") else 0  # s390's clone takes its flags second
        for name, flags in (("clone", clone_flags), ("unshare", 0)):
            rules.add_rule(refuse, name, seccomp.Arg(flags, seccomp.MASKED_EQ, _CLONE_NEWUSER, _CLONE_NEWUSER))
        rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        for name in (*_MOUNT_CALLS, *_UNCOUNTED_MEMORY_CALLS, *_SHARED_STATE_CALLS, *_UNSEEN_IO_CALLS):
            if seccomp.resolve_syscall(seccomp.Arch.NATIVE, name) >= 0:  # an older libseccomp lacks the newest
                rules.add_rule(refuse, name)
        with os.fdopen(os.memfd_create("ferryman-seccomp", os.MFD_CLOEXEC), "w+b") as compiled:
            rules.export_bpf(compiled)
            compiled.seek(0)
            return compiled.read()
    except OSError as exc:
        raise FilterUnavailable(f"libseccomp could not compile the sandbox's system call filter: {exc}") from exc


def program_fd() -> int:
    """A new descriptor to read the program from, at its start (bubblewrap reads it to its end)."""
    fd = os.memfd_create("ferryman-seccomp", os.MFD_CLOEXEC)
    try:
        os.write(fd, program())
        os.lseek(fd, 0, os.SEEK_SET)
    except BaseException:
        os.close(fd)
        raise
    return fd
