"""onehot2gpt: the shared library of the One-Hot to GPT course.

One concept per module (vocab, data, word2vec, ...); notebooks in ``notebooks/`` import from here.
Submodules are imported on demand (``from onehot2gpt.vocab import Vocab``) so that importing the
package stays fast.
"""

__version__ = "0.1.0"
