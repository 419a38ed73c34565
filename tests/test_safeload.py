"""Torch-free weight readers: exact values, lazy reads, and hostile or damaged files refused."""

from __future__ import annotations

import pickle
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch  # tests only: the reference the torch-free readers are compared with

from edge_m3.checkpoint.safeload import (
    SafetensorsFile,
    TorchArchive,
    read_safetensors,
    read_torch_archive,
)
from edge_m3.errors import EdgeM3Error


def _torch_load(path: Path) -> dict[str, np.ndarray]:
    return {k: (v.float() if v.dtype == torch.bfloat16 else v).detach().numpy()
            for k, v in torch.load(path, weights_only=True).items()}


def _assert_same(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> None:
    assert set(got) == set(want)
    for k, v in want.items():
        assert got[k].dtype == v.dtype and got[k].shape == v.shape, k
        np.testing.assert_array_equal(got[k], v, err_msg=k)


def test_bin_and_heads_equal_torch_load(tiny_ckpt_bin: Path, tmp_path: Path) -> None:
    binf = tiny_ckpt_bin / "pytorch_model.bin"
    assert not (tiny_ckpt_bin / "model.safetensors").exists()
    for f in (binf, tiny_ckpt_bin / "colbert_linear.pt", tiny_ckpt_bin / "sparse_linear.pt"):
        _assert_same(read_torch_archive(f), _torch_load(f))


def test_safetensors_equal_torch_load(tiny_ckpt: Path) -> None:
    from safetensors.torch import load_file

    want = {k: v.numpy() for k, v in load_file(str(tiny_ckpt / "model.safetensors")).items()}
    st = read_safetensors(tiny_ckpt / "model.safetensors")
    _assert_same({k: st[k] for k in st}, want)
    assert all(st.shape(k) == want[k].shape for k in want)


def test_dtypes_strides_offsets_and_wrappers(tmp_path: Path) -> None:
    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    shared = torch.arange(10, dtype=torch.float64)
    state = {
        "t": base.t(), "s": base[1:, 2:], "h": base.half(), "b": base.bfloat16() / 3,
        "i": torch.arange(5), "i32": torch.arange(4, dtype=torch.int32), "u8": torch.arange(3).byte(),
        "bool": torch.tensor([True, False]), "scalar": torch.tensor(2.5), "empty": torch.zeros(0, 3),
        "p": torch.nn.Parameter(torch.ones(2, 2)), "view1": shared[2:5], "view2": shared[::3],
        "col": base[:, 1], "expand": torch.ones(1, 3).expand(4, 3),
    }
    torch.save(state, tmp_path / "x.pt")
    got = read_torch_archive(tmp_path / "x.pt")
    _assert_same(got, _torch_load(tmp_path / "x.pt"))
    assert got["h"].dtype == np.float16 and got["b"].dtype == np.float32  # bf16 widened exactly
    got["view1"][0] = -1  # writable, and not aliasing the other tensor of the same storage
    assert got["view2"][1] == 3


def test_lazy_archive_reads_shapes_without_data(tmp_path: Path, monkeypatch) -> None:
    torch.save({"w": torch.ones(3, 5, dtype=torch.float16)}, tmp_path / "w.pt")
    monkeypatch.setattr("edge_m3.checkpoint.safeload._materialize", lambda *a: pytest.fail("data read"))
    arch = TorchArchive(tmp_path / "w.pt")
    assert (arch.shape("w"), arch.dtype("w"), list(arch)) == ((3, 5), "float16", ["w"])
    monkeypatch.setattr(np, "fromfile", lambda *a, **k: pytest.fail("data read"))
    st_path = tmp_path / "w.safetensors"
    from safetensors.numpy import save_file

    save_file({"a": np.ones((2, 3), np.float32)}, str(st_path))
    st = SafetensorsFile(st_path)
    assert (st.shape("a"), st.dtype("a"), len(st)) == ((2, 3), "float32", 1)


def test_big_endian_archive(tmp_path: Path) -> None:
    torch.save({"w": torch.arange(6, dtype=torch.float32).reshape(2, 3)}, tmp_path / "le.pt")
    src, dst = zipfile.ZipFile(tmp_path / "le.pt"), tmp_path / "be.pt"
    with src, zipfile.ZipFile(dst, "w") as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename.endswith("/byteorder"):
                data = b"big"
            elif "/data/" in info.filename:
                data = np.frombuffer(data, "<f4").astype(">f4").tobytes()
            out.writestr(info.filename, data)
    got = read_torch_archive(dst)["w"]
    assert got.dtype == np.float32 and got.dtype.isnative
    np.testing.assert_array_equal(got, np.arange(6, dtype=np.float32).reshape(2, 3))


def test_safetensors_bf16_and_fp16(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    b = torch.randn(4, 3).bfloat16()
    save_file({"b": b, "h": torch.ones(2).half()}, str(tmp_path / "m.safetensors"))
    st = read_safetensors(tmp_path / "m.safetensors")
    assert st.dtype("b") == "bfloat16" and st["b"].dtype == np.float32
    np.testing.assert_array_equal(st["b"], b.float().numpy())
    assert st["h"].dtype == np.float16


class _Sub(torch.Tensor):
    """Module level so torch.save can pickle it; the reader must refuse it."""


class _Reduce:
    def __init__(self, func, *args) -> None:
        self.func, self.args = func, args

    def __reduce__(self):
        return (self.func, self.args)


def _hostile_archive(path: Path, payload: object) -> Path:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"weight": payload}, protocol=2))
        z.writestr("archive/byteorder", "little")
    return path


@pytest.mark.parametrize("make", ["os.system", "builtins.eval", "subprocess.Popen"])
def test_hostile_globals_refused_before_running(tmp_path: Path, monkeypatch, make: str) -> None:
    import builtins
    import os

    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "PWNED"
    payload = {
        "os.system": _Reduce(os.system, f"touch {marker}"),
        "builtins.eval": _Reduce(builtins.eval, f"open({str(marker)!r}, 'w')"),
        "subprocess.Popen": _Reduce(subprocess.Popen, ["touch", str(marker)]),
    }[make]
    f = _hostile_archive(tmp_path / "evil.pt", payload)
    name = make.split(".")[1]
    with pytest.raises(EdgeM3Error, match=rf"evil\.pt: refusing to unpickle '[\w.]+\.{name}'") as info:
        read_torch_archive(f)
    assert "\n" not in str(info.value)
    assert not marker.exists()


def test_tensor_subclass_refused(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(2).as_subclass(_Sub)}, tmp_path / "sub.pt")
    with pytest.raises(EdgeM3Error, match=r"refusing to unpickle '[\w.]+\._Sub'"):
        read_torch_archive(tmp_path / "sub.pt")


def test_archive_cannot_rewrite_validated_refs(tmp_path: Path) -> None:
    """A BUILD opcode aimed at a tensor reference must not move it outside its storage."""
    torch.save({"w": torch.ones(2)}, tmp_path / "ok.pt")
    z = zipfile.ZipFile(tmp_path / "ok.pt")
    prefix = z.namelist()[0].split("/")[0]
    pkl = z.read(f"{prefix}/data.pkl")
    # Insert `{'offset': 10**9}` + BUILD right before the final SETITEM(S) of the dict.
    assert pkl[-1:] == b"." and pkl[-2:-1] in (b"s", b"u")
    tail = len(pkl) - 2
    evil = pkl[:tail] + b"}(X\x06\x00\x00\x00offsetJ\x00\xca\x9a;ub" + pkl[tail:]
    with z, zipfile.ZipFile(tmp_path / "evil.pt", "w") as out:
        for info in z.infolist():
            out.writestr(info.filename, evil if info.filename.endswith("data.pkl") else z.read(info))
    with pytest.raises(EdgeM3Error, match="evil.pt: cannot read the archive's pickle"):
        read_torch_archive(tmp_path / "evil.pt")


@pytest.mark.parametrize("pkl", [b"\x80\x02}rag\xac\x1f\x89u}.", b"\x80\x02}p531392353\n.", b"\x80\x02}q\xff."])
def test_memo_index_past_the_pickle_refused_without_allocating(tmp_path: Path, pkl: bytes) -> None:
    """LONG_BINPUT 531392353 (the first: 12 bytes) made CPython's unpickler grow its memo array to
    8 GB (issue 38, found from a `torch_pickle` fuzz run); PUT and BINPUT name entries the same way.
    A pickler numbers its memo 0, 1, 2...: an index past the opcodes before it is refused."""
    import tracemalloc

    with zipfile.ZipFile(tmp_path / "memo.pt", "w") as z:
        z.writestr("archive/data.pkl", pkl)
    tracemalloc.start()
    try:
        with pytest.raises(EdgeM3Error, match=r"memo\.pt: 'archive/data\.pkl' stores memo entry \d+ after "
                                              r"\d+ opcodes") as info:
            read_torch_archive(tmp_path / "memo.pt")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "\n" not in str(info.value)
    assert peak < 16 << 20, peak
    torch.save({f"w{i}": torch.full((2,), float(i)) for i in range(300)}, tmp_path / "many.pt")
    _assert_same(read_torch_archive(tmp_path / "many.pt"), _torch_load(tmp_path / "many.pt"))  # LONG_BINPUTs


def test_legacy_truncated_and_non_archives_refused(tmp_path: Path) -> None:
    legacy = tmp_path / "legacy.pt"
    torch.save({"w": torch.ones(2)}, legacy, _use_new_zipfile_serialization=False)
    with pytest.raises(EdgeM3Error, match="legacy.pt: not a torch zip archive .*legacy"):
        read_torch_archive(legacy)
    torch.save({"w": torch.ones(200)}, tmp_path / "full.pt")
    data = (tmp_path / "full.pt").read_bytes()
    (tmp_path / "cut.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(EdgeM3Error, match="cut.pt: corrupt or truncated"):
        read_torch_archive(tmp_path / "cut.pt")
    (tmp_path / "text.pt").write_text("hello")
    with pytest.raises(EdgeM3Error, match="text.pt: not a torch zip archive"):
        read_torch_archive(tmp_path / "text.pt")
    with zipfile.ZipFile(tmp_path / "nopkl.pt", "w") as z:
        z.writestr("archive/other", b"x")
    with pytest.raises(EdgeM3Error, match="nopkl.pt: expected one"):
        read_torch_archive(tmp_path / "nopkl.pt")


def test_storage_record_missing_or_short(tmp_path: Path) -> None:
    torch.save({"w": torch.ones(8)}, tmp_path / "ok.pt")
    src = zipfile.ZipFile(tmp_path / "ok.pt")
    for what in ("missing", "short"):
        dst = tmp_path / f"{what}.pt"
        with zipfile.ZipFile(dst, "w") as out:
            for info in src.infolist():
                if "/data/" in info.filename:
                    if what == "missing":
                        continue
                    out.writestr(info.filename, src.read(info)[:4])
                else:
                    out.writestr(info.filename, src.read(info))
        with pytest.raises(EdgeM3Error, match=f"{what}.pt: storage record .* (missing|truncated)"):
            TorchArchive(dst)
    src.close()


@pytest.mark.parametrize("damage, needle", [
    ("cut_data", "truncated safetensors file"),
    ("cut_header", "truncated safetensors file"),
    ("tiny", "truncated safetensors file (no header)"),
    ("garbage_header", "corrupt safetensors header"),
    ("padded", "corrupt safetensors file"),
])
def test_damaged_safetensors(tmp_path: Path, damage: str, needle: str) -> None:
    from safetensors.numpy import save_file

    f = tmp_path / "model.safetensors"
    save_file({"a": np.ones((4, 4), np.float32), "b": np.zeros(3, np.float16)}, str(f))
    data = f.read_bytes()
    n = int.from_bytes(data[:8], "little")
    f.write_bytes({
        "cut_data": data[:-5],
        "cut_header": data[: 8 + n // 2],
        "tiny": data[:5],
        "garbage_header": data[:8] + b"{" * n + data[8 + n:],
        "padded": data + b"\0" * 16,
    }[damage])
    with pytest.raises(EdgeM3Error) as info:
        read_safetensors(f)
    assert str(info.value).startswith(f"{f}: ") and needle in str(info.value)
    assert "\n" not in str(info.value)


def test_modules_do_not_import_torch() -> None:
    code = "import sys, edge_m3.checkpoint, edge_m3.checkpoint.safeload; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
