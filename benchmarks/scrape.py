"""A live server's Prometheus counters (its `/metrics`), for benchmarks that measure how they
change over a window.

    python -m benchmarks.scrape http://127.0.0.1:8000 > metrics.txt     # the whole exposition
"""

from __future__ import annotations

import sys
import urllib.request


def exposition(url: str) -> str:
    """The server's /metrics text; raises OSError where it does not answer."""
    return urllib.request.urlopen(url.rstrip("/") + "/metrics", timeout=10).read().decode()


def totals(url: str, names, labels: dict | None = None) -> dict[str, float]:
    """Each named sample (e.g. `omni_batch_rows_sum`) summed over its series, or over those
    whose labels include `labels`."""
    from prometheus_client.parser import text_string_to_metric_families

    out = dict.fromkeys(names, 0.0)
    for family in text_string_to_metric_families(exposition(url)):
        for sample in family.samples:
            if sample.name in out and all(sample.labels.get(k) == v for k, v in (labels or {}).items()):
                out[sample.name] += sample.value
    return out


if __name__ == "__main__":
    sys.stdout.write(exposition(sys.argv[1]))
