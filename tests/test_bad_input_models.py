"""Bad input to the model helpers and trainers (issue 48): NaN and +inf span scores, non-integer
factorization orders, and training runs whose loss explodes while it is still finite. Each gives
a clear error naming the argument, or a correct result."""

import math

import pytest
import torch
from onehot2gpt.attention import MultiHeadAttention, causal_mask, merge_heads, permutation_mask, split_heads
from onehot2gpt.bert import BertConfig, BertModel, best_span
from onehot2gpt.checkpoints import load
from onehot2gpt.gpt_inputs import classification_input, entailment_input
from onehot2gpt.qa import decode_answer, null_accuracy, null_margins, predict_spans
from onehot2gpt.rnn_lm import LSTMLM, train_lm
from onehot2gpt.transformer import Seq2SeqTransformer, TransformerConfig, sinusoidal_positions
from onehot2gpt.utils import TrainingDiverged, check_finite_loss

NAN, INF = math.nan, math.inf
SCORES = torch.tensor([0.0, 3.0, 1.0, 0.0])


@pytest.mark.parametrize(
    "start, end, message",
    [
        (torch.full((4,), NAN), SCORES, r"^best_span: start_logits holds NaN at positions \[0, 1, 2, 3\]"),
        (SCORES, torch.tensor([0.0, NAN, 1.0, 0.0]), r"^best_span: end_logits holds NaN at positions \[1\]"),
        (torch.tensor([INF, 0.0, 0.0, 0.0]), SCORES, r"^best_span: start_logits holds \+inf at positions \[0\]"),
    ],
    ids=["all NaN start", "one NaN end", "+inf start"],
)
def test_best_span_refuses_nan_and_plus_inf_scores(start, end, message):
    # all-NaN scores used to give (0, 0, nan); +inf gave (0, 0, inf)
    with pytest.raises(ValueError, match=message):
        best_span(start, end)


@pytest.mark.parametrize(
    "allowed, error, message",
    [
        (torch.tensor([0.0, 0.5, 1.0, 1.0]), TypeError, r"^best_span: allowed must be a mask of True/False"),
        (torch.tensor([2, 1, 1, 0]), TypeError, r"^best_span: allowed must be a mask .* values \[0, 1, 2\]"),
        (
            torch.tensor([True, True]),
            ValueError,
            r"^best_span: allowed must be a bool tensor shaped like the logits \(4,\), got \(2,\)",
        ),
        ([True, True, True, True], ValueError, r"^best_span: allowed must be .* got list"),
    ],
    ids=["float mask", "counts", "wrong length", "a list"],
)
def test_best_span_refuses_an_allowed_mask_that_is_not_one(allowed, error, message):
    with pytest.raises(error, match=message):
        best_span(SCORES, SCORES, allowed=allowed)


def test_best_span_still_rules_out_minus_inf_and_accepts_a_0_1_mask():
    start, end = torch.tensor([-INF, 0.0, 2.0, 1.0]), torch.tensor([0.0, -INF, 0.5, 3.0])
    assert best_span(start, end) == (2, 3, 5.0)
    assert best_span(start, end, allowed=torch.tensor([1, 1, 1, 0])) == (2, 2, 2.5)
    assert best_span(torch.full((3,), -INF), torch.zeros(3)) is None


@pytest.mark.parametrize(
    "order, error, message",
    [
        ([0.2, 1.9, 2.5], TypeError, r"^permutation_mask: order\[0\] is float 0\.2 \(a float is never rounded\)"),
        ([0, 1.0, 2], TypeError, r"^permutation_mask: order\[1\] is float 1\.0"),
        ([True, False], TypeError, r"^permutation_mask: order\[0\] is bool True"),
        (torch.tensor([1.0, 0.0]), TypeError, r"^permutation_mask: order has dtype torch\.float32"),
        ("201", TypeError, r"^permutation_mask: order must be a list or a 1-D tensor, got str"),
        ([[0, 1]], TypeError, r"^permutation_mask: order\[0\] is list"),
        ([0, 2, 2], ValueError, r"^permutation_mask: order must be a permutation of 0 … T−1 .*got \[0, 2, 2\]"),
        ([1, 2, 3], ValueError, r"^permutation_mask: order must be a permutation .*got \[1, 2, 3\]"),
        ([], ValueError, r"^permutation_mask: order is empty"),
    ],
    ids=["floats", "one float", "bools", "float tensor", "a string", "nested", "a repeat", "from 1", "empty"],
)
def test_permutation_mask_refuses_what_is_not_an_order(order, error, message):
    # [0.2, 1.9, 2.5] used to be truncated into the order [0, 1, 2]
    with pytest.raises(error, match=message):
        permutation_mask(order)


def test_permutation_mask_accepts_integer_tensors_and_ranges():
    assert torch.equal(permutation_mask(torch.arange(4), include_self=True), causal_mask(4))
    assert torch.equal(permutation_mask(range(3)), permutation_mask([0, 1, 2]))


def test_check_finite_loss_stops_a_loss_that_explodes_while_finite():
    assert check_finite_loss(40.0, 3, start=2.0) == 40.0  # growing, but not yet exploding
    with pytest.raises(TrainingDiverged, match=r"^LM diverged at step 3: the loss is 5e\+03, more than 1000× its "):
        check_finite_loss(5000.0, 3, lr=10.0, what="LM", start=2.0)
    with pytest.raises(TrainingDiverged, match=r"the run is exploding\. Lower the learning rate \(now 10\)"):
        check_finite_loss(torch.tensor(5000.0), 3, lr=10.0, start=2.0)


def test_the_lstm_trainer_stops_when_its_loss_explodes():
    torch.manual_seed(0)
    lm = LSTMLM(10, d_model=8, n_layers=1, dropout=0.0, tie_weights=False)
    with torch.no_grad():
        lm.lm_head.weight.mul_(1e5)  # finite, but the loss of its first batch is far above ln 10
    with pytest.raises(TrainingDiverged, match=r"^LSTM LM training diverged at step 0: .* the run is exploding"):
        train_lm(lm, torch.arange(200) % 10, batch_size=4, seq_len=8, progress=False)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: causal_mask(3.0), TypeError, r"^causal_mask: t_q must be an int .* got float 3\.0"),
        (lambda: causal_mask(3, 4.5), TypeError, r"^causal_mask: t_k must be an int"),
        (lambda: causal_mask(0), ValueError, r"^causal_mask needs 1 ≤ T_q ≤ T_k"),
        (lambda: split_heads(torch.zeros(1, 2, 4), 0), ValueError, r"^n_heads=0 must be at least 1"),
        (lambda: split_heads(torch.zeros(1, 2, 4), -2), ValueError, r"^n_heads=-2 must be at least 1"),
    ],
    ids=["float T_q", "float T_k", "zero T_q", "zero heads (ZeroDivisionError)", "negative heads"],
)
def test_attention_helpers_refuse_bad_sizes_naming_them(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: MultiHeadAttention(8, 0), ValueError, r"^n_heads=0 must be at least 1"),  # ZeroDivisionError
        (lambda: merge_heads(torch.zeros(2, 3, 4)), ValueError, r"^x must have 4 dimensions, got shape \(2, 3, 4\)"),
        (lambda: sinusoidal_positions(4.5, 4), TypeError, r"^max_len must be an int, got float 4\.5"),
        (lambda: sinusoidal_positions(0, 4), ValueError, r"^max_len=0 must be at least 1"),  # an empty table
    ],
    ids=["zero heads", "3-D heads", "float max_len", "zero max_len"],
)
def test_attention_and_position_builders_name_the_bad_size(call, error, message):
    with pytest.raises(error, match=message):
        call()


@pytest.fixture(scope="module")
def seq2seq():
    torch.manual_seed(0)
    return Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=12, tgt_vocab_size=6, dropout=0.0)).eval()


def test_seq2seq_refuses_targets_for_another_number_of_sources(seq2seq):
    src = torch.tensor([[4, 5, 6], [7, 8, 9]])
    # one target row for two sources used to broadcast silently into a meaningless batch
    with pytest.raises(ValueError, match=r"^tgt_in has 1 rows but src 2: one target per source"):
        seq2seq(src, torch.tensor([[2, 4]]))
    assert seq2seq(src, torch.tensor([[2, 4], [2, 5]]))[0].shape == (2, 2, 6)


@pytest.mark.parametrize(
    "max_new, error, message",
    [
        (0, ValueError, r"^max_new=0 must be at least 1"),
        (-1, ValueError, r"^max_new=-1"),
        (2.5, TypeError, r"^max_new"),
    ],
)
def test_greedy_decode_refuses_a_count_below_one(seq2seq, max_new, error, message):
    # 0 used to decode max_len - 1 tokens, -1 to return nothing
    with pytest.raises(error, match=message):
        seq2seq.greedy_decode(torch.tensor([[4, 5]]), 2, 3, max_new=max_new)


def test_greedy_decode_takes_a_list_of_ids_like_forward(seq2seq):
    as_list = seq2seq.greedy_decode([[4, 5, 6]], 2, 3, max_new=4)  # used to fail on list.size
    assert torch.equal(as_list, seq2seq.greedy_decode(torch.tensor([[4, 5, 6]]), 2, 3, max_new=4))


@pytest.fixture(scope="module")
def bert():
    torch.manual_seed(0)
    return BertModel(BertConfig.tiny(vocab_size=30)).eval()


@pytest.mark.parametrize(
    "mask, error, message",
    [
        (
            torch.tensor([[0.5, 1.0, 1.0]]),
            ValueError,
            r"^attention_mask holds values other than 0 and 1 \(\[0\.5, 1\.0\]\)",
        ),
        (torch.tensor([[5, 6, 7]]), ValueError, r"^attention_mask holds values other than 0 and 1"),  # ids passed
        ([[1, 1, 1]], TypeError, r"^attention_mask must be a torch\.Tensor, got list"),
    ],
    ids=["fractions", "ids as the mask", "a list"],
)
def test_bert_refuses_an_attention_mask_that_is_not_0_1(bert, mask, error, message):
    # the fractions and the ids used to count as "all real tokens", silently
    with pytest.raises(error, match=message):
        bert(torch.tensor([[2, 5, 3]]), attention_mask=mask)


def test_bert_still_takes_long_float_and_bool_masks(bert):
    ids = torch.tensor([[2, 5, 3, 0]])
    outs = [bert(ids, attention_mask=m).last_hidden_state for m in (ids != 0, (ids != 0).long(), (ids != 0).float())]
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])


@pytest.mark.parametrize(
    "name, error, message",
    [
        (None, TypeError, r"^name_or_path must be a str, got NoneType None; a name from checkpoints\.names\(\)"),
        (3, TypeError, r"^name_or_path must be a str, got int 3"),
        ("", ValueError, r"^name_or_path is empty \(''\)"),  # used to look for ./config.json
    ],
    ids=["None", "an int", "empty"],
)
def test_checkpoint_load_refuses_what_is_not_a_name(name, error, message):
    with pytest.raises(error, match=message):
        load(name)


def test_qa_span_tools_name_bad_arguments():
    features = {"offsets": [[None, (0, 3), (4, 10)]], "context": ["the answer"]}
    with pytest.raises(ValueError, match=r"^i=1 must be in \[0, 0\]; a row of the features"):  # IndexError
        decode_answer(features, 1, 1, 2)
    assert decode_answer(features, 0, 1, 2) == "the answer"
    with pytest.raises(TypeError, match=r"^start_logits must be a torch\.Tensor, got list"):  # AttributeError
        predict_spans([[0.0, 1.0]], torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool))
    with pytest.raises(TypeError, match=r"^context_mask must be a torch\.Tensor, got list"):
        null_margins(torch.zeros(1, 2), torch.zeros(1, 2), [[False, True]])
    # no margins of one kind used to give NaN shares
    with pytest.raises(ValueError, match=r"^answerable has 0 margins, unanswerable 2: need 1\+ of each"):
        null_accuracy(torch.tensor([]), torch.tensor([0.5, -1.0]), 0.0)
    assert null_accuracy(torch.tensor([1.0]), torch.tensor([-1.0]), 0.0)["balanced"] == 1.0


def test_greedy_decode_names_a_bos_id_outside_the_target_vocabulary(seq2seq):
    # used to blame "tgt_in", an argument the caller never passed
    with pytest.raises(ValueError, match=r"^bos_id=9 must be in \[0, 5\]; the id of <bos> in the target vocabulary"):
        seq2seq.greedy_decode(torch.tensor([[4, 5]]), 9, 3, max_new=2)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: classification_input(None), r"^text must be a list of tokens or ids, got NoneType None"),
        (lambda: entailment_input([1, 2], 7, start=0, delim=3, extract=4), r"^hypothesis must be a list .* got int 7"),
    ],
    ids=["None text", "an int hypothesis"],
)
def test_gpt_inputs_name_what_is_not_a_token_list(call, message):
    # both used to fail with "'NoneType' / 'int' object is not iterable"
    with pytest.raises(TypeError, match=message):
        call()
    assert entailment_input([1, 2], (5,), start=0, delim=3, extract=4) == [0, 1, 2, 3, 5, 4]


def test_attention_and_bert_name_what_is_not_a_tensor():
    from onehot2gpt.attention import scaled_dot_product_attention
    from onehot2gpt.bert import BertConfig, BertModel

    with pytest.raises(TypeError, match="q must be a torch.Tensor"):
        scaled_dot_product_attention([[1.0, 0.0]], torch.eye(2), torch.eye(2))
    with pytest.raises(TypeError, match="k must be a floating"):
        scaled_dot_product_attention(torch.eye(2), torch.ones(2, 2, dtype=torch.long), torch.eye(2))
    torch.manual_seed(0)
    bert = BertModel(BertConfig.tiny()).eval()
    ids = [[5, 6, 7]]
    assert torch.equal(
        bert(ids, attention_mask=torch.ones(1, 3)).last_hidden_state, bert(torch.tensor(ids)).last_hidden_state
    )


@pytest.mark.parametrize("value, error", [(3, TypeError), (None, TypeError), ("", ValueError), ("  ", ValueError)])
def test_checkpoint_path_and_folder_name_a_bad_name(value, error):
    from onehot2gpt.checkpoints import checkpoint_folder, checkpoint_path

    with pytest.raises(error, match=r"^name .*checkpoints\.names\(\)"):
        checkpoint_path(value)
    with pytest.raises(error, match=r"^name_or_path .*checkpoints\.names\(\) or a folder"):
        checkpoint_folder(value)
