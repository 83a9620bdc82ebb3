"""A minimal OTLP/HTTP endpoint that accepts and counts trace exports (for overhead runs)."""
from __future__ import annotations

import http.server
import sys


class Sink(http.server.BaseHTTPRequestHandler):
    received = 0

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).received += 1
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
