"""The conformance suite of the on-disk formats (docs/conformance.md): cases and their generator."""
