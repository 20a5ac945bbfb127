"""Bad input to the course's tokenizers and text vectors (issue 48): control and zero-width
characters never come back as tokens, from any tokenizer; a bag of words of a batch is one bag
per row."""

import math
import unicodedata

import pytest
import torch
from onehot2gpt.subword import WordPieceTokenizer, pretokenize
from onehot2gpt.vocab import Vocab, bag_of_words, cosine_similarity, one_hot, tokenize_chars, tokenize_words

# NUL, bell, escape, DEL, a C1 control, soft hyphen, zero-width space / non-joiner / joiner,
# word joiner, byte-order mark
INVISIBLE = ["\x00", "\x07", "\x1b", "\x7f", "\x85", "\xad", "\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"]


def _visible(tokens):
    return not any(unicodedata.category(c) in ("Cc", "Cf") and c not in "\t\n\r" for t in tokens for c in t)


@pytest.mark.parametrize("char", INVISIBLE, ids=[f"U+{ord(c):04X}" for c in INVISIBLE])
@pytest.mark.parametrize(
    "tokenize",
    [
        tokenize_words,
        tokenize_chars,
        lambda text: tokenize_chars(text, keep_spaces=False),
        pretokenize,
        Vocab(list("abcdefg ")).tokenize,
        Vocab(["ab", "cd", "fg"]).tokenize,
    ],
    ids=[
        "tokenize_words",
        "tokenize_chars",
        "tokenize_chars(keep_spaces=False)",
        "pretokenize",
        "Vocab chars",
        "Vocab words",
    ],
)
def test_no_tokenizer_returns_control_or_zero_width_characters(tokenize, char):
    text = f"ab{char}cd e{char}{char}fg {char}"
    tokens = tokenize(text)
    assert _visible(tokens), tokens
    # dropped like BERT drops them: the word the character split stays one word
    assert "".join(tokens).replace(" ", "") == "abcdefg"


def test_tab_and_newline_stay_spaces_for_the_character_tokenizer():
    assert tokenize_chars("a\tb\nc\u200b") == ["a", "\t", "b", "\n", "c"]
    assert tokenize_chars("a\tb\nc", keep_spaces=False) == ["a", "b", "c"]
    assert tokenize_words("one\ttwo\nthree\x07") == ["one", "two", "three"]


def test_wordpiece_and_word_tokenizers_agree_on_invisible_characters():
    tok = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "zero", "width", "!"])
    text = "Zero\u200bwidth\x00 !"
    assert tok.tokenize(text) == ["[UNK]", "!"]  # "zerowidth": one word, unknown as a whole
    assert tokenize_words(text) == ["zerowidth", "!"]


def test_text_of_invisible_characters_only_gives_no_tokens():
    assert tokenize_words("\u200b\u200d\x07") == [] and tokenize_chars("\ufeff") == []
    assert Vocab.build([["a"]]).encode("\u200b") == []


def test_bag_of_words_of_a_batch_is_one_bag_per_row():
    batch = [[1, 1, 2], [3, 0, 3]]
    # it used to sum every row into one bag, (vocab_size,)
    bags = bag_of_words(batch, 4)
    assert bags.shape == (2, 4)
    for row, bag in zip(batch, bags):
        assert torch.equal(bag, bag_of_words(row, 4))
        assert torch.equal(bag, one_hot(row, 4).sum(0))
    assert torch.equal(bag_of_words(torch.tensor(batch), 4).sum(0), bag_of_words(sum(batch, []), 4))


@pytest.mark.parametrize(
    "ids, message",
    [
        ([0.5, 1.0], r"^ids holds float 0\.5 at position \[0\]"),
        ([[[1]]], r"^ids must have shape \(T,\) or \(B, T\), got \(1, 1, 1\)"),
        ([1, 9], r"^ids holds ids from 1 to 9, outside 0…3"),
    ],
    ids=["floats", "3-D", "out of range"],
)
def test_bag_of_words_refuses_bad_ids_naming_them(ids, message):
    with pytest.raises(ValueError, match=message):
        bag_of_words(ids, 4)


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: Vocab.build([["a", "b", "c"]], max_size=-1), ValueError, r"^max_size=-1 must be at least 0"),
        (lambda: Vocab.build([["a", "b", "c"]], max_size=1.5), TypeError, r"^max_size must be an int, got float 1\.5"),
        (
            lambda: cosine_similarity(torch.tensor([1.0, math.nan]), torch.tensor([1.0, 0.0])),
            ValueError,
            r"^cosine_similarity: a holds NaN or infinite values \(1 of 2\)",
        ),
        (
            lambda: cosine_similarity(torch.ones(3), torch.tensor([0.0, math.inf, 1.0])),
            ValueError,
            r"^cosine_similarity: b holds NaN or infinite",
        ),
    ],
    ids=["max_size=-1 dropped the last token", "max_size float", "NaN vector", "inf vector"],
)
def test_vocabulary_and_cosine_refuse_bad_counts_and_nan(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_wordpiece_refuses_bad_lengths_naming_them():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b"]
    tok = WordPieceTokenizer(vocab)
    with pytest.raises(TypeError, match=r"^max_len must be an int, got float 2\.5"):
        tok("ab", max_len=2.5, truncation=True)  # used to fail inside a list slice
    with pytest.raises(ValueError, match=r"^max_len=-1 must be at least 1"):
        tok.encode_batch(["ab"], max_len=-1, truncation=True)
    with pytest.raises(ValueError, match=r"^max_chars_per_word=-1 must be at least 1"):
        WordPieceTokenizer(vocab, max_chars_per_word=-1)  # used to make every word [UNK]
    assert tok("ab", max_len=3, truncation=True)["input_ids"] == [2, 5, 3]
