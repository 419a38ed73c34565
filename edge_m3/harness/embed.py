"""`edge-m3 embed`: the device pipeline from the bundle alone, as an app would run it."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from edge_m3.common.files import write_atomic
from edge_m3.common.options import check_threads
from edge_m3.errors import EdgeM3Error
from edge_m3.harness.inputs import read_texts


def cmd_embed(a: argparse.Namespace) -> int:
    """JSON lines of FlagEmbedding-named outputs, from the bundle alone (as an app would)."""
    from edge_m3.bundle import load_bundle
    from edge_m3.runtime.pipeline import DevicePipeline, to_jsonable

    check_threads(a.threads)
    texts = list(a.text) + (read_texts(a.texts) if a.texts else [])
    if not texts:
        raise EdgeM3Error("no text: give TEXT arguments or --texts FILE (one text per line)")
    bundle = load_bundle(a.bundle)  # refuses any file whose sha256 is not the manifest's
    pipe = DevicePipeline(bundle, a.runtime, a.threads)
    lines = [json.dumps(to_jsonable(pipe.embed(t)), ensure_ascii=False) for t in texts]
    body = "\n".join(lines) + "\n"
    if a.out:
        write_atomic(Path(a.out), body)
    else:
        sys.stdout.write(body)
    return 0


