"""`python -m onehot2gpt.exercises NOTEBOOK… --out DIR` writes student notebooks."""

import sys

from .student import main

sys.exit(main())
