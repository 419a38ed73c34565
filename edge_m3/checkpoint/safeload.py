"""Torch-free, code-free readers of weight files into numpy.

`.bin`/`.pt` files are zip archives holding a pickle; unpickling them normally can run any
code the file names. The restricted unpickler here admits only tensor rebuilding, storage
types and plain containers, so a hostile checkpoint fails with an error instead of running.
Both readers are lazy: shapes and dtypes come from the pickle / header, and a tensor's bytes
are read only when it is indexed, so a 2.27 GB model is never held twice.
"""

from __future__ import annotations

import io
import json
import math
import pickle
import pickletools
import struct
import zipfile
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from edge_m3.errors import EdgeM3Error, one_line

# Dtype names used by both readers: numpy names, plus "bfloat16" (widened to float32 on read).
FLOAT_DTYPES = frozenset({"float16", "bfloat16", "float32", "float64"})

# torch storage class (as torch.save names it) -> dtype name.
_TORCH_STORAGES = {
    "FloatStorage": "float32",
    "DoubleStorage": "float64",
    "HalfStorage": "float16",
    "BFloat16Storage": "bfloat16",
    "LongStorage": "int64",
    "IntStorage": "int32",
    "ShortStorage": "int16",
    "CharStorage": "int8",
    "ByteStorage": "uint8",
    "BoolStorage": "bool",
    "ComplexFloatStorage": "complex64",
    "ComplexDoubleStorage": "complex128",
    "UntypedStorage": "uint8",  # torch 2.x: raw bytes (`torch.storage.UntypedStorage`)
}

_CHUNK = 1 << 24  # bytes per read from a zip record

# safetensors dtype tag -> dtype name.
_ST_DTYPES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16",
              "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
              "BOOL": "bool"}


def _np_dtype(name: str, byteorder: str = "<") -> np.dtype:
    """The on-disk numpy dtype of a dtype name (bfloat16 is read as its raw 16 bits)."""
    return np.dtype("u2" if name == "bfloat16" else name).newbyteorder(byteorder)


def _to_native(arr: np.ndarray, dtype_name: str) -> np.ndarray:
    """Native byte order; bfloat16 bits widened to float32 (exact: bf16 is truncated fp32)."""
    if dtype_name == "bfloat16":
        return (arr.astype(np.uint32) << 16).view(np.float32)
    return arr.astype(arr.dtype.newbyteorder("="), copy=False)


# --- torch zip archives ----------------------------------------------------------------------

# Tuples: a pickle's BUILD opcode cannot rewrite them after validation (a frozen dataclass
# can be: its generated __setstate__ would accept any state).
class _Inert(NamedTuple):
    """Stand-in for an admitted torch class: carries a name, cannot be called or run."""

    kind: str  # "storage" or "tensor"
    name: str


class _StorageRef(NamedTuple):
    record: str  # zip member holding the bytes
    dtype: str
    numel: int


class _TensorRef(NamedTuple):
    storage: _StorageRef
    offset: int
    size: tuple[int, ...]
    stride: tuple[int, ...]


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, tuple | list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value):
        raise ValueError(f"bad tensor {what} {value!r:.60}")
    return tuple(value)


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any, *_: Any) -> _TensorRef:
    """torch._utils._rebuild_tensor_v2, minus the reading: remember where the tensor lies."""
    if not isinstance(storage, _StorageRef):
        raise ValueError("tensor without a storage")
    (offset,) = _ints((offset,), "offset")
    size, stride = _ints(size, "size"), _ints(stride, "stride")
    if len(size) != len(stride):
        raise ValueError("tensor size and stride differ in length")
    if all(size):
        last = offset + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
        if last >= storage.numel:
            raise ValueError("tensor extends past its storage")
        if math.prod(size) > max(16 * storage.numel, 1 << 20):  # stride-0 blow-up
            raise ValueError("tensor is far larger than its storage")
    return _TensorRef(storage, offset, size, stride)


def _rebuild_parameter(data: Any, *_: Any) -> Any:
    return data


def _rebuild_from_type(func: Any, new_type: Any, args: Any, _state: Any = None) -> Any:
    """torch._tensor._rebuild_from_type_v2: only for plain Tensor / Parameter, state ignored."""
    if func not in (_rebuild_tensor, _rebuild_parameter) or not (
            isinstance(new_type, _Inert) and new_type.kind == "tensor") or not isinstance(args, tuple):
        raise ValueError("unsupported tensor subclass")
    return func(*args)


_FUNCTIONS = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("torch._utils", "_rebuild_parameter_with_state"): _rebuild_parameter,
    ("torch._tensor", "_rebuild_from_type_v2"): _rebuild_from_type,
    ("collections", "OrderedDict"): OrderedDict,
}
_TENSOR_CLASSES = {("torch", "Tensor"), ("torch._tensor", "Tensor"), ("torch.nn.parameter", "Parameter")}


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves only the globals above; anything else fails before any of it can be called."""

    def __init__(self, fh: Any, archive: zipfile.ZipFile, prefix: str, source: Path,
                 byteorder: str) -> None:
        super().__init__(fh)
        self.archive, self.prefix, self.source, self.byteorder = archive, prefix, source, byteorder
        self.storages: dict[str, _StorageRef] = {}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _FUNCTIONS:
            return _FUNCTIONS[(module, name)]
        if (module, name) in _TENSOR_CLASSES:
            return _Inert("tensor", name)
        if module in ("torch", "torch.storage") and name in _TORCH_STORAGES and (
                name == "UntypedStorage" or module == "torch"):
            return _Inert("storage", name)
        raise EdgeM3Error(f"{self.source}: refusing to unpickle {f'{module}.{name}'!r:.80} "
                          "(only tensors and plain containers are allowed)")

    def persistent_load(self, pid: Any) -> _StorageRef:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise EdgeM3Error(f"{self.source}: unsupported persistent id {pid!r:.60}")
        _, storage_type, key, _location, numel = pid
        if not (isinstance(storage_type, _Inert) and storage_type.kind == "storage"):
            raise EdgeM3Error(f"{self.source}: unsupported storage type {storage_type!r:.60}")
        if not isinstance(key, str) or not isinstance(numel, int) or numel < 0:
            raise EdgeM3Error(f"{self.source}: bad storage reference {pid!r:.60}")
        if key in self.storages:
            return self.storages[key]
        dtype = _TORCH_STORAGES[storage_type.name]
        record = f"{self.prefix}/data/{key}"
        try:
            stored = self.archive.getinfo(record).file_size
        except KeyError:
            raise EdgeM3Error(f"{self.source}: storage record {record!r:.80} missing") from None
        if stored < numel * _np_dtype(dtype).itemsize:
            raise EdgeM3Error(f"{self.source}: storage record {record!r:.80} is truncated")
        ref = self.storages[key] = _StorageRef(record, dtype, numel)
        return ref


def _open_zip(path: Path) -> zipfile.ZipFile:
    try:
        with open(path, "rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise EdgeM3Error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if magic[:2] != b"PK":
        kind = "a legacy (pre-zip) torch pickle" if magic[:1] == b"\x80" else "not a zip file"
        raise EdgeM3Error(f"{path}: not a torch zip archive ({kind}); legacy pickles are refused, "
                          "re-save it with torch.save or convert it to safetensors")
    try:
        return zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise EdgeM3Error(f"{path}: corrupt or truncated torch zip archive ({one_line(exc)})") from None


_MAX_PICKLE = 1 << 28  # a state dict's data.pkl: tens of KB for BGE-M3's 400 tensors


_MEMO_PUTS = frozenset({"PUT", "BINPUT", "LONG_BINPUT"})


def _pickle_bytes(archive: zipfile.ZipFile, name: str, source: Path) -> bytes:
    """data.pkl, its length fields checked against its size by a walk of its opcodes before the
    unpickler runs: CPython's allocates a BYTEARRAY8's declared length before reading it, so a
    length of 2^31 in a few bytes of pickle would allocate 2 GB. Likewise a memo index: CPython's
    unpickler grows its memo array to twice the index a PUT names (LONG_BINPUT 531392353 in a
    12-byte pickle: 8 GB), while a pickler numbers its memo 0, 1, 2..., one entry per object, so
    an index is always below the number of opcodes before it."""
    if archive.getinfo(name).file_size > _MAX_PICKLE:
        raise EdgeM3Error(f"{source}: '{name}' is larger than {_MAX_PICKLE >> 20} MB; not a state dict")
    raw = archive.read(name)
    # ValueError at a length past the end, an unknown opcode
    for n, (op, arg, _pos) in enumerate(pickletools.genops(raw)):
        if op.name in _MEMO_PUTS and not 0 <= arg < n:
            raise EdgeM3Error(f"{source}: '{name}' stores memo entry {arg} after {n} opcodes; "
                              "no pickler numbers its memo so, refused")
    return raw


class TorchArchive(Mapping[str, np.ndarray]):
    """Lazy view of a `torch.save` state dict: the pickle is read up front, tensor bytes on demand."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        with _open_zip(self.path) as archive:
            pkls = [n for n in archive.namelist() if n.endswith("data.pkl")
                    and n.count("/") == 1 and n.split("/")[1] == "data.pkl"]
            if len(pkls) != 1:
                raise EdgeM3Error(f"{self.path}: expected one '<name>/data.pkl' in the archive, "
                                  f"found {len(pkls)}")
            prefix = pkls[0].split("/")[0]
            byteorder = "little"
            if f"{prefix}/byteorder" in archive.namelist():
                with archive.open(f"{prefix}/byteorder") as fh:  # "little" or "big": 16 bytes suffice
                    byteorder = fh.read(16).decode("ascii", "replace").strip()
            if byteorder not in ("little", "big"):
                raise EdgeM3Error(f"{self.path}: unknown byteorder {byteorder[:20]!r}")
            self._order = "<" if byteorder == "little" else ">"
            try:
                raw = _pickle_bytes(archive, pkls[0], self.path)
                obj = _RestrictedUnpickler(io.BytesIO(raw), archive, prefix, self.path, byteorder).load()
            except EdgeM3Error:
                raise
            except Exception as exc:
                raise EdgeM3Error(f"{self.path}: cannot read the archive's pickle ({one_line(exc)})") from None
        if not isinstance(obj, Mapping):
            raise EdgeM3Error(f"{self.path}: expected a dict of tensors, found {type(obj).__name__}")
        self._refs: dict[str, _TensorRef] = {}
        for key, value in obj.items():
            if isinstance(value, _StorageRef):  # a bare storage: a flat tensor
                value = _TensorRef(value, 0, (value.numel,), (1,))
            if not isinstance(value, _TensorRef):
                raise EdgeM3Error(f"{self.path}: entry {str(key)!r:.80} is not a tensor")
            self._refs[str(key)] = value

    def shape(self, name: str) -> tuple[int, ...]:
        return self._refs[name].size

    def dtype(self, name: str) -> str:
        return self._refs[name].storage.dtype

    def __getitem__(self, name: str) -> np.ndarray:
        ref = self._refs[name]
        st = ref.storage
        disk = _np_dtype(st.dtype, self._order)
        buf = np.empty(st.numel * disk.itemsize, dtype=np.uint8)
        try:
            with zipfile.ZipFile(self.path) as archive, archive.open(st.record) as fh:
                view, done = memoryview(buf), 0  # chunked: readinto would copy via one big bytes
                while done < buf.size and (n := fh.readinto(view[done:done + _CHUNK])):
                    done += n
        except (zipfile.BadZipFile, OSError, KeyError) as exc:
            raise EdgeM3Error(f"{self.path}: tensor {name!r} cannot be read ({one_line(exc)})") from None
        if done < buf.size:
            raise EdgeM3Error(f"{self.path}: tensor {name!r} is truncated")
        try:
            return _materialize(_to_native(buf.view(disk), st.dtype), ref)
        except (ValueError, TypeError) as exc:
            raise EdgeM3Error(f"{self.path}: tensor {name!r} cannot be read ({one_line(exc)})") from None

    def __contains__(self, name: object) -> bool:  # Mapping's default would read the tensor
        return name in self._refs

    def __iter__(self) -> Iterator[str]:
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)


def _materialize(flat: np.ndarray, ref: _TensorRef) -> np.ndarray:
    """The tensor's elements of its storage: a reshape when contiguous, else a strided copy."""
    n = int(np.prod(ref.size, dtype=np.int64))
    if n == 0:
        return np.zeros(ref.size, dtype=flat.dtype)
    if ref.offset + sum((d - 1) * s for d, s in zip(ref.size, ref.stride, strict=True)) >= flat.size:
        raise ValueError("tensor extends past its storage")  # checked at unpickling too
    contiguous, expect = True, 1
    for dim, step in zip(reversed(ref.size), reversed(ref.stride), strict=True):
        if dim != 1 and step != expect:
            contiguous = False
        expect *= dim
    if contiguous:
        part = flat[ref.offset:ref.offset + n].reshape(ref.size)
        return part if n == flat.size else part.copy()  # don't pin a larger shared storage
    view = np.lib.stride_tricks.as_strided(flat[ref.offset:], shape=ref.size,
                                           strides=[s * flat.itemsize for s in ref.stride],
                                           writeable=False)
    return np.array(view)


def read_torch_archive(path: Path | str) -> dict[str, np.ndarray]:
    """A `torch.save` zip archive's tensors as numpy arrays, without torch and without code."""
    archive = TorchArchive(path)
    return {name: archive[name] for name in archive}


# --- safetensors ---------------------------------------------------------------------------

class SafetensorsFile(Mapping[str, np.ndarray]):
    """Lazy view of a safetensors file: shapes from the header, one tensor read at a time.

    The header is validated by `safetensors.safe_open` (offsets, coverage, dtypes). Tensors
    are then read with plain file reads rather than through its memory map, so pages of
    tensors already handed over do not stay resident in this process (a 2.27 GB file would
    otherwise count in full towards peak RSS), and bf16 works without torch.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = path = Path(path)
        header, self._base = _read_header(path)
        try:
            from safetensors import safe_open

            with safe_open(str(path), framework="np") as f:
                shapes = {k: tuple(int(d) for d in f.get_slice(k).get_shape()) for k in f.keys()}
        except Exception as exc:  # SafetensorError is not importable under a stable name
            raise EdgeM3Error(f"{path}: corrupt safetensors file ({one_line(exc)})") from None
        self._shapes = shapes
        self._header = {k: header[k] for k in shapes}

    def shape(self, name: str) -> tuple[int, ...]:
        return self._shapes[name]

    def dtype(self, name: str) -> str:
        tag = str(self._header[name]["dtype"])
        return _ST_DTYPES.get(tag, tag)

    def __getitem__(self, name: str) -> np.ndarray:
        info = self._header[name]
        dtype_name = self.dtype(name)
        if info["dtype"] not in _ST_DTYPES:
            raise EdgeM3Error(f"{self.path}: tensor {name!r} has unsupported dtype {dtype_name}")
        disk = _np_dtype(dtype_name)
        start, end = info["data_offsets"]
        count = (end - start) // disk.itemsize
        try:
            arr = np.fromfile(self.path, dtype=disk, count=count, offset=self._base + start)
        except (OSError, ValueError) as exc:
            raise EdgeM3Error(f"{self.path}: tensor {name!r} cannot be read ({one_line(exc)})") from None
        if arr.size != count:
            raise EdgeM3Error(f"{self.path}: tensor {name!r} is truncated")
        return _to_native(arr, dtype_name).reshape(self._shapes[name])

    def __contains__(self, name: object) -> bool:  # Mapping's default would read the tensor
        return name in self._shapes

    def __iter__(self) -> Iterator[str]:
        return iter(self._shapes)

    def __len__(self) -> int:
        return len(self._shapes)


def _read_header(path: Path) -> tuple[dict[str, dict[str, Any]], int]:
    """The JSON header and where data starts; a short file is reported as truncated."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as fh:
            head = fh.read(8)
            if len(head) < 8:
                raise EdgeM3Error(f"{path}: truncated safetensors file (no header)")
            (n,) = struct.unpack("<Q", head)
            if n > size - 8:
                raise EdgeM3Error(f"{path}: truncated safetensors file (header past the end)")
            raw = fh.read(n)
    except OSError as exc:
        raise EdgeM3Error(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        header = json.loads(raw)
        header.pop("__metadata__", None)
        end = max((int(v["data_offsets"][1]) for v in header.values()), default=0)
    except (ValueError, TypeError, KeyError, IndexError, AttributeError, RecursionError) as exc:
        raise EdgeM3Error(f"{path}: corrupt safetensors header ({one_line(exc)})") from None
    if 8 + n + end > size:
        raise EdgeM3Error(f"{path}: truncated safetensors file ({size} bytes, header says "
                          f"{8 + n + end})")
    return header, 8 + n


def read_safetensors(path: Path | str) -> SafetensorsFile:
    """A safetensors file as a lazy Mapping; a corrupt or truncated file fails here, by name."""
    return SafetensorsFile(path)
