"""Checkpoint resolution and safe, torch-free loading; every bad input is one clear error."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil
import socket
import subprocess
import sys
import zipfile
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

from edge_m3.checkpoint import ModelConfig, expected_shapes, load_checkpoint, resolve_checkpoint
from edge_m3.checkpoint.safeload import SafetensorsFile, TorchArchive
from edge_m3.cli import main
from edge_m3.errors import EdgeM3Error, OptionError


def _torch_state(path: Path) -> dict[str, np.ndarray]:
    import torch

    return {k: v.numpy() for k, v in torch.load(path, weights_only=True).items()}


def _write_bin(ckpt: Path, prefix: str = "") -> Path:
    """Replace model.safetensors by a `torch.save`d state dict, keys optionally prefixed."""
    import torch
    from safetensors.torch import load_file

    st = ckpt / "model.safetensors"
    sd = OrderedDict((prefix + k, v) for k, v in load_file(str(st)).items())
    sd._metadata = OrderedDict({"": {"version": 1}})  # type: ignore[attr-defined]
    torch.save(sd, ckpt / "pytorch_model.bin")
    st.unlink()
    return ckpt / "pytorch_model.bin"


@pytest.mark.parametrize("weights", ["safetensors", "bin", "bin-roberta-prefix"])
def test_weights_and_heads_load_exactly(tiny_ckpt: Path, tmp_path: Path, weights: str) -> None:
    ckpt_dir = tmp_path / "ckpt"
    shutil.copytree(tiny_ckpt, ckpt_dir)
    if weights == "safetensors":
        from safetensors.torch import load_file

        weights_file = ckpt_dir / "model.safetensors"
        ref = {k: v.numpy() for k, v in load_file(str(weights_file)).items()}
    else:
        weights_file = _write_bin(ckpt_dir, "roberta." if "prefix" in weights else "")
        ref = _torch_state(weights_file)
    ckpt = load_checkpoint(ckpt_dir)
    encoder_names = [n for n in ckpt.tensors if not n.startswith(("colbert_linear", "sparse_linear"))]
    assert encoder_names == list(expected_shapes(ckpt.config))  # pooler.* left out
    for name in encoder_names:
        stored = name if name in ref else "roberta." + name
        np.testing.assert_array_equal(ckpt.tensors[name], ref[stored])
        assert ckpt.tensors[name].dtype == ref[stored].dtype
    for head in ("colbert_linear", "sparse_linear"):
        want = _torch_state(ckpt_dir / f"{head}.pt")
        for key in ("weight", "bias"):
            np.testing.assert_array_equal(ckpt.tensors[f"{head}.{key}"], want[key])
    assert ckpt.colbert_dim == ckpt.config.hidden_size
    assert ckpt.tokenizer_path == ckpt_dir / "sentencepiece.bpe.model"
    files = {"config.json", weights_file.name, "colbert_linear.pt", "sparse_linear.pt",
             "sentencepiece.bpe.model"}
    assert ckpt.source["files"] == {
        f: hashlib.sha256((ckpt_dir / f).read_bytes()).hexdigest() for f in files}
    assert ckpt.source["id"] == str(ckpt_dir) and ckpt.source["revision"] is None


def test_validation_reads_headers_only(ckpt_copy: Path, monkeypatch) -> None:
    """Only the two small heads are read; encoder weights wait until they are indexed."""
    read_archive = TorchArchive.__getitem__

    def no_read(self, name):
        if self.path.name.endswith("_linear.pt"):
            return read_archive(self, name)
        raise AssertionError(f"validation read tensor {name}")

    monkeypatch.setattr(SafetensorsFile, "__getitem__", no_read)
    monkeypatch.setattr(TorchArchive, "__getitem__", no_read)
    load_checkpoint(ckpt_copy, {"id": "BAAI/bge-m3", "revision": "abc"})
    _write_bin(ckpt_copy)
    ckpt = load_checkpoint(ckpt_copy, {"id": "BAAI/bge-m3", "revision": "abc"})
    assert ckpt.source["id"] == "BAAI/bge-m3" and ckpt.source["revision"] == "abc"


def test_safetensors_preferred_over_bin(ckpt_copy: Path) -> None:
    (ckpt_copy / "pytorch_model.bin").write_bytes(b"not even a zip")
    ckpt = load_checkpoint(ckpt_copy)
    assert "model.safetensors" in ckpt.source["files"]
    assert "pytorch_model.bin" not in ckpt.source["files"]


def test_colbert_dim_may_differ_from_hidden(ckpt_copy: Path) -> None:
    import torch

    torch.save({"weight": torch.randn(16, 32), "bias": torch.zeros(16)}, ckpt_copy / "colbert_linear.pt")
    ckpt = load_checkpoint(ckpt_copy)
    assert ckpt.config.hidden_size == 32 and ckpt.colbert_dim == 16


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


@pytest.mark.parametrize("damage, needle", [
    ("missing_head", "colbert_linear.pt: missing"),
    ("truncated", "model.safetensors: truncated"),
    ("wrong_shape", "model.safetensors: tensor 'encoder.layer.1.intermediate.dense.weight' has shape "
                    "(32, 64), expected (64, 32) from config.json"),
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
    assert needle in str(info.value) and "\n" not in str(info.value)
    out = tmp_path / "out"
    assert main(["build", "--checkpoint", str(ckpt_copy), "--kits", "none", "-q",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    assert not out.exists()


@pytest.mark.parametrize("damage, needle", [
    ("first_of_two", "tensor 'embeddings.word_embeddings.weight' has shape (7, 32)"),
    ("int_dtype", "tensor 'embeddings.LayerNorm.bias' has dtype int32, expected float32"),
    ("missing_sparse", "sparse_linear.pt: missing"),
    ("head_int", "colbert_linear.pt: tensor 'bias' has dtype int64"),
    ("bin_shape", "pytorch_model.bin: tensor 'encoder.layer.0.output.dense.bias' has shape (31,)"),
])
def test_more_bad_weights(ckpt_copy: Path, damage: str, needle: str) -> None:
    import torch
    from safetensors.numpy import load_file, save_file

    st = ckpt_copy / "model.safetensors"
    tensors = load_file(str(st))
    if damage == "first_of_two":  # both wrong: the first in model order is reported
        tensors["encoder.layer.1.output.dense.bias"] = np.zeros(3, np.float32)
        tensors["embeddings.word_embeddings.weight"] = np.zeros((7, 32), np.float32)
    elif damage == "int_dtype":
        tensors["embeddings.LayerNorm.bias"] = tensors["embeddings.LayerNorm.bias"].astype(np.int32)
    elif damage == "bin_shape":
        tensors["encoder.layer.0.output.dense.bias"] = np.zeros(31, np.float32)
    save_file(tensors, str(st))
    if damage == "bin_shape":
        _write_bin(ckpt_copy)
    if damage == "missing_sparse":
        (ckpt_copy / "sparse_linear.pt").unlink()
    if damage == "head_int":
        torch.save({"weight": torch.zeros(32, 32), "bias": torch.zeros(32, dtype=torch.long)},
                   ckpt_copy / "colbert_linear.pt")
    with pytest.raises(EdgeM3Error, match="^" + str(ckpt_copy)) as info:
        load_checkpoint(ckpt_copy)
    assert needle in str(info.value)


BGE_M3 = {"vocab_size": 250002, "hidden_size": 1024, "num_hidden_layers": 24,
          "num_attention_heads": 16, "intermediate_size": 4096, "max_position_embeddings": 8194,
          "type_vocab_size": 1, "layer_norm_eps": 1e-05, "pad_token_id": 1, "hidden_act": "gelu",
          "model_type": "xlm-roberta", "architectures": ["XLMRobertaModel"]}


def test_config_bge_m3(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps(BGE_M3))
    cfg = ModelConfig.from_json(tmp_path / "config.json")
    assert (cfg.max_seq_len, cfg.head_dim, cfg.vocab_size) == (8192, 64, 250002)
    shapes = expected_shapes(cfg)
    assert len(shapes) == 5 + 24 * 16
    assert shapes["encoder.layer.23.intermediate.dense.weight"] == (4096, 1024)
    assert shapes["embeddings.position_embeddings.weight"] == (8194, 1024)


@pytest.mark.parametrize("change, needle", [
    ({"hidden_size": "1024"}, "'hidden_size' must be a positive integer, got '1024'"),
    ({"num_hidden_layers": 2.0}, "'num_hidden_layers' must be a positive integer"),
    ({"vocab_size": True}, "'vocab_size' must be a positive integer"),
    ({"intermediate_size": 0}, "'intermediate_size' must be a positive integer"),
    ({"num_attention_heads": 3}, "'hidden_size' 1024 is not divisible by 'num_attention_heads' 3"),
    ({"hidden_act": "relu"}, "'hidden_act' 'relu' unsupported"),
    ({"layer_norm_eps": None}, "missing key 'layer_norm_eps'"),
    ({"layer_norm_eps": "x"}, "'layer_norm_eps' must be a small positive number"),
    ({"max_position_embeddings": 3}, "'max_position_embeddings' 3 leaves no positions"),
    ({"pad_token_id": -1}, "'pad_token_id' must be a non-negative integer"),
])
def test_config_errors_name_file_and_key(tmp_path: Path, change: dict, needle: str) -> None:
    cfg = {k: v for k, v in {**BGE_M3, **change}.items() if v is not None}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(EdgeM3Error, match="^" + str(path) + ": ") as info:
        ModelConfig.from_json(path)
    assert needle in str(info.value)
    path.write_text("[1, 2]")
    with pytest.raises(EdgeM3Error, match="config.json: expected a JSON object"):
        ModelConfig.from_json(path)


# --- resolving --------------------------------------------------------------------------------

def _assert_hub_failure(err: EdgeM3Error, repo: str) -> None:
    from edge_m3.cli import option_flags

    assert isinstance(err, OptionError)  # the CLI names the option: build's --checkpoint here
    msg = err.render(option_flags("build"))
    assert msg.startswith(f"cannot download '{repo}' from the Hugging Face hub (")
    assert msg.endswith("; pass a local snapshot directory with --checkpoint DIR")
    assert "\n" not in msg and len(msg) < 300


@pytest.mark.parametrize("repo", ["BAAI/bge-m3", "edge-m3-tests/no-such-model"])
def test_hub_id_offline_fails_fast(monkeypatch, tmp_path: Path, repo: str) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tried: list[object] = []  # fails at once: no connection is even attempted (no timing asserted)

    def no_network(self: socket.socket, address: object) -> None:
        tried.append(address)
        raise OSError("network disabled in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    monkeypatch.setattr(socket.socket, "connect_ex", no_network)
    with pytest.raises(EdgeM3Error) as info:
        resolve_checkpoint(repo)
    assert tried == []
    _assert_hub_failure(info.value, repo)
    assert "HF_HUB_OFFLINE" in str(info.value)


def _fake_cache(cache: Path, tiny_ckpt: Path, repo: str, skip: str = "") -> str:
    """The huggingface_hub cache layout: refs/main -> snapshots/<commit>/files."""
    commit = "0123456789abcdef0123456789abcdef01234567"
    root = cache / ("models--" + repo.replace("/", "--"))
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    snap = root / "snapshots" / commit
    shutil.copytree(tiny_ckpt, snap, ignore=shutil.ignore_patterns(skip) if skip else None)
    return commit


def test_hub_id_from_cache_offline(monkeypatch, tmp_path: Path, tiny_ckpt: Path) -> None:
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    commit = _fake_cache(tmp_path / "hub", tiny_ckpt, "someone/bge-m3-tiny")
    path, source = resolve_checkpoint("someone/bge-m3-tiny")
    assert path.name == commit and source == {"id": "someone/bge-m3-tiny", "revision": commit}
    assert load_checkpoint(path, source).source["revision"] == commit
    try:  # newer huggingface_hub also checks the cached tree listing (private module)
        from huggingface_hub._tree_cache import TreeCacheEntry, write_tree_cache
    except ImportError:
        pass
    else:  # the repo also has pytorch_model.bin, which was (rightly) not downloaded
        names = [p.name for p in tiny_ckpt.iterdir()] + ["pytorch_model.bin", "README.md"]
        commit = _fake_cache(tmp_path / "hub", tiny_ckpt, "someone/both")
        write_tree_cache(str(tmp_path / "hub" / "models--someone--both"), commit,
                         {n: TreeCacheEntry(size=1, blob_id="0" * 40) for n in names})
        assert resolve_checkpoint("someone/both")[1]["revision"] == commit
    # A cached snapshot without a head is not used: the hub is asked (and is offline here).
    _fake_cache(tmp_path / "hub", tiny_ckpt, "someone/partial", skip="colbert_linear.pt")
    with pytest.raises(EdgeM3Error) as info:
        resolve_checkpoint("someone/partial")
    _assert_hub_failure(info.value, "someone/partial")


class _Sibling:
    def __init__(self, name: str) -> None:
        self.rfilename = name


def _fake_hub(monkeypatch, files: list[str] | Exception, dest: Path) -> list[dict]:
    """huggingface_hub stand-ins: the repository holds `files`; downloads are recorded."""
    import huggingface_hub

    calls: list[dict] = []

    class Api:
        def model_info(self, repo_id, revision=None, timeout=None):
            if isinstance(files, Exception):
                raise files
            return type("Info", (), {"siblings": [_Sibling(f) for f in files], "sha": "f" * 40})()

    def snapshot_download(repo_id, revision=None, allow_patterns=None, local_files_only=False,
                          **kw):
        calls.append({"allow_patterns": allow_patterns, "local_files_only": local_files_only})
        if local_files_only:
            raise huggingface_hub.errors.LocalEntryNotFoundError("not cached")
        return str(dest)

    monkeypatch.setattr(huggingface_hub, "HfApi", Api)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr("edge_m3.checkpoint.loader._probe_hub", lambda: None)
    return calls


def test_download_prefers_safetensors(monkeypatch, tmp_path: Path) -> None:
    dest = tmp_path / ("a" * 40)
    files = [".gitattributes", "config.json", "model.safetensors", "pytorch_model.bin",
             "colbert_linear.pt", "sparse_linear.pt", "sentencepiece.bpe.model", "tokenizer.json",
             "onnx/model.onnx", "long.jpg"]
    calls = _fake_hub(monkeypatch, files, dest)
    path, source = resolve_checkpoint("BAAI/bge-m3")
    assert path == dest and source == {"id": "BAAI/bge-m3", "revision": "a" * 40}
    online = [c for c in calls if not c["local_files_only"]]
    assert calls[0]["local_files_only"] and len(online) == 1
    assert online[0]["allow_patterns"] == ["config.json", "model.safetensors", "colbert_linear.pt",
                                          "sparse_linear.pt", "sentencepiece.bpe.model",
                                          "tokenizer.json"]
    calls = _fake_hub(monkeypatch, [f for f in files if f != "model.safetensors"], dest)
    resolve_checkpoint("BAAI/bge-m3")
    assert "pytorch_model.bin" in calls[-1]["allow_patterns"] and not calls[-1]["local_files_only"]


def test_download_of_a_sentence_transformers_repo(monkeypatch, tmp_path: Path) -> None:
    """A BERT repository in sentence-transformers' layout (all-MiniLM-L6-v2's files) fetches its
    modules, pooling config, bound and tokenizer; no ONNX, no pickle, no other weights."""
    files = [".gitattributes", "config.json", "model.safetensors", "pytorch_model.bin", "rust_model.ot",
             "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt",
             "modules.json", "sentence_bert_config.json", "1_Pooling/config.json", "onnx/model.onnx",
             "openvino/openvino_model.xml", "README.md"]
    calls = _fake_hub(monkeypatch, files, tmp_path / ("b" * 40))
    resolve_checkpoint("sentence-transformers/all-MiniLM-L6-v2")
    assert [c for c in calls if not c["local_files_only"]][0]["allow_patterns"] == [
        "config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
        "special_tokens_map.json", "vocab.txt", "modules.json", "sentence_bert_config.json",
        "1_Pooling/config.json"]


def test_download_failures_are_one_line(monkeypatch, tmp_path: Path) -> None:
    import huggingface_hub

    _fake_hub(monkeypatch, ["config.json", "model.safetensors", "sentencepiece.bpe.model",
                            "sparse_linear.pt"], tmp_path)
    with pytest.raises(EdgeM3Error, match="'org/model' is not in the BGE-M3 or sentence-transformers "
                                          r"layout \(no colbert_linear.pt in the repository\)"):
        resolve_checkpoint("org/model")
    response = type("R", (), {"headers": {}, "status_code": 404, "request": None, "url": "u"})()
    try:
        missing = huggingface_hub.errors.RepositoryNotFoundError("404\nmany\nlines", response=response)
    except TypeError:  # older signatures
        missing = huggingface_hub.errors.RepositoryNotFoundError("404\nmany\nlines")
    _fake_hub(monkeypatch, missing, tmp_path)
    with pytest.raises(EdgeM3Error) as info:
        resolve_checkpoint("org/missing")
    _assert_hub_failure(info.value, "org/missing")
    assert "repository not found" in str(info.value)
    _fake_hub(monkeypatch, ConnectionError("boom\n" + "x" * 500), tmp_path)
    with pytest.raises(EdgeM3Error) as info:
        resolve_checkpoint("org/down")
    _assert_hub_failure(info.value, "org/down")


def test_local_paths(tmp_path: Path, tiny_ckpt: Path) -> None:
    assert resolve_checkpoint(str(tiny_ckpt)) == (tiny_ckpt, {"id": str(tiny_ckpt), "revision": None})
    for spec in (str(tmp_path / "missing"), "./not/here", "../up/there", "/abs/not/here"):
        with pytest.raises(EdgeM3Error, match="no such directory"):
            resolve_checkpoint(spec)
    (tmp_path / "file").write_text("x")
    with pytest.raises(EdgeM3Error, match="not a directory"):
        resolve_checkpoint(str(tmp_path / "file"))
    with pytest.raises(EdgeM3Error, match="no such directory"):
        load_checkpoint(tmp_path / "missing")


def test_builder_modules_do_not_import_torch() -> None:
    code = ("import sys, edge_m3.checkpoint, edge_m3.checkpoint.safeload, edge_m3.modeling, edge_m3.builder, "
            "edge_m3.export.worker, edge_m3.export.trace, edge_m3.export.tflite, edge_m3.export.onnx, "
            "edge_m3.tokenizer, edge_m3.runtime.pipeline, edge_m3.lab.verify; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_bin_only_snapshot_loads(tiny_ckpt_bin: Path) -> None:
    """A snapshot with only `pytorch_model.bin` loads through the restricted unpickler."""
    ckpt = load_checkpoint(tiny_ckpt_bin)
    ref = _torch_state(tiny_ckpt_bin / "pytorch_model.bin")
    name = "embeddings.word_embeddings.weight"
    np.testing.assert_array_equal(np.asarray(ckpt.tensors[name]), ref[name])
