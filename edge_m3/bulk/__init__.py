"""Bulk embedding: a corpus through the device pipeline, on one machine (`engine`, `job`) or on
Ray Data (`ray`), written as Parquet, .npy or JSON lines (`sinks`)."""
