"""Interactive views for the notebooks: core ipywidgets only, so they run in JupyterLab and Colab alike.

Each widget is a ``VBox`` whose controls are attributes (``.text``, ``.unit``, ...): tests set
``.value`` and read the result without a browser. Callbacks never raise: a bad input shows a
message in the widget's ``.status`` line and the previous state stays as it was. :mod:`._base`
holds what every widget shares, such as the saved static view.
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
