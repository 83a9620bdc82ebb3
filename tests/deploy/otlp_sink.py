"""Stand-in for the OpenTelemetry collector in the image test (no collector image can be pulled
in CI): an OTLP/HTTP receiver on :4318, run on the server's own image (whose venv has the OTLP
protobuf classes). Like the collector's debug exporter it writes what it receives to stdout, one
JSON line per span: {"service", "trace_id", "span_id", "name"}; the test reads `compose logs`."""
import gzip
import http.server
import json
import signal
import sys

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802
        body = self.rfile.read(int(self.headers.get("content-length") or 0))
        if self.headers.get("content-encoding") == "gzip":
            body = gzip.decompress(body)
        if self.path == "/v1/traces":
            message = ExportTraceServiceRequest()
            message.ParseFromString(body)
            for rs in message.resource_spans:
                attrs = {a.key: a.value.string_value for a in rs.resource.attributes}
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        print(json.dumps({"service": attrs.get("service.name"), "trace_id": span.trace_id.hex(),
                                          "span_id": span.span_id.hex(), "name": span.name}), flush=True)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))   # PID 1 gets no default handler
    print("otlp sink listening on :4318", file=sys.stderr, flush=True)
    http.server.ThreadingHTTPServer(("0.0.0.0", 4318), Receiver).serve_forever()
