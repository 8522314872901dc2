"""Serve a directory over HTTP on one address of this machine, and refuse any other.

The lab mirror listens on an address the project made local before it starts (mirror.sh: the bridge gpucluster-svc).
An address that is not local is refused at once, never bound ahead of time: a client would reach it through the
default route, off this machine.

    python3 serve.py <address> <port> <directory>
"""

import errno
import functools
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - signature of the base class
        sys.stderr.write(f"{self.address_string()} {format % args}\n")


def main():
    address, port, directory = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    handler = functools.partial(QuietHandler, directory=directory)
    try:
        server = ThreadingHTTPServer((address, port), handler)
    except OSError as error:
        if error.errno == errno.EADDRNOTAVAIL:
            sys.exit(f"serve.py: {address} is not an address of this machine (ip -4 addr); refusing to serve there")
        sys.exit(f"serve.py: cannot listen on {address}:{port}: {error.strerror}")
    with server:
        server.serve_forever()


if __name__ == "__main__":
    main()
