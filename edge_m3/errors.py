"""One exception type for user-facing failures, so the CLI can exit 2 with one clear line."""


class EdgeM3Error(Exception):
    """Bad input (file, option, text): the message names the culprit and fits on one line."""
