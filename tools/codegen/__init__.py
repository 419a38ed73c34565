"""Generators of committed files from their one source: the kits' contract and tokenizer tables, the corpus."""
