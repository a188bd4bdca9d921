"""Keep an int8-stored word-embedding table int8 in memory: one edit of an ONNX graph.

The packaged MiniLM stores each weight as int8 plus a scale and dequantizes it in the
graph (``Mul(Cast(q), scale)``). onnxruntime folds those constants when it builds the
session, so the 30,522 x 384 word table is held as float32, 47 MB, although a query
reads ~20 of its rows. :func:`gather_int8_rows` rewrites

    Gather(Mul(Cast(q), s), ids)  ->  Mul(Cast(Gather(q, ids)), Gather(s, ids))

so only the rows asked for are dequantized, at run time. The products are the same
float32 products of the same numbers, so the model's output is bit-identical; every
process that embeds holds ~35 MB less.

The edit works on the serialized protobuf (the wire format: varints and
length-prefixed fields), so it needs no ``onnx`` package and copies the big weight
blobs as byte slices.

Invariants: only a Gather on axis 0 whose table is ``Mul(Cast(int8 initializer),
float32 initializer of shape (rows, 1))``, with that Cast and Mul used by nothing
else, is rewritten; the replacement nodes take the Gather's place, so the node list
stays topologically sorted; a model with no such Gather comes back byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

# Field numbers from onnx.proto (ModelProto, GraphProto, NodeProto, AttributeProto,
# TensorProto); they are frozen by the format's compatibility rules.
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_INPUT, _NODE_OUTPUT, _NODE_NAME, _NODE_OP, _NODE_ATTR, _NODE_DOMAIN = 1, 2, 3, 4, 5, 7
_ATTR_NAME, _ATTR_I, _ATTR_TYPE = 1, 3, 20
_ATTR_INT = 2
_TENSOR_DIMS, _TENSOR_TYPE, _TENSOR_NAME = 1, 2, 8
_FLOAT, _INT8 = 1, 3
_VARINT, _FIXED64, _BYTES, _FIXED32 = 0, 1, 2, 5


Buf = bytes | memoryview


class GraphFormatError(ValueError):
    """The bytes are not a protobuf message of the expected shape."""


def _varint(buf: Buf, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf) or shift > 63:
            raise GraphFormatError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def _fields(buf: Buf) -> Iterator[tuple[int, int, int, int, int]]:
    """(field number, wire type, value start, value end, field start) of each field."""
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        num, wire = key >> 3, key & 7
        if wire == _VARINT:
            _, end = _varint(buf, pos)
        elif wire == _FIXED64:
            end = pos + 8
        elif wire == _FIXED32:
            end = pos + 4
        elif wire == _BYTES:
            size, pos = _varint(buf, pos)
            end = pos + size
        else:
            raise GraphFormatError(f"unsupported wire type {wire}")
        if end > len(buf):
            raise GraphFormatError("field runs past the end of its message")
        yield num, wire, pos, end, start
        pos = end


def _text(buf: Buf) -> str:
    return bytes(buf).decode()


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        b = value & 0x7F
        value >>= 7
        if value:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _enc_bytes(num: int, payload: bytes) -> bytes:
    return _enc_varint(num << 3 | _BYTES) + _enc_varint(len(payload)) + payload


def _enc_int(num: int, value: int) -> bytes:
    return _enc_varint(num << 3 | _VARINT) + _enc_varint(value)


@dataclass
class _Node:
    op: str = ""
    domain: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    ints: dict[str, int] = field(default_factory=dict)  # INT attributes by name


def _node(buf: Buf) -> _Node:
    node = _Node()
    for num, wire, a, b, _ in _fields(buf):
        if wire != _BYTES:
            continue
        if num == _NODE_INPUT:
            node.inputs.append(_text(buf[a:b]))
        elif num == _NODE_OUTPUT:
            node.outputs.append(_text(buf[a:b]))
        elif num == _NODE_OP:
            node.op = _text(buf[a:b])
        elif num == _NODE_DOMAIN:
            node.domain = _text(buf[a:b])
        elif num == _NODE_ATTR:
            name, ival, kind = "", None, None
            for n2, w2, a2, b2, _ in _fields(buf[a:b]):
                if n2 == _ATTR_NAME and w2 == _BYTES:
                    name = _text(buf[a + a2 : a + b2])
                elif n2 == _ATTR_I and w2 == _VARINT:
                    ival = _varint(buf, a + a2)[0]
                elif n2 == _ATTR_TYPE and w2 == _VARINT:
                    kind = _varint(buf, a + a2)[0]
            if kind == _ATTR_INT and ival is not None:
                node.ints[name] = ival
    return node


def _tensor_head(buf: Buf) -> tuple[str, int, list[int]]:
    """Name, element type and dims of a TensorProto (its data is not read)."""
    name, dtype, dims = "", 0, []
    for num, wire, a, b, _ in _fields(buf):
        if num == _TENSOR_NAME and wire == _BYTES:
            name = _text(buf[a:b])
        elif num == _TENSOR_TYPE and wire == _VARINT:
            dtype = _varint(buf, a)[0]
        elif num == _TENSOR_DIMS and wire == _VARINT:
            dims.append(_varint(buf, a)[0])
        elif num == _TENSOR_DIMS and wire == _BYTES:  # packed
            pos = a
            while pos < b:
                d, pos = _varint(buf, pos)
                dims.append(d)
    return name, dtype, dims


def _enc_node(op: str, inputs: list[str], outputs: list[str], name: str, ints: dict[str, int]) -> bytes:
    out = b"".join(_enc_bytes(_NODE_INPUT, i.encode()) for i in inputs)
    out += b"".join(_enc_bytes(_NODE_OUTPUT, o.encode()) for o in outputs)
    out += _enc_bytes(_NODE_NAME, name.encode()) + _enc_bytes(_NODE_OP, op.encode())
    for key, value in ints.items():
        attr = _enc_bytes(_ATTR_NAME, key.encode()) + _enc_int(_ATTR_I, value) + _enc_int(_ATTR_TYPE, _ATTR_INT)
        out += _enc_bytes(_NODE_ATTR, attr)
    return out


def _rewrite_graph(graph: Buf) -> bytes | None:
    spans: list[tuple[int, int, int, int]] = []  # (num, start, end, value start) of every field
    nodes: dict[int, _Node] = {}  # field index -> parsed node
    tensors: dict[str, tuple[int, list[int]]] = {}
    for num, wire, a, b, start in _fields(graph):
        if num == _GRAPH_NODE and wire == _BYTES:
            nodes[len(spans)] = _node(graph[a:b])
        elif num == _GRAPH_INITIALIZER and wire == _BYTES:
            name, dtype, dims = _tensor_head(graph[a:b])
            tensors[name] = (dtype, dims)
        spans.append((num, start, b, a))
    producer = {out: idx for idx, n in nodes.items() for out in n.outputs}
    uses: dict[str, int] = {}
    for n in nodes.values():
        for name in n.inputs:
            uses[name] = uses.get(name, 0) + 1
    drop: set[int] = set()
    replace: dict[int, bytes] = {}
    for idx, g in nodes.items():
        if g.op != "Gather" or g.domain or g.ints.get("axis", 0) != 0 or len(g.inputs) != 2:
            continue
        mul_idx = producer.get(g.inputs[0])
        mul = nodes.get(mul_idx) if mul_idx is not None else None
        if mul is None or mul.op != "Mul" or mul.domain or len(mul.inputs) != 2 or uses.get(g.inputs[0]) != 1:
            continue
        cast_idx = producer.get(mul.inputs[0])
        cast = nodes.get(cast_idx) if cast_idx is not None else None
        if cast is None or cast.op != "Cast" or cast.ints.get("to") != _FLOAT or uses.get(mul.inputs[0]) != 1:
            continue
        q, scale = cast.inputs[0], mul.inputs[1]
        q_type, q_dims = tensors.get(q, (0, []))
        s_type, s_dims = tensors.get(scale, (0, []))
        if q_type != _INT8 or len(q_dims) != 2 or s_type != _FLOAT or s_dims != [q_dims[0], 1]:
            continue
        assert mul_idx is not None and cast_idx is not None
        out, ids = g.outputs[0], g.inputs[1]
        rows_q, rows_s, rows_f = f"{out}/int8_rows", f"{out}/row_scales", f"{out}/rows_f32"
        replace[idx] = b"".join(
            _enc_bytes(_GRAPH_NODE, body)
            for body in (
                _enc_node("Gather", [q, ids], [rows_q], f"{out}/gather_int8", {"axis": 0}),
                _enc_node("Gather", [scale, ids], [rows_s], f"{out}/gather_scale", {"axis": 0}),
                _enc_node("Cast", [rows_q], [rows_f], f"{out}/cast", {"to": _FLOAT}),
                _enc_node("Mul", [rows_f, rows_s], [out], f"{out}/scale", {}),
            )
        )
        drop |= {mul_idx, cast_idx}
    if not replace:
        return None
    parts: list[Buf] = []
    for idx, (_, start, end, _) in enumerate(spans):
        if idx in drop:
            continue
        parts.append(replace.get(idx, graph[start:end]))
    return b"".join(parts)


def gather_int8_rows(model: bytes) -> bytes:
    """The model with its int8 embedding tables gathered before dequantizing (see the
    module docstring); ``model`` itself when it has none. Raises
    :class:`GraphFormatError` when the bytes are not a protobuf message."""
    view = memoryview(model)  # slices of a view share the buffer: the weights are not copied
    out: list[Buf] = []
    changed = False
    for num, wire, a, b, start in _fields(view):
        if num == _MODEL_GRAPH and wire == _BYTES:
            graph = _rewrite_graph(view[a:b])
            if graph is not None:
                out.append(_enc_bytes(_MODEL_GRAPH, graph))
                changed = True
                continue
        out.append(view[start:b])
    return b"".join(out) if changed else model
