"""Interactive views for the notebooks (ipywidgets 8, core widgets only, so they run in
JupyterLab and Colab alike).

Each widget is a ``VBox`` subclass whose controls are attributes (``.text``, ``.unit``, ...), so
tests set ``.value`` and read the result without a browser. Callbacks never raise: a bad input
shows a message in the widget's ``.status`` line and the previous state stays as it was.

The modules group the widgets by what they show: :mod:`.tokens` (tokens, embeddings, ELMo's layer
weights), :mod:`.attention`, :mod:`.bert`, :mod:`.sampling`, :mod:`.zero_shot` and
:mod:`.inside_gpt`; :mod:`._base` holds the saved static view every widget shares.
"""

from ._base import figure_to_png, snapshot_html
from .attention import AllHeadsView, AttentionExplorer, bertviz_view, validate_attentions
from .bert import PRECIPITATION, FillInTheBlank, MaskingExplorer, QuestionAnswerer
from .inside_gpt import ForwardStepper, InterventionExplorer, LogitLens
from .sampling import SamplingExplorer, encode_prompt
from .tokens import EmbeddingExplorer, LayerWeightExplorer, TokenExplorer
from .zero_shot import PROMPT_TEMPLATES, ZeroShotPrompter, render_prompt

__all__ = [
    "PRECIPITATION",
    "PROMPT_TEMPLATES",
    "AllHeadsView",
    "AttentionExplorer",
    "EmbeddingExplorer",
    "FillInTheBlank",
    "ForwardStepper",
    "InterventionExplorer",
    "LayerWeightExplorer",
    "LogitLens",
    "MaskingExplorer",
    "QuestionAnswerer",
    "SamplingExplorer",
    "TokenExplorer",
    "ZeroShotPrompter",
    "bertviz_view",
    "encode_prompt",
    "figure_to_png",
    "render_prompt",
    "snapshot_html",
    "validate_attentions",
]
