"""Benchmarks behind docs/benchmarks.md: build, load, latency, throughput and tokenizer figures."""
