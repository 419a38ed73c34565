"""`edge-m3 build`: options (options), the orchestration (orchestrate), the self-check under each
TFLite runtime (selfcheck) and the golden vectors (golden)."""

from edge_m3.builder.options import BuildOptions, param_count_from_config, validate_against_config
from edge_m3.builder.orchestrate import build

__all__ = ["BuildOptions", "build", "param_count_from_config", "validate_against_config"]
