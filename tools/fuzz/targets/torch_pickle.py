"""pytorch_model.bin: safeload's restricted unpickler. The input is the archive's data.pkl; the
zip around it (stored, so no CRC to defeat) holds fixed storage records `0`..`3`."""

from __future__ import annotations

import zipfile

from edge_m3.checkpoint.safeload import TorchArchive
from tools.fuzz.harness import scratch

RECORD_BYTES = 1024  # each of archive/data/0..3: a seed's storages must fit
RECORDS = 4


def archive(pickle_bytes: bytes, path: str) -> None:
    """The torch.save layout around `pickle_bytes` (also what make_seeds checks its seeds with)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
        z.writestr("archive/data.pkl", pickle_bytes)
        z.writestr("archive/byteorder", "little")
        for i in range(RECORDS):
            z.writestr(f"archive/data/{i}", bytes(range(256)) * (RECORD_BYTES // 256))


def run(data: bytes) -> None:
    path = scratch() / "pytorch_model.bin"
    archive(data, str(path))
    ta = TorchArchive(path)
    for name in ta:
        arr = ta[name]
        assert arr.shape == ta.shape(name), (name, arr.shape, ta.shape(name))
