"""Torch-free, code-free readers of weight files into numpy.

`.bin`/`.pt` files are zip archives holding a pickle; unpickling them normally can run any
code the file names. The restricted unpickler here admits only tensor rebuilding, storage
types and plain containers, so a hostile checkpoint fails with an error instead of running.
"""

from __future__ import annotations

import pickle
import zipfile
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from edge_m3.errors import EdgeM3Error

# torch storage class name -> numpy dtype ("bfloat16" is widened to float32 after reading).
_STORAGE_DTYPES = {
    "FloatStorage": np.float32,
    "DoubleStorage": np.float64,
    "HalfStorage": np.float16,
    "BFloat16Storage": "bfloat16",
    "LongStorage": np.int64,
    "IntStorage": np.int32,
    "ShortStorage": np.int16,
    "CharStorage": np.int8,
    "ByteStorage": np.uint8,
    "BoolStorage": np.bool_,
}


class _StorageType:
    """Stand-in for a `torch.XStorage` class: only carries the dtype."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.dtype = _STORAGE_DTYPES[name]


def _rebuild_tensor(storage: np.ndarray, offset: int, size: tuple[int, ...],
                    stride: tuple[int, ...], *_: Any) -> np.ndarray:
    """numpy equivalent of torch._utils._rebuild_tensor_v2 (element offset and strides)."""
    if not size:
        return storage[offset:offset + 1].reshape(()).copy()
    item = storage.itemsize
    needed = offset + 1 + sum((n - 1) * s for n, s in zip(size, stride, strict=True))
    if any(n == 0 for n in size):
        return np.zeros(size, dtype=storage.dtype)
    if needed > storage.size:
        raise ValueError("tensor extends past its storage")
    view = np.lib.stride_tricks.as_strided(storage[offset:], shape=size,
                                           strides=[s * item for s in stride])
    return np.array(view)


def _rebuild_parameter(data: np.ndarray, *_: Any) -> np.ndarray:
    return data


_ALLOWED = {
    ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
    ("torch._utils", "_rebuild_tensor"): _rebuild_tensor,
    ("torch._utils", "_rebuild_parameter"): _rebuild_parameter,
    ("collections", "OrderedDict"): OrderedDict,
}


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, fh: Any, archive: zipfile.ZipFile, prefix: str, source: Path) -> None:
        super().__init__(fh)
        self.archive, self.prefix, self.source = archive, prefix, source
        self.byteorder = "little"

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _ALLOWED:
            return _ALLOWED[(module, name)]
        if module == "torch" and name in _STORAGE_DTYPES:
            return _StorageType(name)
        raise EdgeM3Error(f"{self.source}: refusing to unpickle '{module}.{name}' "
                          "(only tensors and plain containers are allowed)")

    def persistent_load(self, pid: Any) -> np.ndarray:
        if not (isinstance(pid, tuple) and pid and pid[0] == "storage"):
            raise EdgeM3Error(f"{self.source}: unsupported persistent id {pid!r:.60}")
        _, storage_type, key, _location, numel = pid
        if isinstance(storage_type, _StorageType):
            dtype = storage_type.dtype
        else:
            raise EdgeM3Error(f"{self.source}: unsupported storage type {storage_type!r:.60}")
        raw = self.archive.read(f"{self.prefix}/data/{key}")
        if dtype == "bfloat16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            arr = bits.view(np.float32)
        else:
            arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder(
                "<" if self.byteorder == "little" else ">"))
        if arr.size < int(numel):
            raise EdgeM3Error(f"{self.source}: storage {key} is truncated")
        return arr.astype(arr.dtype.newbyteorder("="), copy=False)


def read_torch_archive(path: Path) -> dict[str, np.ndarray]:
    """A `torch.save` zip archive's tensors as numpy arrays, without torch and without code."""
    path = Path(path)
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, OSError) as exc:
        raise EdgeM3Error(f"{path}: not a torch zip archive ({exc}); legacy pickles are "
                          "refused, re-save it with torch.save or convert to safetensors") from exc
    with archive:
        pkl = [n for n in archive.namelist() if n.endswith("/data.pkl") or n == "data.pkl"]
        if not pkl:
            raise EdgeM3Error(f"{path}: no data.pkl in the archive")
        prefix = pkl[0][: -len("/data.pkl")] if "/" in pkl[0] else ""
        unpickler = None
        try:
            with archive.open(pkl[0]) as fh:
                unpickler = _RestrictedUnpickler(fh, archive, prefix, path)
                order = f"{prefix}/byteorder"
                if order in archive.namelist():
                    unpickler.byteorder = archive.read(order).decode().strip()
                obj = unpickler.load()
        except EdgeM3Error:
            raise
        except Exception as exc:
            raise EdgeM3Error(f"{path}: cannot read the archive ({exc})") from exc
    if not isinstance(obj, Mapping):
        raise EdgeM3Error(f"{path}: expected a dict of tensors, found {type(obj).__name__}")
    out = {}
    for key, value in obj.items():
        if not isinstance(value, np.ndarray):
            raise EdgeM3Error(f"{path}: entry '{key}' is not a tensor")
        out[str(key)] = value
    return out


_ST_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8",
              "I32": "<i4", "I16": "<i2", "I8": "i1", "U8": "u1", "BOOL": "?"}


class SafetensorsFile(Mapping[str, np.ndarray]):
    """Lazy view of a safetensors file: shapes from the header, one tensor read at a time.

    Tensors are read with plain file reads rather than a memory map, so pages of tensors
    already handed over do not stay resident in this process (a 2.27 GB file would
    otherwise count in full towards peak RSS).
    """

    def __init__(self, path: Path) -> None:
        import json
        import struct

        self.path = Path(path)
        try:
            with open(self.path, "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(n))
        except Exception as exc:
            raise EdgeM3Error(f"{self.path}: not a readable safetensors file ({exc})") from exc
        header.pop("__metadata__", None)
        self._base = 8 + n
        self._header: dict[str, dict[str, Any]] = header
        for name, info in header.items():
            if info.get("dtype") not in _ST_DTYPES:
                raise EdgeM3Error(f"{self.path}: tensor '{name}' has unsupported dtype "
                                  f"{info.get('dtype')}")

    def shape(self, name: str) -> tuple[int, ...]:
        return tuple(int(d) for d in self._header[name]["shape"])

    def dtype(self, name: str) -> str:
        return str(self._header[name]["dtype"])

    def __getitem__(self, name: str) -> np.ndarray:
        info = self._header[name]
        start, end = info["data_offsets"]
        dtype = np.dtype(_ST_DTYPES[info["dtype"]])
        count = (end - start) // dtype.itemsize
        shape = self.shape(name)
        if count != int(np.prod(shape, dtype=np.int64)):
            raise EdgeM3Error(f"{self.path}: tensor '{name}' size does not match its shape")
        try:
            arr = np.fromfile(self.path, dtype=dtype, count=count, offset=self._base + start)
        except (OSError, ValueError) as exc:
            raise EdgeM3Error(f"{self.path}: tensor '{name}' cannot be read ({exc})") from exc
        if arr.size != count:
            raise EdgeM3Error(f"{self.path}: tensor '{name}' is truncated")
        if info["dtype"] == "BF16":
            arr = (arr.astype(np.uint32) << 16).view(np.float32)
        return arr.astype(arr.dtype.newbyteorder("="), copy=False).reshape(shape)

    def __iter__(self) -> Iterator[str]:
        return iter(self._header)

    def __len__(self) -> int:
        return len(self._header)


def check_safetensors_complete(path: Path) -> None:
    """Catch a truncated file up front: the header's last data offset must match the size."""
    import json
    import struct

    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise EdgeM3Error(f"{path}: truncated safetensors file (no header)")
        (n,) = struct.unpack("<Q", head)
        if n > size - 8:
            raise EdgeM3Error(f"{path}: truncated safetensors file (header past end)")
        try:
            header = json.loads(fh.read(n))
        except ValueError as exc:
            raise EdgeM3Error(f"{path}: corrupt safetensors header ({exc})") from exc
    end = max((v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"),
              default=0)
    if 8 + n + end != size:
        raise EdgeM3Error(f"{path}: truncated or padded safetensors file "
                          f"({size} bytes, header says {8 + n + end})")
