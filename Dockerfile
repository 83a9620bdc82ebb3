# System1-Omni images.
#   runtime (default): the server, no torch. ORT_EXTRA=gpu (onnxruntime-gpu + CUDA/cuDNN pip
#                      packages, loaded with preload_dlls) or ORT_EXTRA=cpu (onnxruntime).
#                      Both install from requirements/ORT_EXTRA.txt, a lock with hashes.
#   export:            runtime + torch/transformers: turns checkpoints into ONNX directories.
# BASE_IMAGE is any image with python3 (>= 3.11) and its venv module; air-gapped sites put
# wheels in ./wheelhouse/ and build with PIP_OFFLINE=1. VERSION and REVISION (the commit) label the
# images; deploy/release.sh (make release) sets both. No `# syntax=` line: BuildKit would fetch
# that frontend image from a registry, and offline builds (CI's included) have none.
ARG BASE_IMAGE=python:3.12-slim-bookworm

FROM ${BASE_IMAGE} AS base
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH
RUN python3 -m venv /opt/venv \
    && groupadd --system --gid 10001 omni \
    && useradd --system --uid 10001 --gid omni --home-dir /opt/omni --no-create-home omni \
    && mkdir -p /models /cache/huggingface \
    && chown omni:omni /models /cache/huggingface
WORKDIR /opt/omni

FROM base AS deps
ARG ORT_EXTRA=gpu
ARG PIP_OFFLINE=0
COPY wheelhouse/ /wheelhouse/
COPY requirements/ requirements/
# The installer, then the runtime's lock (requirements/, `make lock`): every package pinned with
# its hashes, and the code comes later, so code edits keep this layer.
RUN if [ "$PIP_OFFLINE" = 1 ]; then set -- --no-index; fi; \
    pip install "$@" --find-links /wheelhouse --require-hashes -r requirements/pip.txt \
    && pip install "$@" --find-links /wheelhouse --require-hashes -r "requirements/${ORT_EXTRA}.txt"

# The modules of models/ that serving imports (deploy/served_modules.py): the runtime image holds
# no exporter, graph or gate code, as it holds no torch.
FROM base AS served
COPY app/ /src/app/
COPY models/ /src/models/
COPY deploy/served_modules.py /src/
RUN python3 /src/served_modules.py /src /served

FROM base AS runtime
COPY --from=deps /opt/venv /opt/venv
COPY app/ app/
COPY --from=served /served/models/ models/
USER 10001:10001
EXPOSE 8000
ENV OMNI_MODEL_ROOT=/models
# start-period: failures before the first success are forgiven while the largest model loads.
HEALTHCHECK --interval=10s --timeout=3s --start-period=600s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/readyz', timeout=2)"]
# uvloop, never Granian's `auto` (which takes rloop wherever it is installed, and rloop keeps
# every request's cancelled timers alive for good: benchmarks/HISTORY.md).
ENV GRANIAN_LOOP=uvloop
# glibc's allocator (app/launch.py MALLOC_ENV): memory a large request took goes back once it is answered.
ENV MALLOC_ARENA_MAX=2 MALLOC_MMAP_THRESHOLD_=262144 MALLOC_TRIM_THRESHOLD_=262144
# One worker: the executor thread owns the sessions. SIGTERM drains in-flight work (see docs).
# HTTP/2 headers: Granian holds at most 256 KiB of them (its default is 16 MiB); the app takes 64 KiB.
ENTRYPOINT ["granian", "--interface", "rsgi", "--workers", "1", "--host", "0.0.0.0", "--port", "8000", \
            "--workers-kill-timeout", "30", "--http2-max-headers-size", "262144", "app.main:app"]
# Labels last: a release's version and commit change no layer above, so a release reuses the
# layers of the build before it (and a registry, the layers it holds).
ARG VERSION=0.1.0
ARG REVISION=
LABEL org.opencontainers.image.title="system1-omni" \
      org.opencontainers.image.description="Server for System One decision models over POST /v1/systemone" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"

# torch and the exporter's packages from their locks, installed where the wheelhouse is (the
# runtime stage has none, so an offline export build found no wheels there). TORCH: cuda (PyPI's
# wheel and its CUDA wheels) or cpu (requirements/torch-cpu.txt, the CPU build for Python 3.11 on
# x86_64, found on TORCH_INDEX_URL or in the wheelhouse).
FROM deps AS export-deps
ARG PIP_OFFLINE=0
ARG TORCH=cuda
ARG TORCH_INDEX_URL=
RUN if [ "$PIP_OFFLINE" = 1 ]; then set -- --no-index; fi; \
    if [ -n "$TORCH_INDEX_URL" ]; then set -- "$@" --extra-index-url "$TORCH_INDEX_URL"; fi; \
    pip install "$@" --find-links /wheelhouse --require-hashes -r requirements/export.txt \
        -r "requirements/torch-${TORCH}.txt"

# From base, not runtime: one copy of the venv in the image, and no healthcheck (nothing listens;
# compose waits for this container to exit).
FROM base AS export
COPY --from=export-deps /opt/venv /opt/venv
COPY app/ app/
COPY models/ models/
COPY deploy/export.sh /usr/local/bin/omni-export
USER 10001:10001
ENV OMNI_MODEL_ROOT=/models \
    HF_HOME=/cache/huggingface
ENTRYPOINT ["omni-export"]
# Labels last, as the runtime's.
ARG VERSION=0.1.0
ARG REVISION=
LABEL org.opencontainers.image.title="system1-omni-export" \
      org.opencontainers.image.description="Exports System One checkpoints to the ONNX directories system1-omni serves" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0"
