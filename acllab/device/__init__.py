"""The device boundary: the simulated card in one process, the program in another.

A real program reaches its card through the driver; the card's state is not in the
program's memory. :mod:`acllab.device` gives acllab the same seam, a small versioned device
protocol (docs/device-protocol.md):

* :mod:`~acllab.device.wire`: frames of plain typed values (no pickle, nothing that runs
  code when decoded; any language can speak it);
* :mod:`~acllab.device.endpoint`: requests both ways on channels (one per thread of the
  program), nested as a driver's callbacks are;
* :mod:`~acllab.device.server`: :class:`DeviceServer`, this process's runtime behind a
  connection;
* :mod:`~acllab.device.client`: :class:`DeviceClient`, whose ``acl`` is pyACL in a process
  that has no device of its own.

``acllab grade`` runs the check and the device in the grader's process and the learner's
code in a sandboxed one that reaches the device only through these calls.
"""

from __future__ import annotations

import socket

from .client import DeviceClient, connect
from .server import DeviceServer, SharedArena

__all__ = ["DeviceServer", "DeviceClient", "SharedArena", "connect", "pair"]


def pair(arena: SharedArena | None = None) -> tuple[DeviceServer, socket.socket]:
    """A started server on one end of a socket pair, and the other end for a client (in
    this process, for tests, or handed to a child process)."""
    mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    server = DeviceServer(mine, arena=arena if arena is not None else SharedArena())
    server.start()
    return server, theirs
