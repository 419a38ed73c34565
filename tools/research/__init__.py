"""Studies whose measurements chose shipped constants; each is named by its constant
(`AEQ_RECIPES` -> aeq_recipes.py). Rerun one when its constant is in question."""
