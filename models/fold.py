"""Weight transforms folded into the weights at export, not at every server start.

A dynamo export leaves the weight layout work in the graph: `F.linear` is a Transpose of the
weight, and a projection read part by part (models/projections.py) a Slice or a Gather of it
before that. ONNX Runtime folds such constant chains when it builds a session, on the CPU, at
~150 MB/s on the development machine: for the 9B Clef-Flash export's 18 GB, ~60 s of every start
on the H200 (docs/benchmarks.md). Folding them once here, with the same data movement, leaves
ONNX Runtime nothing to do.

Only ops that move or select values are folded (no arithmetic, no Cast: what the session
computes stays bit for bit what ONNX Runtime would have folded), and only where every input is a
constant. The external data is rewritten tensor by tensor, so memory holds one weight at a time,
not the model.

Every exporter folds its graph; an export written before that is folded in place with

    python -m models.fold EXPORT_DIR [EXPORT_DIR ...]

which also records it in the export's manifest (the server warns about exports without it).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

FOLDABLE = frozenset({"Transpose", "Slice", "Gather", "GatherND", "Reshape", "Squeeze", "Unsqueeze",
                      "Identity", "Concat", "Split"})
INLINE_BYTES = 1024          # smaller results stay inside the graph, as the exporter writes them
ALIGN = 4096                 # offsets of external tensors, so they can be mapped page by page


def fold_weights(path: str, progress=None) -> int:
    """Fold the graph at `path` (and its external data) in place; returns how many nodes went."""
    import onnx
    from onnx import numpy_helper

    t0 = time.perf_counter()
    model = onnx.load(path, load_external_data=False)
    graph = model.graph
    base = os.path.dirname(os.path.abspath(path))
    constant = {t.name for t in graph.initializer}
    inits = {t.name: t for t in graph.initializer}
    folded_nodes, produced = [], {}
    consumers = _consumers(graph)
    for node in graph.node:
        if node.op_type not in FOLDABLE or any(_has_graph(a) for a in node.attribute):
            continue
        if not all(name == "" or name in constant for name in node.input):
            continue
        args = [None if name == "" else (produced[name] if name in produced else
                                          numpy_helper.to_array(inits[name], base)) for name in node.input]
        outputs = _run(node, args)
        for name, value in zip(node.output, outputs):
            if name:
                produced[name] = value
                constant.add(name)
        folded_nodes.append(node)
        # Intermediates no later node reads can go now: memory holds the live ones only.
        for name in node.input:
            if name in produced and not _still_needed(name, consumers, folded_nodes):
                produced.pop(name)
    if not folded_nodes:
        return 0
    gone = {id(n) for n in folded_nodes}
    kept_nodes = [n for n in graph.node if id(n) not in gone]
    read = _names_read(kept_nodes) | {o.name for o in graph.output}
    new_tensors = [numpy_helper.from_array(np.ascontiguousarray(v), name)
                   for name, v in produced.items() if name in read]
    kept_inits = [t for t in graph.initializer if t.name in read]
    _rewrite(model, path, base, kept_inits, new_tensors)
    del graph.node[:]
    graph.node.extend(kept_nodes)
    names = {t.name for t in graph.initializer}
    kept_info = [v for v in graph.value_info if v.name not in names and v.name not in produced]
    del graph.value_info[:]
    graph.value_info.extend(kept_info)
    onnx.save(model, path)
    if progress:
        progress("folded %d constant weight transforms into the weights in %.1f s"
                 % (len(folded_nodes), time.perf_counter() - t0))
    return len(folded_nodes)


def _run(node, args: list) -> list:
    """One node over numpy values, by ONNX's reference implementation of the op."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = ["in%d" % i if a is not None else "" for i, a in enumerate(args)]
    outs = ["out%d" % i for i in range(len(node.output))]
    one = helper.make_node(node.op_type, names, outs, domain=node.domain)
    one.attribute.extend(node.attribute)
    feeds = {n: a for n, a in zip(names, args) if n}
    return [np.asarray(v) for v in ReferenceEvaluator(one).run(None, feeds)]


def _rewrite(model, path: str, base: str, kept: list, new: list) -> None:
    """Write the kept initializers (read back from the old data file) and the folded ones into a
    new data file beside the graph, then point the graph at it."""
    locations = [_external(t) for t in kept]
    location = next((loc["location"] for loc in locations if loc), os.path.basename(path) + ".data")
    tmp = os.path.join(base, location + ".folding")
    offset = 0
    with open(tmp, "wb") as out:
        def put(tensor, data: bytes) -> None:
            nonlocal offset
            pad = -offset % ALIGN
            out.write(b"\0" * pad)
            offset += pad
            out.write(data)
            tensor.ClearField("raw_data")
            del tensor.external_data[:]
            for key, value in (("location", location), ("offset", str(offset)), ("length", str(len(data)))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            tensor.data_location = tensor.EXTERNAL
            offset += len(data)

        for tensor, loc in zip(kept, locations):
            if loc:
                with open(os.path.join(base, loc["location"]), "rb") as f:
                    f.seek(int(loc.get("offset", 0)))
                    put(tensor, f.read(int(loc["length"])) if "length" in loc else f.read())
        for tensor in new:
            if len(tensor.raw_data) >= INLINE_BYTES:
                put(tensor, tensor.raw_data)
    old = {loc["location"] for loc in locations if loc}
    os.replace(tmp, os.path.join(base, location))
    for name in old - {location}:
        os.remove(os.path.join(base, name))
    graph = model.graph
    del graph.initializer[:]
    graph.initializer.extend(kept + new)


def _external(tensor) -> dict | None:
    if tensor.data_location != tensor.EXTERNAL:
        return None
    return {e.key: e.value for e in tensor.external_data}


def _has_graph(attribute) -> bool:
    return bool(attribute.g.node) or len(attribute.graphs) > 0


def _names_read(nodes) -> set[str]:
    """Every name the nodes read, subgraphs included."""
    read = set()
    for node in nodes:
        read.update(node.input)
        for a in node.attribute:
            for g in ([a.g] if a.g.node else []) + list(a.graphs):
                read |= _names_read(g.node)
    return read


def _consumers(graph) -> dict[str, int]:
    """How many times each name is read: by a node (its subgraphs included) or as a graph output."""
    count: dict[str, int] = {}
    for node in graph.node:
        for name in list(node.input) + sorted(_names_read([node]) - set(node.input)):
            count[name] = count.get(name, 0) + 1
    for output in graph.output:
        count[output.name] = count.get(output.name, 0) + 1
    return count


def _still_needed(name: str, consumers: dict, folded: list) -> bool:
    """Whether a node not yet folded (or the graph's own outputs, or a kept node) may read it:
    true unless every reader of `name` has been folded already."""
    readers_folded = sum(1 for n in folded for i in n.input if i == name)
    return consumers.get(name, 0) > readers_folded


def fold_export(directory: str, progress=print) -> int:
    """Fold an export directory's graph in place and record it in its manifest."""
    from models import manifest as manifests

    meta = manifests.read(directory)
    name = meta.get("onnx", "model.onnx")
    n = fold_weights(os.path.join(directory, name), progress)
    meta["weights_folded"] = True
    if name in meta.get("files", {}):
        meta["files"][name] = manifests.sha256_file(os.path.join(directory, name))
    manifests.write(directory, meta)
    return n


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m models.fold", description=__doc__.split("\n\n")[0])
    ap.add_argument("exports", nargs="+", help="export directories (each with manifest.json)")
    args = ap.parse_args(argv)
    for directory in args.exports:
        n = fold_export(directory, progress=lambda msg: print(msg, file=sys.stderr, flush=True))
        print("%s: %s" % (directory, "%d weight transforms folded" % n if n else "nothing left to fold"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
