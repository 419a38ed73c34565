"""Research scripts whose measurements chose shipped constants (quant recipes, buckets, test tolerances)."""
