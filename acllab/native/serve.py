"""A device for one native program: ``python -m acllab.native.serve --fd N``.

libascendcl.so starts this when a program calls AscendCL with no device named in its
environment (``ACLLAB_DEVICE``): it serves the simulated card over the socket the library
passes (descriptor ``N``, one end of a socket pair) until the program closes it, so that
``./main`` runs on its own as on a machine with a card. Warnings (a failed call's readable
explanation) go to stderr, as CANN's log would.
"""

from __future__ import annotations

import argparse
import socket
import sys

__all__ = ["main", "serve_socket"]


def serve_socket(sock: socket.socket, device: str | None = None) -> None:
    """Serve a fresh runtime over ``sock`` until the client closes it."""
    from .. import session
    from ..device import DeviceServer, SharedArena
    from .run import quiet_warnings

    session.configure(device) if device else session.reset()
    arena = SharedArena()
    server = DeviceServer(sock, arena=arena, name="-native").start()
    with quiet_warnings():
        server.endpoint.closed.wait()
    server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m acllab.native.serve",
                                     description="serve acllab's device to one native program")
    parser.add_argument("--fd", type=int, required=True,
                        help="the connected socket's descriptor (from libascendcl.so)")
    parser.add_argument("--device", help="device profile: ascend310 (default) or ascend910b")
    ns = parser.parse_args(argv)
    try:
        sock = socket.socket(fileno=ns.fd)
    except OSError as exc:
        print(f"acllab: no socket on descriptor {ns.fd}: {exc}", file=sys.stderr)
        return 2
    serve_socket(sock, ns.device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
