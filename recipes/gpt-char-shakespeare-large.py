"""Rebuild ``gpt-char-shakespeare-large``: the larger character GPT notebook 09 writes with.

    python recipes/gpt-char-shakespeare-large.py --out DIR

The steps of ``gpt-char-shakespeare.py`` (see ``_gpt.py``) with a wider model (4 layers x 256),
128 characters of context, batch 16 and 3,000 updates under bfloat16 autocast on one thread. On a
CPU without native bfloat16 the recipe stops with a note: add ``--set PRECISION=float32``.
"""

import _gpt
import _recipe

ITERS = 3000
BATCH_SIZE = 16
BLOCK_SIZE = 128
LR = 2e-3
MIN_LR = 2e-4
WARMUP = 100
WEIGHT_DECAY = 0.1
D_MODEL = 256
N_LAYERS = 4
N_HEADS = 4
EVAL_EVERY = 500
EVAL_BATCHES = 100
THREADS = 1
SEED = 0
PRECISION = "bf16"

if __name__ == "__main__":
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()))
    _gpt.train_char_gpt(args, args.settings)
