"""Checkpoint resolution and safe, torch-free loading; every bad input is one clear error."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from edge_m3.checkpoint import load_checkpoint, resolve_checkpoint
from edge_m3.cli import main
from edge_m3.errors import EdgeM3Error
from edge_m3.safeload import read_torch_archive


def _torch_state(path: Path) -> dict[str, np.ndarray]:
    import torch

    return {k: v.numpy() for k, v in torch.load(path, weights_only=True).items()}


def test_safetensors_and_bin_load_exactly(tiny_ckpt: Path, tiny_ckpt_bin: Path) -> None:
    from safetensors.numpy import load_file

    for ckpt_dir in (tiny_ckpt, tiny_ckpt_bin):
        ckpt = load_checkpoint(ckpt_dir)
        if (ckpt_dir / "model.safetensors").exists():
            ref = load_file(str(ckpt_dir / "model.safetensors"))
        else:
            ref = _torch_state(ckpt_dir / "pytorch_model.bin")
        for name in ckpt.tensors:
            if name.startswith(("colbert_linear", "sparse_linear")):
                continue
            stored = name if name in ref else "roberta." + name
            np.testing.assert_array_equal(ckpt.tensors[name], ref[stored])
        for head in ("colbert_linear", "sparse_linear"):
            want = _torch_state(ckpt_dir / f"{head}.pt")
            for key in ("weight", "bias"):
                np.testing.assert_array_equal(ckpt.tensors[f"{head}.{key}"], want[key])
        assert ckpt.colbert_dim == ckpt.config.hidden_size
        assert set(ckpt.source["files"]) == {"config.json", ckpt_dir.joinpath(
            "model.safetensors").name if (ckpt_dir / "model.safetensors").exists()
            else "pytorch_model.bin", "colbert_linear.pt", "sparse_linear.pt",
            "sentencepiece.bpe.model"}


def test_restricted_unpickler_reads_half_and_strided(tmp_path: Path) -> None:
    import torch

    base = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    state = {"t": base.t(), "h": base.half(), "b": base.bfloat16(), "i": torch.arange(5),
             "s": base[1:, 2:]}
    torch.save(state, tmp_path / "x.pt")
    got = read_torch_archive(tmp_path / "x.pt")
    for k, v in state.items():
        np.testing.assert_array_equal(got[k], v.float().numpy() if k == "b" else v.numpy())


class _Evil:
    def __reduce__(self):
        import os

        return (os.system, ("touch PWNED",))


def test_hostile_pickle_is_refused_and_not_run(ckpt_copy: Path, tmp_path: Path,
                                               monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    head = ckpt_copy / "sparse_linear.pt"
    with zipfile.ZipFile(head, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"weight": _Evil()}, protocol=2))
        z.writestr("archive/byteorder", "little")
    with pytest.raises(EdgeM3Error, match=r"sparse_linear.pt: refusing to unpickle '(posix|os)\.system'"):
        load_checkpoint(ckpt_copy)
    assert not (tmp_path / "PWNED").exists()
    assert main(["build", "--checkpoint", str(ckpt_copy), "--kits", "none", "-q",
                 "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sparse_linear.pt" in err
    assert not (tmp_path / "PWNED").exists() and not (tmp_path / "out").exists()


def test_legacy_pickle_refused(tmp_path: Path) -> None:
    f = tmp_path / "legacy.pt"
    f.write_bytes(pickle.dumps({"weight": 1}))
    with pytest.raises(EdgeM3Error, match="not a torch zip archive"):
        read_torch_archive(f)


@pytest.mark.parametrize("damage, needle", [
    ("missing_head", "colbert_linear.pt: missing"),
    ("truncated", "model.safetensors: truncated"),
    ("wrong_shape", "tensor 'encoder.layer.1.intermediate.dense.weight' has shape (32, 64), "
                    "expected (64, 32)"),
    ("missing_tensor", "tensor 'encoder.layer.0.output.LayerNorm.bias' missing"),
    ("bad_json", "config.json: not valid JSON"),
    ("missing_key", "config.json: missing key 'num_attention_heads'"),
    ("no_spm", "sentencepiece.bpe.model: missing"),
    ("head_shape", "sparse_linear.pt: tensor 'weight' has shape"),
])
def test_bad_checkpoints_give_one_line_and_exit_2(ckpt_copy: Path, tmp_path: Path, capsys,
                                                   damage: str, needle: str) -> None:
    from safetensors.numpy import load_file, save_file

    st = ckpt_copy / "model.safetensors"
    if damage == "missing_head":
        (ckpt_copy / "colbert_linear.pt").unlink()
    elif damage == "truncated":
        data = st.read_bytes()
        st.write_bytes(data[: len(data) // 2])
    elif damage in ("wrong_shape", "missing_tensor"):
        tensors = load_file(str(st))
        if damage == "wrong_shape":
            name = "encoder.layer.1.intermediate.dense.weight"
            tensors[name] = np.ascontiguousarray(tensors[name].T)
        else:
            del tensors["encoder.layer.0.output.LayerNorm.bias"]
        save_file(tensors, str(st))
    elif damage == "bad_json":
        (ckpt_copy / "config.json").write_text("{not json")
    elif damage == "missing_key":
        cfg = json.loads((ckpt_copy / "config.json").read_text())
        del cfg["num_attention_heads"]
        (ckpt_copy / "config.json").write_text(json.dumps(cfg))
    elif damage == "no_spm":
        (ckpt_copy / "sentencepiece.bpe.model").unlink()
    elif damage == "head_shape":
        import torch

        torch.save({"weight": torch.zeros(2, 32), "bias": torch.zeros(1)},
                   ckpt_copy / "sparse_linear.pt")
    with pytest.raises(EdgeM3Error) as info:
        load_checkpoint(ckpt_copy)
    assert needle in str(info.value)
    out = tmp_path / "out"
    assert main(["build", "--checkpoint", str(ckpt_copy), "--kits", "none", "-q",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    assert not out.exists()


def test_hub_id_offline_fails_fast(monkeypatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t0 = time.perf_counter()
    with pytest.raises(EdgeM3Error, match="pass a local snapshot directory with --checkpoint"):
        resolve_checkpoint("BAAI/bge-m3")
    assert time.perf_counter() - t0 < 10


def test_nonexistent_local_path(tmp_path: Path) -> None:
    with pytest.raises(EdgeM3Error, match="no such directory"):
        resolve_checkpoint(str(tmp_path / "missing"))
    with pytest.raises(EdgeM3Error, match="no such directory"):
        resolve_checkpoint("./not/here")


def test_builder_modules_do_not_import_torch() -> None:
    code = ("import sys, edge_m3.checkpoint, edge_m3.safeload, edge_m3.model, edge_m3.build, "
            "edge_m3.export_tflite, edge_m3.tokenizer, edge_m3.pipeline; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
