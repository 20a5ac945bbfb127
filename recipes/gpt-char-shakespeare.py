"""Rebuild ``gpt-char-shakespeare``: the character GPT of notebook 09 on Tiny Shakespeare.

    python recipes/gpt-char-shakespeare.py --out DIR [--device cuda]

nanoGPT's CPU model (``GPTConfig.char``: 4 layers x 128, 64 characters of context, batch 12) with
the course's learning rates (3e-3 decayed to 3e-4 by a cosine, 50 warm-up updates) over 1,500
updates, on the first 90 % of the text; the validation loss is the mean over fixed windows of the
last 10 %. The training loop is the one the notebook teaches, :func:`onehot2gpt.gpt_training.train_gpt`.
"""

import _gpt
import _recipe

ITERS = 1500
BATCH_SIZE = 12
BLOCK_SIZE = 64  # characters of context (the model's max_len)
LR = 3e-3
MIN_LR = 3e-4
WARMUP = 50
WEIGHT_DECAY = 0.1
D_MODEL = 128
N_LAYERS = 4
N_HEADS = 4
EVAL_EVERY = 100
EVAL_BATCHES = 200
THREADS = 2
SEED = 0
PRECISION = "float32"  # or "bf16": forward passes under bfloat16 autocast (where it is native)

if __name__ == "__main__":
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()))
    _gpt.train_char_gpt(args, args.settings)
