"""A stand-in OpenTelemetry collector: an OTLP/HTTP receiver that accepts every export.

    python benchmarks/otlp_sink.py PORT [--host 0.0.0.0] [--print-spans]

The tracing-overhead benchmark points a server at it so spans cost what a real export costs.
The image test (tests/deploy) runs it on the server's own image, whose venv has the OTLP
protobuf classes, at the collector's address (no collector image can be pulled in CI); with
`--print-spans` it writes, like the collector's debug exporter, one JSON line per span to stdout:
{"service", "trace_id", "span_id", "name"}, which the test reads from `compose logs`.
"""

import argparse
import gzip
import http.server
import json
import signal
import sys


class Receiver(http.server.BaseHTTPRequestHandler):
    print_spans = False

    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.print_spans and self.path == "/v1/traces":
            _print_spans(gzip.decompress(body) if self.headers.get("content-encoding") == "gzip" else body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def _print_spans(body: bytes) -> None:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    message = ExportTraceServiceRequest()
    message.ParseFromString(body)
    for rs in message.resource_spans:
        attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for span in ss.spans:
                print(
                    json.dumps(
                        {
                            "service": attrs.get("service.name"),
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "name": span.name,
                        }
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("port", type=int)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--print-spans", action="store_true")
    args = ap.parse_args()
    Receiver.print_spans = args.print_spans
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # as PID 1 in a container, no default handler
    print("otlp sink listening on %s:%d" % (args.host, args.port), file=sys.stderr, flush=True)
    http.server.ThreadingHTTPServer((args.host, args.port), Receiver).serve_forever()
