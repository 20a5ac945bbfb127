"""fastText: n-grams and their hashing, the subword table, training, vectors for unseen words."""

import pytest
import torch
from onehot2gpt.fasttext import FastTextVectors, char_ngrams, ngram_bucket, subword_table, train_fasttext, train_step
from onehot2gpt.vocab import Vocab
from torch.nn import functional as F


def test_char_ngrams_and_the_hash():
    assert char_ngrams("where", 3, 3) == ["<wh", "whe", "her", "ere", "re>"]
    grams = char_ngrams("where")
    assert len(grams) == 5 + 4 + 3 + 2 and "<where>" not in grams and grams[-2:] == ["<where", "where>"]
    assert char_ngrams("a", 3, 6) == ["<a>"]
    # FNV-1a, 32 bits: the published test vectors
    assert ngram_bucket("", 2**32) == 0x811C9DC5 and ngram_bucket("a", 2**32) == 0xE40C292C
    assert ngram_bucket("foobar", 2**32) == 0xBF9CF968
    assert 0 <= ngram_bucket("日本", 7) < 7


def test_subword_table_lists_each_word_then_its_ngrams():
    rows, offsets = subword_table(["ab", "where"], buckets=50, min_n=3, max_n=4)
    assert offsets.tolist() == [0, 1 + len(char_ngrams("ab", 3, 4))]
    assert rows[0] == 0 and rows[offsets[1]] == 1
    assert rows[1 : offsets[1]].tolist() == [2 + ngram_bucket(g, 50) for g in char_ngrams("ab", 3, 4)]


def test_vectors_for_known_and_unseen_words_are_the_mean_of_their_rows():
    vocab = Vocab(["where", "here"], {"where": 3, "here": 2}, specials=())
    gen = torch.Generator().manual_seed(0)
    ft = FastTextVectors(torch.randn(2, 4, generator=gen), torch.randn(11, 4, generator=gen), vocab, 3, 4)
    grams = [ft.ngram_rows[ngram_bucket(g, 11)] for g in char_ngrams("where", 3, 4)]
    torch.testing.assert_close(ft["where"], torch.stack([ft.word_rows[0], *grams]).mean(0))
    unseen = torch.stack([ft.ngram_rows[ngram_bucket(g, 11)] for g in char_ngrams("wheer", 3, 4)]).mean(0)
    torch.testing.assert_close(ft["wheer"], unseen)
    torch.testing.assert_close(ft.word_vectors().vectors[1], ft["here"])
    with pytest.raises(KeyError, match="non-empty string"):
        ft[""]


def test_training_learns_and_unseen_spellings_land_near_their_word():
    gen = torch.Generator().manual_seed(0)
    families = {"a": ["running", "runner", "runs"], "b": ["swimming", "swimmer", "swims"]}
    context = {"a": ["track", "shoes", "race"], "b": ["pool", "water", "lake"]}
    sentences = []
    for _ in range(400):
        f = "ab"[int(torch.randint(0, 2, (1,), generator=gen))]
        words = [families[f][int(torch.randint(0, 3, (1,), generator=gen))] for _ in range(2)]
        words += [context[f][int(torch.randint(0, 3, (1,), generator=gen))] for _ in range(3)]
        sentences.append(words)
    ft = train_fasttext(
        sentences,
        d_model=16,
        window=3,
        negative=3,
        min_count=1,
        sample=0,
        buckets=500,
        epochs=8,
        lr=0.1,
        batch_size=64,
        progress=False,
    )
    losses = ft.config["loss_per_epoch"]
    assert losses[-1] < losses[0]
    cos = lambda a, b: float(torch.cosine_similarity(ft[a], ft[b], dim=0))
    assert "runnning" not in ft and cos("runnning", "running") > cos("runnning", "swimming")
    assert ft.most_similar("swimmming", topn=3)[0][0].startswith("swim")


@pytest.mark.parametrize(
    "call, error, match",
    [
        (lambda: char_ngrams(5), TypeError, "word must be a str, got int 5"),
        (lambda: char_ngrams(""), ValueError, "empty word"),
        (lambda: char_ngrams("abc", 4, 3), ValueError, "min_n ≤ max_n"),
        (lambda: ngram_bucket("abc", 0), ValueError, "buckets=0 must be at least 1"),
        (lambda: train_fasttext([["a", "b"]], min_count=1, buckets=0), ValueError, "buckets=0 must be at least 1"),
        (lambda: train_fasttext([["a", "b"]], min_count=1, lr=-1), ValueError, "lr=-1 must be a finite number above 0"),
        (lambda: train_fasttext("a b"), TypeError, "list of token lists"),
        (lambda: train_fasttext([["a", "b"]], min_count=1, threads=0), ValueError, "threads=0 must be at least 1"),
    ],
)
def test_bad_input_is_refused_with_a_clear_message(call, error, match):
    with pytest.raises(error, match=match):
        call()


def test_one_thread_is_bit_reproducible_and_the_thread_count_is_restored():
    sentences = [["the", "cat", "sat", "on", "the", "mat"], ["a", "dog", "sat", "on", "a", "log"]] * 30
    before = torch.get_num_threads()
    runs = [
        train_fasttext(
            sentences,
            d_model=8,
            window=2,
            negative=2,
            min_count=1,
            sample=0,
            buckets=100,
            epochs=2,
            batch_size=32,
            threads=1,
            progress=False,
        )
        for _ in range(2)
    ]
    assert torch.equal(runs[0].word_rows, runs[1].word_rows) and torch.equal(runs[0].ngram_rows, runs[1].ngram_rows)
    assert torch.get_num_threads() == before and runs[0].config["threads"] == 1


def test_the_hand_derived_step_is_autograd_and_sgd_with_the_whole_gradient_to_every_row():
    """train_step against the same step written with autograd: the mean of each word's rows as the
    value, every row receiving the gradient of the mean in full (not its 1/n share)."""
    words_list = ["where", "here", "there", "hero"]
    rows, offsets = subword_table(words_list, buckets=50)
    g = torch.Generator().manual_seed(0)
    table = torch.randn(4 + 50, 8, generator=g)
    out_w = torch.randn(4, 8, generator=g)
    words = torch.tensor([0, 2, 0, 2, 1])  # words 0 and 2 are read twice, word 3 never
    targets = torch.tensor([1, 0, 3, 2, 2])
    noise = torch.randint(4, (5, 3), generator=g)
    lr = 0.1

    leaf_in, leaf_out = table.clone().requires_grad_(), out_w.clone().requires_grad_()
    lengths = torch.diff(offsets, append=torch.tensor([len(rows)]))
    summed = F.embedding_bag(rows, leaf_in, offsets, mode="sum")  # (V, D)
    share = (1.0 / lengths.float())[:, None]
    bags = summed * share + (summed - summed.detach()) * (1 - share)  # value: the mean; gradient: whole
    scores = (leaf_out[torch.cat([targets[:, None], noise], 1)] @ bags[words][:, :, None])[..., 0]
    loss = -(F.logsigmoid(scores[:, 0]) + F.logsigmoid(-scores[:, 1:]).sum(1)).sum()
    loss.backward()

    new_in, new_out = table.clone(), out_w.clone()
    step_loss = train_step(new_in, new_out, rows, offsets, words, targets, noise, lr)
    assert step_loss == pytest.approx(loss.item(), rel=1e-5)
    torch.testing.assert_close(new_in, table - lr * leaf_in.grad)
    torch.testing.assert_close(new_out, out_w - lr * leaf_out.grad)
    ends = offsets.tolist()[1:] + [len(rows)]
    read = {int(r) for w in (0, 1, 2) for r in rows[offsets[w] : ends[w]]}
    untouched = torch.tensor([r not in read for r in range(len(table))])  # rows of no word read here
    assert untouched.sum() >= 20 and torch.equal(new_in[untouched], table[untouched])


def test_the_step_refuses_mismatched_or_wrongly_typed_tensors():
    rows, offsets = subword_table(["where", "here"], buckets=10)
    table, out_w = torch.zeros(12, 4), torch.zeros(2, 4)
    words, targets, noise = torch.tensor([0, 1]), torch.tensor([1, 0]), torch.zeros(2, 3, dtype=torch.long)
    with pytest.raises(TypeError, match="words must be a tensor of int64 ids, got torch.float32"):
        train_step(table, out_w, rows, offsets, words.float(), targets, noise, 0.1)
    with pytest.raises(TypeError, match="table must be a floating-point tensor, got dtype torch.int64"):
        train_step(table.long(), out_w, rows, offsets, words, targets, noise, 0.1)
    with pytest.raises(ValueError, match=r"noise \(P, K\)"):
        train_step(table, out_w, rows, offsets, words, targets, noise[:1], 0.1)
    assert torch.equal(table, torch.zeros(12, 4))  # nothing was changed
