"""Reads and writes safetensors files in pure Python (struct + json; no numpy, no torch).

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length n,
n bytes of JSON naming each tensor's dtype, shape and data_offsets (relative to the end of the
header), an optional "__metadata__" object of string values, then the raw little-endian bytes.
This is the layout src/report/safetensors.cpp writes for `pkb run/eval --dump` (header padded with
spaces to a multiple of 8 bytes, tensors in the order given); tools/conformance.py uses it when
the `safetensors` package is not installed, and tests/tools/conformance_tools_test.py checks that
pkb and this module read each other's files bit for bit.

    f = read("dump/trial_0/rank_1.safetensors")
    f.metadata["world"], f.tensors["input.tensor"].dtype, f.tensors["input.tensor"].shape
    write("out.safetensors", [RawTensor("x", "BF16", [2, 3], b"...")], {"side": "pytorch"})
"""

import json
import os
import struct
import tempfile
from dataclasses import dataclass, field

# safetensors dtype name -> bytes per element (the names pkb writes; src/core/dtype.cpp).
DTYPE_SIZES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}

# pkb's dtype names (spec.toml, --dtype, dump metadata) -> safetensors names.
PKB_TO_SAFETENSORS = {
    "bf16": "BF16", "fp16": "F16", "fp32": "F32", "fp64": "F64", "int8": "I8", "uint8": "U8",
    "int32": "I32", "int64": "I64", "bool": "BOOL", "fp8_e4m3": "F8_E4M3", "fp8_e5m2": "F8_E5M2",
}


class SafetensorsError(ValueError):
    """A file that is not valid safetensors; the message names the file and what is wrong."""


@dataclass
class RawTensor:
    name: str
    dtype: str          # safetensors name: "BF16", "F32", "I64", ...
    shape: list
    data: bytes         # little-endian, row-major, exactly numel * itemsize bytes

    @property
    def numel(self):
        n = 1
        for d in self.shape:
            n *= int(d)
        return n


@dataclass
class SafetensorsFile:
    tensors: dict = field(default_factory=dict)   # name -> RawTensor, in file (offset) order
    metadata: dict = field(default_factory=dict)  # str -> str


def _numel(shape):
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _parse(path, data):
    def bad(why):
        raise SafetensorsError(f"{path}: not a valid safetensors file: {why}")

    if len(data) < 8:
        bad("shorter than its 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        bad("header length beyond the end of the file")
    try:
        header = json.loads(bytes(data[8:8 + n]).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        bad(f"header is not JSON: {e}")
    if not isinstance(header, dict):
        bad("header is not a JSON object")
    return n, header, bad


def read(path, with_data=True):
    """Reads and validates one file; raises SafetensorsError naming the file and the problem.
    with_data=False reads the header alone (tensors then carry data=None)."""
    with open(path, "rb") as fh:
        if with_data:
            data = fh.read()
            size = len(data)
        else:
            data = fh.read(8)
            if len(data) == 8:
                data += fh.read(struct.unpack("<Q", data)[0])
            size = os.fstat(fh.fileno()).st_size
    n, header, bad = _parse(path, data)
    base = 8 + n
    out = SafetensorsFile()
    ordered = []
    for name, v in header.items():
        if name == "__metadata__":
            if not isinstance(v, dict):
                bad("__metadata__ is not an object")
            out.metadata = {k: x if isinstance(x, str) else json.dumps(x) for k, x in v.items()}
            continue
        try:
            dtype, shape, offs = v["dtype"], [int(s) for s in v["shape"]], [int(o) for o in v["data_offsets"]]
        except (KeyError, TypeError, ValueError):
            bad(f"tensor '{name}' lacks dtype, shape or data_offsets")
        if dtype not in DTYPE_SIZES:
            bad(f"tensor '{name}' has unsupported dtype {dtype}")
        if len(offs) != 2 or offs[0] > offs[1] or base + offs[1] > size:
            bad(f"tensor '{name}' has bad offsets {offs}")
        if _numel(shape) * DTYPE_SIZES[dtype] != offs[1] - offs[0]:
            bad(f"tensor '{name}' size does not match its shape {shape} and dtype {dtype}")
        payload = data[base + offs[0]:base + offs[1]] if with_data else None
        ordered.append((offs[0], RawTensor(name, dtype, shape, payload)))
    ordered.sort(key=lambda p: p[0])
    out.tensors = {t.name: t for _, t in ordered}
    return out


def encode(tensors, metadata=None):
    """The bytes of a safetensors file holding `tensors` (RawTensor, in this order) and `metadata`."""
    header = {}
    off = 0
    for t in tensors:
        if t.dtype not in DTYPE_SIZES:
            raise SafetensorsError(f"tensor '{t.name}': unsupported dtype {t.dtype}")
        want = _numel(t.shape) * DTYPE_SIZES[t.dtype]
        if len(t.data) != want:
            raise SafetensorsError(f"tensor '{t.name}' has {len(t.data)} bytes; its shape {list(t.shape)} "
                                   f"and dtype {t.dtype} need {want}")
        if t.name in header or t.name == "__metadata__":
            raise SafetensorsError(f"tensor name '{t.name}' is repeated or reserved")
        header[t.name] = {"dtype": t.dtype, "shape": [int(s) for s in t.shape], "data_offsets": [off, off + len(t.data)]}
        off += len(t.data)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * (-len(h) % 8)
    return b"".join([struct.pack("<Q", len(h)), h] + [bytes(t.data) for t in tensors])


def write(path, tensors, metadata=None):
    """Writes atomically (a temporary file renamed into place), creating parent directories."""
    blob = encode(tensors, metadata)
    d = os.path.dirname(os.path.abspath(path))
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".safetensors")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
