"""Weight transforms folded into the weights at export, not at every server start.

A dynamo export leaves the weight layout work in the graph: `F.linear` is a Transpose of the
weight, and a projection read part by part (models/projections.py) a Slice or a Gather of it
before that. ONNX Runtime folds such constant chains on the CPU whenever it builds an
InferenceSession, which takes most of a multi-GB model's load. Folding them once here, with the
same data movement, leaves ONNX Runtime nothing to do.

Only ops that move or select values are folded (no arithmetic, no Cast: what the session
computes stays bit for bit what ONNX Runtime would have folded), and only where every input is a
constant. The external data is rewritten tensor by tensor, so memory holds about one weight,
not the model; during an export the old file's blocks are given back as the new one grows, so
the disk holds about one copy of the weights, not two.

Every exporter folds its graph: `fold_lazily` before the save, so each folded weight is computed
while the save writes it and the weights reach the disk once, then `fold_weights` over the file
for anything left (`save_folded` does both). An export whose manifest does not say its weights
are folded is folded in place with

    python -m models.fold EXPORT_DIR [EXPORT_DIR ...]

which also records it in the export's manifest (the server warns about exports without it). That
one keeps the old data file whole until the new one is complete (a failure changes nothing), so
it needs free disk for a second copy of the weights while it runs.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import sys
import time

import numpy as np

from models import manifest as manifests

FOLDABLE = frozenset(
    {"Transpose", "Slice", "Gather", "GatherND", "Reshape", "Squeeze", "Unsqueeze", "Identity", "Concat", "Split"}
)
INLINE_BYTES = 1024  # smaller results stay inside the graph, as the exporter writes them
ALIGN = 4096  # offsets of external tensors, so they can be mapped page by page


def _foldable(graph, inits: dict) -> list:
    """The nodes of `graph` that compute from constants alone, in graph order (a node fed by an
    earlier one of them included)."""
    # An initializer that is also a graph input is only a default: the caller may feed another.
    # Packed 4-bit weights are left alone (their bytes do not map one to one onto elements).
    constant = {name for name, t in inits.items() if t.data_type not in _PACKED} - {i.name for i in graph.input}
    folded = []
    for node in graph.node:
        if (
            node.op_type in FOLDABLE
            and not any(_has_graph(a) for a in node.attribute)
            and all(name == "" or name in constant for name in node.input)
        ):
            folded.append(node)
            constant.update(name for name in node.output if name)
    return folded


def fold_weights(path: str, progress=None, release: bool = False) -> int:
    """Fold the graph at `path` (and its external data) in place; returns how many nodes went.

    Each result is written to the new data file as soon as it is computed, and a weight is read
    only while a folded node still needs it, so memory holds about one weight. `release`: punch
    each old weight's bytes out of the old data file once it has been copied or folded (Linux),
    so the disk holds about one copy of the weights, not two; for a graph being exported, whose
    old file is worthless if the fold fails halfway."""
    import onnx

    t0 = time.perf_counter()
    model = onnx.load(path, load_external_data=False)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    folded = _foldable(graph, inits)
    if not folded:
        return 0
    gone = {id(n) for n in folded}
    kept_nodes = [n for n in graph.node if id(n) not in gone]
    needed = _names_read(kept_nodes) | {o.name for o in graph.output} | {i.name for i in graph.input}
    # Reads by folded nodes not yet run.
    pending: dict[str, int] = collections.Counter(name for node in folded for name in node.input if name)

    with _DataFile(path, graph.initializer, release) as data:
        values: dict[str, tuple] = {}  # name -> (array, ONNX type), while a folded node will read it
        new = []
        for node in folded:
            args = [
                None if not name else values[name] if name in values else data.load(inits[name]) for name in node.input
            ]
            kind = args[0][1]  # every foldable op's outputs have its first input's type
            outputs = _run(node, [a[0] if a is not None else None for a in args])
            for name, arg in zip(node.input, args, strict=True):
                if not name:
                    continue
                pending[name] -= 1
                if pending[name]:
                    values.setdefault(name, arg)  # read again by a later fold: keep it at hand
                    continue
                values.pop(name, None)
                if name in inits:
                    data.done(inits[name], keep=name in needed)
            for name, value in zip(node.output, outputs, strict=True):
                if not name:
                    continue
                if name in needed:
                    new.append(data.write_new(name, value, kind))
                if pending.get(name):
                    values[name] = (value, kind)
        kept = [t for t in graph.initializer if t.name in needed]
        for tensor in kept:
            data.done(tensor, keep=True)  # those no fold read: copied as they are
        del graph.initializer[:]
        graph.initializer.extend(kept + new)
        del graph.node[:]
        graph.node.extend(kept_nodes)
        names = {t.name for t in graph.initializer}
        kept_info = [v for v in graph.value_info if v.name not in names and v.name in needed]
        del graph.value_info[:]
        graph.value_info.extend(kept_info)
        # The new graph is written before the new data file takes the old one's place, and takes
        # the old graph's right after: a failure before that leaves the old pair as it was.
        onnx.save(model, data.graph_tmp)
    os.replace(data.graph_tmp, path)
    if progress:
        progress(
            "folded %d constant weight transforms into the weights in %.1f s" % (len(folded), time.perf_counter() - t0)
        )
    return len(folded)


def save_folded(program, path: str, progress=None) -> int:
    """Save a `torch.onnx.export(..., dynamo=True)` program at `path` with its external data and
    its weight transforms folded: as the save writes them (`fold_lazily`), then whatever that
    left, from the file (`fold_weights`). Returns how many nodes went."""
    lazy = fold_lazily(program.model)
    if progress:
        progress(
            "writing %s and its external data (%d weight transforms folded as they are written) ..." % (path, lazy)
        )
    program.save(path, external_data=True)
    return lazy + fold_weights(path, progress, release=True)


def fold_lazily(model) -> int:
    """Fold an exported program's weight transforms before it is saved (`ONNXProgram.model`, an
    onnx_ir Model): the nodes `fold_weights` would fold, with the same results under the same
    names, as lazy initializers computed while the save writes them, so the weights reach the
    disk once, already folded, and memory holds about one result at a time. Nodes whose output
    shapes the export did not record are left to `fold_weights`. Returns how many nodes went."""
    import onnx_ir as ir

    graph = model.graph
    graph_inputs = {id(v) for v in graph.inputs}
    folded = 0
    for node in list(graph):  # topological order: a chain folds link by link
        if (
            node.op_type not in FOLDABLE
            or node.domain not in ("", "ai.onnx")
            or any(a.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS) for a in node.attributes.values())
        ):
            continue
        sources = list(node.inputs)
        if not all(
            v is None
            or (
                v.is_initializer()
                and v.const_value is not None
                and id(v) not in graph_inputs
                and v.dtype is not None
                and v.dtype.value not in _PACKED
            )
            for v in sources
        ):
            continue
        outputs = [o for o in node.outputs if o.name]
        if not all(o.shape is not None and o.shape.is_static() and not o.is_graph_output() for o in outputs):
            continue
        proto = ir.serde.serialize_node(node)
        tensors = [None if v is None else v.const_value for v in sources]
        dtype = sources[0].dtype  # every foldable op's outputs have its first input's type
        folded_values = []
        for out in outputs:
            index = list(node.outputs).index(out)
            lazy = ir.LazyTensor(
                functools.partial(_lazy_output, proto, tensors, index, dtype, tuple(out.shape)),
                dtype=dtype,
                shape=out.shape,
                name=out.name,
            )
            value = ir.Value(name=out.name, shape=out.shape, type=ir.TensorType(dtype), const_value=lazy)
            out.replace_all_uses_with(value)
            folded_values.append(value)
        graph.remove(node, safe=True)
        for value in folded_values:
            graph.register_initializer(value)
        folded += 1
    for name, v in list(graph.initializers.items()):
        if not v.uses() and not v.is_graph_output() and id(v) not in graph_inputs:
            del graph.initializers[name]
    return folded


def _lazy_output(proto, tensors, index: int, dtype, shape: tuple):
    """Output `index` of a folded node, computed from its inputs' tensors (lazy ones included)."""
    import onnx_ir as ir

    raw = dtype.value in _RAW_TYPES
    args = []
    for t in tensors:
        if t is None:
            args.append(None)
            continue
        a = t.numpy()
        if raw and t.dtype == dtype:  # bfloat16 and float8s moved as raw integers
            a = a.view("u%d" % a.dtype.itemsize)
        args.append(a)
    value = _run(proto, args)[index]
    if value.shape != shape:
        raise ValueError("folding %s gave shape %s, the export recorded %s" % (proto.output[index], value.shape, shape))
    return ir.Tensor(value.view(dtype.numpy()) if raw else value, dtype=dtype)


def _run(node, args: list) -> list:
    """One node over numpy values, by ONNX's reference implementation of the op (a matrix
    transpose, most of an export's folds, by `_transpose2d`)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    if node.op_type == "Transpose" and len(args) == 1 and args[0].ndim == 2:
        perm = next((list(a.ints) for a in node.attribute if a.name == "perm"), [1, 0])
        if perm == [1, 0]:
            return [_transpose2d(args[0])]

    names = ["in%d" % i if a is not None else "" for i, a in enumerate(args)]
    outs = ["out%d" % i for i in range(len(node.output))]
    one = helper.make_node(node.op_type, names, outs, domain=node.domain)
    one.attribute.extend(node.attribute)
    feeds = {n: a for n, a in zip(names, args, strict=True) if n}
    return [np.ascontiguousarray(v) for v in ReferenceEvaluator(one).run(None, feeds)]


_STRIPE = 128


def _transpose2d(a: np.ndarray) -> np.ndarray:
    """a.T, contiguous. numpy's own copy of a transposed view walks the source column by column;
    copied 128 source rows at a time the stripe stays in cache, and the stripes run on threads
    (numpy lets go of the GIL while it copies)."""
    rows, cols = a.shape
    out = np.empty((cols, rows), a.dtype)

    def stripe(i: int) -> None:
        out[:, i : i + _STRIPE] = a[i : i + _STRIPE].T

    starts = range(0, rows, _STRIPE)
    if a.nbytes < (4 << 20):
        for i in starts:
            stripe(i)
    else:
        list(_pool().map(stripe, starts))
    return out


@functools.lru_cache(maxsize=1)
def _pool():
    from concurrent.futures import ThreadPoolExecutor

    return ThreadPoolExecutor(min(16, os.cpu_count() or 1), thread_name_prefix="fold")


class _DataFile:
    """The graph's external data, rewritten into a new file beside it: kept weights copied,
    folded ones appended, each at an ALIGN boundary; swapped in on success, dropped on failure."""

    def __init__(self, path: str, initializers, release: bool):
        self.base = os.path.dirname(os.path.abspath(path))
        sources = {e["location"] for e in map(_external, initializers) if e}
        self.location = min(sources) if sources else os.path.basename(path) + ".data"
        self.sources, self.release, self.handled = sources, release, set()
        self.tmp = os.path.join(self.base, self.location + ".folding")
        self.graph_tmp = os.path.abspath(path) + ".folding"

    def __enter__(self) -> _DataFile:
        self.out, self.offset = open(self.tmp, "wb"), 0  # noqa: SIM115 - closed by __exit__
        self.files = {
            loc: open(os.path.join(self.base, loc), "r+b" if self.release else "rb")  # noqa: SIM115
            for loc in self.sources
        }
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        self.out.close()
        for f in self.files.values():
            f.close()
        if exc_type is not None:
            for tmp in (self.tmp, self.graph_tmp):
                if os.path.exists(tmp):
                    os.remove(tmp)
            return False
        if not self.offset and not self.sources:
            os.remove(self.tmp)  # nothing external to write
            return False
        os.replace(self.tmp, os.path.join(self.base, self.location))
        for loc in self.sources - {self.location}:
            os.remove(os.path.join(self.base, loc))
        return False

    def _bytes(self, tensor) -> bytes:
        entry = _external(tensor)
        f = self.files[entry["location"]]
        f.seek(int(entry.get("offset", 0)))
        return f.read(int(entry["length"])) if "length" in entry else f.read()

    def load(self, tensor) -> tuple:
        """(array, ONNX type): external bytes viewed at the type's width (bfloat16 and the float8s
        as raw integers: folding only moves values), inline ones through numpy_helper."""
        from onnx import helper, numpy_helper

        if not _external(tensor):
            return numpy_helper.to_array(tensor), tensor.data_type
        storage = helper.tensor_dtype_to_np_dtype(tensor.data_type)
        if tensor.data_type in _RAW_TYPES:
            storage = np.dtype("u%d" % storage.itemsize)
        return np.frombuffer(self._bytes(tensor), storage).reshape(tuple(tensor.dims)), tensor.data_type

    def _put(self, tensor, data: bytes) -> None:
        pad = -self.offset % ALIGN
        self.out.write(b"\0" * pad)
        self.offset += pad
        self.out.write(data)
        tensor.ClearField("raw_data")
        del tensor.external_data[:]
        for key, value in (("location", self.location), ("offset", str(self.offset)), ("length", str(len(data)))):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        tensor.data_location = tensor.EXTERNAL
        self.offset += len(data)

    def write_new(self, name: str, value: np.ndarray, kind: int):
        from onnx import TensorProto

        tensor = TensorProto(name=name, data_type=kind, dims=list(value.shape))
        data = value.tobytes()
        if len(data) >= INLINE_BYTES:
            self._put(tensor, data)
        else:
            tensor.raw_data = data
        return tensor

    def done(self, tensor, keep: bool) -> None:
        """No fold reads `tensor` any more: copy it if the graph keeps it, then let its bytes go."""
        if tensor.name in self.handled:
            return
        self.handled.add(tensor.name)
        entry = _external(tensor)
        if not entry:
            return
        if keep:
            self._put(tensor, self._bytes(tensor))
        if self.release and "length" in entry:
            _punch(self.files[entry["location"]], int(entry.get("offset", 0)), int(entry["length"]))


_RAW_TYPES = frozenset({16, 17, 18, 19, 20})  # bfloat16 and the float8s: moved as raw integers
_PACKED = frozenset({21, 22, 23})  # uint4, int4, float4e2m1: two values a byte


def _punch(f, offset: int, length: int) -> None:
    """Give a region of a file's disk blocks back (Linux fallocate PUNCH_HOLE | KEEP_SIZE); where
    that is not possible the bytes stay, costing only disk until the file is replaced."""
    import ctypes

    fallocate = _fallocate()
    if fallocate is not None:
        fallocate(f.fileno(), 3, ctypes.c_int64(offset), ctypes.c_int64(length))


@functools.lru_cache(maxsize=1)
def _fallocate():
    """libc's fallocate, looked up once (find_library runs a subprocess), or None."""
    import ctypes
    import ctypes.util

    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True).fallocate
    except (OSError, AttributeError):
        return None


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


def fold_export(directory: str, progress=print) -> int:
    """Fold an export directory's graph in place and record it in its manifest."""
    meta = manifests.read(directory)
    name = meta.get("onnx", "model.onnx")
    n = fold_weights(os.path.join(directory, name), progress)
    meta["weights_folded"] = True
    files = meta.get("files", {})
    for recorded in [f for f in files if f == name or f.endswith(".data")]:  # what the fold rewrote
        where = os.path.join(directory, recorded)
        if os.path.exists(where):
            files[recorded] = manifests.sha256_file(where)
        else:
            del files[recorded]
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
