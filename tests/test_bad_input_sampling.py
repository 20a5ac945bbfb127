"""Bad input to the decoding functions (issue 48's "NaN in, NaN out" and "out of range" cases):
each call gives a clear error that names the function and the argument, or a correct result."""

import math

import pytest
import torch
from onehot2gpt.gpt import GPT, GPTConfig
from onehot2gpt.rnn_lm import NGramLM
from onehot2gpt.sampling import apply_temperature, filter_top_k, filter_top_p, generate, next_token_distribution
from onehot2gpt.vocab import Vocab
from onehot2gpt.zero_shot import answer_matches, checkpoint_name, qa_prompt, share_label

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize(
    "call, where",
    [
        (lambda l: filter_top_p(l, 0.9), "filter_top_p"),
        (lambda l: filter_top_k(l, 2), "filter_top_k"),
        (lambda l: apply_temperature(l, 0.7), "apply_temperature"),
    ],
    ids=["top_p", "top_k", "temperature"],
)
@pytest.mark.parametrize(
    "logits, held",
    [
        (torch.full((5,), NAN), "NaN"),  # all NaN: top-p kept the NaN and removed the rest
        (torch.tensor([1.0, NAN, 0.0, -1.0]), "NaN"),  # one NaN: top-k kept it as the largest
        (torch.tensor([[0.0, 1.0, 2.0], [1.0, INF, 0.0]]), r"\+inf"),  # a softmax of +inf is NaN
    ],
    ids=["all NaN", "one NaN", "+inf in a batch"],
)
def test_filters_refuse_nan_and_plus_inf_logits_naming_the_function(call, where, logits, held):
    with pytest.raises(ValueError, match=rf"^{where}: logits hold {held} \(\d+ of {logits.numel()} values\).*weights"):
        call(logits)


@pytest.mark.parametrize("call", [lambda l: filter_top_p(l, 0.5), lambda l: filter_top_k(l, 1)], ids=["top_p", "top_k"])
def test_filters_refuse_a_row_with_every_token_removed(call):
    logits = torch.tensor([[0.0, 1.0, 2.0], [-INF, -INF, -INF]])
    with pytest.raises(ValueError, match=r"^filter_top_[kp]: a row of logits is -inf everywhere"):
        call(logits)


def test_filters_still_accept_removed_tokens_and_chain():
    logits = torch.tensor([2.0, -INF, 1.0, 0.5])  # -inf: a token removed by an earlier filter
    kept = filter_top_p(filter_top_k(apply_temperature(logits, 0.5), 2), 0.99)
    assert torch.isfinite(kept).tolist() == [True, False, True, False]


@pytest.fixture(scope="module")
def broken_gpt():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=20)).eval()
    with torch.no_grad():
        model.lm_head.weight.fill_(NAN)  # tied to the embedding: every score is NaN
    return model


@pytest.mark.parametrize("temperature", [0.0, 1.0], ids=["greedy", "sampled"])
def test_next_token_distribution_of_a_nan_model_blames_the_weights(broken_gpt, temperature):
    # temperature 0 put all the mass on token 0 (the argmax of NaN scores), silently
    with pytest.raises(ValueError, match="NaN or infinite: its weights diverged"):
        next_token_distribution(broken_gpt, [1, 2, 3], temperature=temperature)
    with pytest.raises(ValueError, match="NaN or infinite: its weights diverged"):
        generate(broken_gpt, [1, 2, 3], 2, temperature=temperature)


@pytest.fixture(scope="module")
def ngram():
    sentences = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "cat", "ran"]]
    return NGramLM(2, Vocab.build(sentences)).fit(sentences)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(max_tokens=-1), ValueError, r"max_tokens=-1 must be at least 0"),
        (dict(max_tokens=2.5), TypeError, r"max_tokens must be an int, got float 2.5"),
        (dict(context="the cat"), TypeError, r"context must be a list of tokens, e\.g\. \['the', 'cat'\]"),
    ],
    ids=["negative count", "float count", "a string as context"],
)
def test_ngram_generate_refuses_bad_counts_and_contexts(ngram, kwargs, error, message):
    with pytest.raises(error, match=message):
        ngram.generate(**kwargs, generator=torch.Generator().manual_seed(0))


def test_ngram_generate_with_a_token_list_still_samples(ngram):
    out = ngram.generate(["the"], max_tokens=5, generator=torch.Generator().manual_seed(0))
    assert 0 < len(out) <= 5 and all(t in ngram.vocab for t in out)
    assert ngram.generate(["the"], max_tokens=0) == []


def test_answer_matches_refuses_an_answer_that_does_not_fit_the_logits():
    logits = torch.zeros(5, 10)
    logits[torch.arange(5), torch.tensor([4, 7, 1, 2, 0])] = 1.0
    # start 8 used to fail in torch: "The size of tensor a (0) must match the size of tensor b (3)"
    with pytest.raises(ValueError, match=r"^start=8 must be in \[1, 2\]; the answer must fit inside the logits"):
        answer_matches(logits, 8, [1, 2, 3])
    with pytest.raises(ValueError, match=r"^start=0 must be in \[1, 3\]"):  # position -1: the last prediction
        answer_matches(logits, 0, [4, 7])
    assert answer_matches(logits, 2, [7, 1]) and not answer_matches(logits, 2, [7, 2])


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: qa_prompt(None, "who ?"), TypeError, r"^passage must be a str, got NoneType None"),  # wrote 'None'
        (lambda: qa_prompt("mira has a cat .", ""), ValueError, r"^question is empty \(''\)"),
        (lambda: share_label(math.nan), ValueError, r"^share=nan must be a finite number in \[0, 1\]"),
        (lambda: checkpoint_name(2.0), ValueError, r"^share=2 must be a finite number in \[0, 1\]; a Q/A share"),
    ],
    ids=["None passage", "empty question", "NaN share", "share above 1"],
)
def test_zero_shot_helpers_name_bad_text_and_shares(call, error, message):
    with pytest.raises(error, match=message):
        call()
    assert checkpoint_name(0.02) == "zero-shot-qa020" and qa_prompt("p", "q").endswith("q : q\na :")


def test_share_text_refuses_a_share_outside_0_1():
    from onehot2gpt.zero_shot import share_text

    assert share_text(0.005) == "0.5%"
    with pytest.raises(ValueError, match="share=2 must be a finite number in"):
        share_text(2.0)
