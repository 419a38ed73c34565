"""model.safetensors: safeload's header reader and lazy tensor reads."""

from __future__ import annotations

from edge_m3.checkpoint.safeload import read_safetensors
from tools.fuzz.harness import scratch_file


def run(data: bytes) -> None:
    st = read_safetensors(scratch_file("model.safetensors", data))
    for name in st:
        arr = st[name]
        assert arr.shape == st.shape(name), (name, arr.shape, st.shape(name))
