"""The verification lab: `verify` against the references (FlagEmbedding, sentence-transformers,
transformers, the Keras fp32 model), its metrics and gate, the fidelity corpus, the report, and
the references' child processes (workers). It reads the device package, never the reverse."""
