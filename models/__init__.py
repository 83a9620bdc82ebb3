"""One package per served model family, plus the model-neutral helpers they share.

Each family package exposes `load(directory, manifest) -> ServedModel` (see `models.base`)
for serving and, behind the `export` extra, an exporter that turns a checkpoint into that
directory. The server never imports torch; exporters do.
"""
