"""What /proc says about this machine's processes, read so that a process which ends while
it is being read counts as ended.

Linux answers a read of /proc/PID/stat with ENOENT once the process is reaped, and with
ESRCH when it goes between the file's open and its read: every reader here must take both
as "gone" (a full run failed on the second when only the first was caught).
"""

from __future__ import annotations

import os
from pathlib import Path

GONE = (FileNotFoundError, ProcessLookupError)


def stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (its state first), or None once
    the process has been reaped. The name is cut off at its last ")" since it may hold
    spaces and parentheses of its own."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except GONE:
        return None
    return text.rsplit(")", 1)[1].split()


def command_lines() -> dict[int, bytes]:
    """The command line of every process on the machine (its arguments, each ended by a
    NUL), but those that ended while /proc was read."""
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                found[int(name)] = Path(f"/proc/{name}/cmdline").read_bytes()
            except GONE:
                continue
    return found


def processes_in(folder: Path) -> list[int]:
    """The processes whose working folder is `folder`."""
    real = os.path.realpath(folder)
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if os.readlink(f"/proc/{name}/cwd") == real:
                    found.append(int(name))
            except (*GONE, PermissionError):  # (PermissionError: another user's process)
                continue
    return found


def alive(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    fields = stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def group_members(pgid: int) -> list[int]:
    """Processes of process group `pgid` that have not ended."""
    members = []
    for name in os.listdir("/proc"):
        fields = stat_fields(int(name)) if name.isdigit() else None
        if fields is not None and fields[0] != "Z" and int(fields[2]) == pgid:
            members.append(int(name))
    return members
