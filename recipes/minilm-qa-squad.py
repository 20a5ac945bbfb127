"""Rebuild ``minilm-qa-squad``: all-MiniLM-L6-v2 fine-tuned for extractive QA on SQuAD 1.1 (notebook 08).

    python recipes/minilm-qa-squad.py --out DIR

Phase 1 fine-tunes the top layers and the start/end head on the answerable questions of 34 of
SQuAD dev's 48 articles; phase 2 adds questions paired with paragraphs of other articles, pointed at
[CLS], and the threshold on the null margin is chosen on half of the 14 held-out articles. The
held-out scores go into ``info``. ``_qa.py`` holds the run (:func:`_qa.minilm_qa_recipe`).
"""

import _recipe

TOP_LAYERS = 4
EPOCHS = 2
BATCH_SIZE = 16
LR = 8e-5
MAX_LEN = 256
TEST_FRACTION = 0.3
SEED = 0
NULL_STEPS = 100  # phase 2: steps with unanswerable rows
NULL_SHARE = 0.33  # phase 2: share of unanswerable rows
NULL_LR = 5e-5
NULL_SAMPLE = 150  # questions per half of the held-out articles for the null threshold
EVALUATE_ON = None  # score only this many held-out questions, evenly spread (None: all)
RESUME = None  # a checkpoint folder holding phase 1's result: run phase 2 only


def main() -> None:
    args = _recipe.parse(__doc__.split("\n")[0], _recipe.constants(globals()), gpu=False)
    s = args.settings
    from _qa import minilm_qa_recipe

    with _recipe.atomic_folder(args.out, replace=args.force) as tmp:
        result = minilm_qa_recipe(tmp, command=_recipe.command_line(), **{k.lower(): v for k, v in s.items()})
    _recipe.print_json({**result, "checkpoint": str(args.out)})


if __name__ == "__main__":
    main()
