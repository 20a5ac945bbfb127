"""Checked exercises: compare a student's function with the library's reference.

Every notebook ends its sections with exercises. An exercise cell (tagged ``exercise``) holds a
function whose body sits between ``### BEGIN SOLUTION`` and ``### END SOLUTION``; the next cell
(tagged ``check``) calls one of the ``check_*`` functions. A check runs the student's function and
the reference on fresh random inputs; until they agree it raises an ``AssertionError`` that names
the concept to revisit, and from the second wrong attempt on also a hint (a pointed question, the
equation or the shapes to reach; never the code).

- ``checking``: ``assert_same`` and ``check_function``, the machinery.
- ``nb01`` … ``nb11``: one module of checks per notebook.

The student versions of the notebooks are made by ``onehot2gpt_teach.student``.

Why a package of its own, beside ``onehot2gpt`` and not inside it: the checks are assessment
machinery (the staged hints, and the grader's recording and replay in ``checking``), written for a
different reader than the library a student reads with ``??``. They import the library; the library
never imports them (tests/test_habits.py). The grader, :mod:`onehot2gpt_teach.grading`, imports them
and reloads them in the student's kernel before each check.
"""

from .checking import HINT_AFTER, assert_same, check_function, from_notebook, reset_attempts, yours_if_solved, yours_or
from .nb01 import check_bag_of_words, check_cosine_similarity, check_encode, check_one_hot
from .nb02 import (
    check_analogy,
    check_char_ngrams,
    check_negative_sampling_loss,
    check_noise_distribution,
    check_sgns_step,
    check_skipgram_pairs,
)
from .nb03 import (
    TorchLSTMLM,
    check_bigram_prob,
    check_lstm_cell,
    check_lstm_lm,
    check_next_token_pairs,
    check_perplexity,
)
from .nb04 import (
    check_bilm_layers,
    check_reverse_padded,
    check_scalar_mix,
    check_sense_score,
    check_slanted_triangular_lr,
)
from .nb05 import check_attention_with_loops, check_causal_mask, check_multi_head_attention, check_split_heads
from .nb06 import (
    check_decoder_block,
    check_encoder_block,
    check_greedy_decode,
    check_layer_norm,
    check_positional_encoding,
)
from .nb07 import LibraryBert, check_apply_masking, check_bert_model, check_mlm_loss, check_segment_ids, check_wordpiece
from .nb08 import (
    check_best_span,
    check_first_piece_labels,
    check_qa_head,
    check_qa_loss,
    check_sequence_classifier,
    check_token_f1,
)
from .nb09 import (
    LibraryGPT,
    check_causal_self_attention,
    check_gpt_block,
    check_gpt_mlp,
    check_gpt_model,
    check_kv_cache_step,
    check_lens_readout,
    check_top_k_filter,
    check_top_p_filter,
)
from .nb10 import check_answer_matches, check_greedy_until_newline, check_qa_prompt
from .nb11 import (
    check_chain_rule_log_prob,
    check_independent_masks,
    check_induction_score,
    check_permutation_mask,
    check_two_stream_layer,
)
