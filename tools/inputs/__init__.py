"""Makers of the checkpoints and corpora that the benchmarks and the demo take as input."""
