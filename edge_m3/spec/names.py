"""Names every step agrees on: files, tokenizer kinds and options, tensors and heads, the
weight cache, the kits' error kinds (moved verbatim from contract.py's "names" section)."""

from __future__ import annotations

from collections.abc import Sequence

from edge_m3.errors import LINE_BREAKS as LINE_BREAKS  # the kits' rule, read here
from edge_m3.errors import EdgeM3Error
from edge_m3.errors import escape_line_breaks as escape_line_breaks  # the kits' rule, read here

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
GOLDEN = "golden.json"
VOCAB_MAP = "vocab_map.json"
SENTENCEPIECE = "sentencepiece.bpe.model"
WORDPIECE_VOCAB = "vocab.txt"  # a WordPiece bundle's vocabulary: one token a line, id = line number
# A byte-level BPE bundle's tokenizer data: the model's vocabulary (a list, id = index), its merges
# (a list of [left, right] pairs, rank = index) and the added tokens (docs/bundle-format.md).
BPE_FILE = "bpe.json"

# How a bundle tokenizes (the manifest's `tokenizer.kind`): each kind is one tokenizer class in
# Python (edge_m3.tokenizer.open_tokenizer) and in each kit, chosen by this name alone.
XLMR_SENTENCEPIECE, WORDPIECE, BYTE_LEVEL_BPE = "xlmr-sentencepiece", "wordpiece", "byte-level-bpe"
TOKENIZER_KINDS = (XLMR_SENTENCEPIECE, WORDPIECE, BYTE_LEVEL_BPE)
# A WordPiece tokenizer's settings (manifest `tokenizer.options`), as `tokenizers`' BertNormalizer,
# BertPreTokenizer and WordPiece model name them; every key is required, with this type.
WORDPIECE_OPTIONS: dict[str, type] = {
    "clean_text": bool, "handle_chinese_chars": bool, "strip_accents": bool, "lowercase": bool,
    "continuing_subword_prefix": str, "max_input_chars_per_word": int,
}
# A byte-level BPE tokenizer's settings (GPT-2 / GPT-NeoX / ModernBERT tokenizer.json), as
# `tokenizers` names them: the normalizer (one of BPE_NORMALIZERS, "" for none), the ByteLevel
# pre-tokenizer's add_prefix_space and use_regex, the BPE model's ignore_merges, fuse_unk and
# unk_token ("" when the model has none: a character outside the vocabulary is then dropped).
BPE_OPTIONS: dict[str, type] = {
    "normalizer": str, "add_prefix_space": bool, "use_regex": bool, "ignore_merges": bool,
    "fuse_unk": bool, "unk_token": str,
}
BPE_NORMALIZERS = ("", "NFC")
# Each kind's options schema (the SentencePiece kind has none).
TOKENIZER_OPTIONS: dict[str, dict[str, type]] = {WORDPIECE: WORDPIECE_OPTIONS, BYTE_LEVEL_BPE: BPE_OPTIONS}

# The model's inputs, in signature order: int32 `[1, L]`.
INPUT_IDS, ATTENTION_MASK = "input_ids", "attention_mask"
INPUTS = (INPUT_IDS, ATTENTION_MASK)
# The heads a bundle may export, and each head's raw signature output.
HEADS = ("dense", "sparse", "colbert")
DENSE_VECS, SPARSE_WEIGHTS, COLBERT_VECS = "dense_vecs", "sparse_weights", "colbert_vecs"
HEAD_OUTPUTS = {"dense": DENSE_VECS, "sparse": SPARSE_WEIGHTS, "colbert": COLBERT_VECS}
# The post-processed outputs, named as FlagEmbedding's BGEM3FlagModel names them.
LEXICAL_WEIGHTS = "lexical_weights"
RESULT_OUTPUTS = {"dense": DENSE_VECS, "sparse": LEXICAL_WEIGHTS, "colbert": COLBERT_VECS}

# fairseq's specials as XLM-R writes them; every bundle has all five.
SPECIAL_KEYS = ("bos", "pad", "eos", "unk", "mask")
XLMR_SPECIAL_TOKENS = {"bos": "<s>", "pad": "<pad>", "eos": "</s>", "unk": "<unk>", "mask": "<mask>"}
# FlagEmbedding leaves these out of lexical_weights (it keeps `<mask>`).
LEXICAL_SKIP_KEYS = ("bos", "eos", "pad", "unk")

DYNAMIC_SIGNATURE = "embed_dynamic"
FORMATS = ("tflite", "onnx")

# How a device runs the model on the CPU (the harness and both kits). XNNPACK packs the weights
# for its kernels; a weight cache keeps one packed copy per model instead of one per signature,
# in memory or in a file that a later start maps instead of packing again (issue 17).
DEVICE_THREADS = 2  # intra-op threads: 2 suits big.LITTLE phones and a Raspberry Pi alike
IN_MEMORY_WEIGHT_CACHE = ":memory"  # XNNPACK's kInMemoryCachePath (delegates/xnnpack/weight_cache.h)
WEIGHT_CACHE_SUFFIX = ".xnnpack_cache"
# A cache file is named by the model's SHA-256 (its first WEIGHT_CACHE_KEY_CHARS hex digits) and
# the runtime build: XNNPACK finds packed weights by buffer index, not by content, and would
# reuse a stale file for a changed model or a runtime that packs differently.
WEIGHT_CACHE_KEY_CHARS = 16

# The kits' typed errors (Swift: `EdgeM3Error.kind`; Kotlin: `EdgeM3Failure.kind` and one
# exception class per kind, KIT_EXCEPTION_CLASSES; both generated): one kind per way a bundle, a
# runner, a runtime or a caller ends a call, each with one line of message besides.
KIT_ERROR_KINDS = {
    "invalid_input": "Bad input: a manifest, a text, an option, a call the kit cannot make.",
    "corrupt_bundle": "A bundle file is missing, or its size or SHA-256 is not manifest.json's: copy it again.",
    "corrupt_index": "An index file is missing, malformed, or not what index.json says: build or download "
                     "it again.",
    "signature_mismatch": "The model file's signatures differ from manifest.json (a name, shape or dtype).",
    "runner_closed": "The embedder (or its runner) was closed: every later call fails so.",
    "cancelled": "The caller cancelled (a coroutine's Job, a Swift Task) before the next model call.",
    "runtime_missing": "No model runtime: the library is missing, not a library, or lacks the API.",
    "runtime_failed": "The runtime refused: it could not read, compile or run the model.",
    # a writable index (issue 35): nothing was written when one of these is raised
    "duplicate_id": "add: the id is already in the index (update it, or remove it first).",
    "unknown_id": "update or remove: the id is not in the index.",
    "index_busy": "Another writer holds the index longer than INDEX_DB_BUSY_MS.",
    "write_failed": "The index could not be written: a read-only file or folder, a full disk.",
}
# Kotlin's exception class per kind where it is not "EdgeM3<Kind>Exception" (the names apps
# already catch); `invalid_input` is the base class every other kind extends, except
# `cancelled`, which is a CancellationException so that coroutines see a cancellation.
KIT_EXCEPTION_CLASSES = {
    "invalid_input": "EdgeM3Exception",
    "signature_mismatch": "EdgeM3ModelMismatchException",
    "runner_closed": "EdgeM3ClosedException",
}
# LINE_BREAKS and escape_line_breaks (issue 38: the harnesses' "one line") are defined in
# edge_m3.errors, beside EdgeM3Error, which applies the rule to every message; imported above so
# that the kits' generator reads them here with every other rule of the contract.


def weight_cache_name(model_sha256: str, runtime_key: str) -> str:
    """`<sha256[:16]>-<runtime key>.xnnpack_cache`: one file per model content and runtime build."""
    key = "".join(c if (c.isascii() and c.isalnum()) or c in "._" else "_" for c in runtime_key)
    return f"{model_sha256[:WEIGHT_CACHE_KEY_CHARS]}-{key}{WEIGHT_CACHE_SUFFIX}"


def model_file(quant: str, fmt: str) -> str:
    """`model_<quant>.tflite` / `model_<quant>.onnx`: one file per variant and format."""
    return f"model_{quant}.{fmt}"


def signature_name(seq_len: int) -> str:
    """Distinct names per length: same-named concrete functions collapse into one signature."""
    return f"embed_{int(seq_len)}"


def choose_length(n_tokens: int, lengths: Sequence[int]) -> int:
    """The smallest fixed length that holds the tokens, else the largest (and truncate)."""
    if not lengths:
        raise EdgeM3Error("no sequence lengths to choose from")
    fitting = [n for n in sorted(lengths) if n >= n_tokens]
    return fitting[0] if fitting else max(lengths)
