"""Serve a directory over HTTP on one address, even before that address exists on this host.

The lab mirror listens on the podman bridge's gateway address, which netavark creates only while a container
is on the bridge; IP_FREEBIND lets the server bind it beforehand, so the mirror is reachable from the Molecule
containers and from nowhere else.

    python3 serve.py <address> <port> <directory>
"""

import functools
import socket
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

IP_FREEBIND = getattr(socket, "IP_FREEBIND", 15)


class FreebindHTTPServer(ThreadingHTTPServer):
    def server_bind(self):
        self.socket.setsockopt(socket.SOL_IP, IP_FREEBIND, 1)
        super().server_bind()


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main():
    address, port, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    handler = functools.partial(QuietHandler, directory=directory)
    with FreebindHTTPServer((address, port), handler) as server:
        server.serve_forever()


if __name__ == "__main__":
    main()
