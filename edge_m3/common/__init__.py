"""Small helpers every step shares (files, options, child processes); no model code."""
