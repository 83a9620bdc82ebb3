#!/usr/bin/env bash
# Download, into .whl/, the wheels the GPU machine lacks for serving and benchmarking (its image
# has torch, transformers, onnx, tokenizers, numpy, prometheus-client, httpx, protobuf, requests;
# nothing else can be fetched there; clef-finetune is the Clef-Flash HF baseline's reference head).
# Run from the repo root, then carry `.whl`.
set -euo pipefail
mkdir -p .whl
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
PLAT=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
      --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
      --platform manylinux_2_5_x86_64 --platform manylinux1_x86_64)
for p in litestar==2.25.0 litestar-htmx msgspec==0.22.0 multipart polyfactory faker rich-click sniffio \
         granian==2.8.7 laya==0.4.15 zstandard onnxconverter-common \
         opentelemetry-api==1.45.2 opentelemetry-sdk==1.45.2 opentelemetry-semantic-conventions==0.66b2 \
         opentelemetry-exporter-otlp-proto-http==1.45.2 opentelemetry-exporter-otlp-proto-common==1.45.2 \
         opentelemetry-exporter-otlp-common==0.66b2 opentelemetry-exporter-http-transport==0.66b2 \
         opentelemetry-proto==1.45.2 googleapis-common-protos importlib-metadata py-spy==0.4.1 uvloop==0.23.0 rloop==0.5.0 \
         clef-finetune==0.1.0; do
  python3 -m pip download -q --no-deps "${PLAT[@]}" -d .whl "$p"
done
ls .whl
