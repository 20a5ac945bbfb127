"""onehot2gpt_teach: the lecturer's tools for the One-Hot to GPT course.

No notebook imports this package; the library the notebooks import is :mod:`onehot2gpt`.

- ``student``: student notebooks (solutions removed, outputs cleared), ``onehot2gpt-student``.
- ``grading``: grade a folder of submitted notebooks, ``onehot2gpt-grade``.
- ``autograders``: a Gradescope autograder or a GitHub Classroom starter, ``onehot2gpt-autograder``.
- ``course``: the Colab badge, set-up cell and slide layout of the course notebooks, ``onehot2gpt-prepare``.
- ``figures``: the course's diagrams as SVG and PNG, ``onehot2gpt-figures``.

Submodules are imported on demand, so that starting a grading worker stays fast.
"""
