"""The TCP sockets a process tree listens on, read from /proc (Linux; no psutil, no `ss` parsing).

A socket's address comes from /proc/<pid>/net/tcp{,6} (hex, little-endian words), its owner from
the `socket:[inode]` links in /proc/<pid>/fd.
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

_LISTEN = "0A"


def _processes() -> dict[int, list[str]]:
    """pid -> the fields of /proc/<pid>/stat after the command name (state, ppid, pgrp, session...)."""
    out = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                out[int(entry.name)] = (entry / "stat").read_text().rsplit(")", 1)[-1].split()
            except OSError:
                continue
    return out


def session_members(sid: int) -> list[int]:
    """Live (not zombie) processes of session `sid`, e.g. the one `dagster dev` leads."""
    return [pid for pid, fields in _processes().items() if int(fields[3]) == sid and fields[0] != "Z"]


def descendants(pid: int) -> list[int]:
    """`pid` and every process below it."""
    children: dict[int, list[int]] = {}
    for child, fields in _processes().items():
        children.setdefault(int(fields[1]), []).append(child)
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def listening(pids: list[int]) -> list[tuple[int, str, int]]:
    """(pid, address, port) of every listening TCP socket the processes hold."""
    out = []
    for pid in pids:
        inodes = _socket_inodes(pid)
        for table in ("tcp", "tcp6"):
            for address, port, inode in _listeners(Path(f"/proc/{pid}/net/{table}")):
                if inode in inodes:
                    out.append((pid, address, port))
    return out


def is_loopback(address: str) -> bool:
    return ipaddress.ip_address(address).is_loopback


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:["):-1])
    return inodes


def _listeners(table: Path) -> list[tuple[str, int, str]]:
    try:
        lines = table.read_text().splitlines()[1:]
    except OSError:
        return []
    out = []
    for line in lines:
        fields = line.split()
        if fields[3] != _LISTEN:
            continue
        host, port = fields[1].split(":")
        out.append((_address(host), int(port, 16), fields[9]))
    return out


def _address(hex_host: str) -> str:
    """/proc/net/tcp stores each 32-bit word of the address in host (little-endian) order."""
    raw = bytes.fromhex(hex_host)
    swapped = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
    ip = ipaddress.ip_address(swapped)
    return str(getattr(ip, "ipv4_mapped", None) or ip)  # a Java socket on ::ffff:127.0.0.1 is 127.0.0.1
