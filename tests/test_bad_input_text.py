"""Bad input to the course's tokenizers and text vectors (issue 48): control and zero-width
characters never come back as tokens, from any tokenizer; a bag of words of a batch is one bag
per row."""

import math
import unicodedata

import pytest
import torch
from onehot2gpt.data import make_date_pairs
from onehot2gpt.qa import squad_exact_match, squad_f1, squad_normalize, word_spans
from onehot2gpt.subword import WordPieceTokenizer, longest_first, pretokenize
from onehot2gpt.utils import InvalidIds
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


@pytest.fixture(scope="module")
def wordpiece():
    return WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "##b", "bank"])


@pytest.mark.parametrize(
    "ids, message",
    [
        (1.0, r"^ids holds float 1\.0: token ids are ints"),  # 'float' object is not iterable
        ([5, 6.7], r"^ids holds float 6\.7: token ids are ints \(a float is never rounded\)"),  # read as id 6
        ([True], r"^ids holds bool True"),
        ("ab", r"^ids holds str 'a'"),
    ],
    ids=["a float", "a float in a list", "a bool", "a string"],
)
def test_convert_ids_to_tokens_refuses_what_is_not_an_id(wordpiece, ids, message):
    with pytest.raises(InvalidIds, match=message):
        wordpiece.convert_ids_to_tokens(ids)


def test_convert_ids_to_tokens_still_takes_ints_lists_and_tensors(wordpiece):
    assert wordpiece.convert_ids_to_tokens(7) == "bank"
    assert wordpiece.convert_ids_to_tokens(torch.tensor(7)) == "bank"
    assert wordpiece.convert_ids_to_tokens(list(torch.tensor([5, 6]))) == ["a", "##b"]
    assert wordpiece.convert_ids_to_tokens(torch.tensor([5, 6])) == ["a", "##b"]


@pytest.mark.parametrize(
    "tokens, message",
    [
        (7, r"^tokens must be a str, got int 7; a token is a str, e\.g\. 'bank'; to turn ids into tokens use"),
        (["bank", 7], r"^each token must be a str, got int 7"),  # used to give [UNK] for 7, silently
    ],
    ids=["an int", "an int in a list"],
)
def test_convert_tokens_to_ids_refuses_ids(wordpiece, tokens, message):
    with pytest.raises(TypeError, match=message):
        wordpiece.convert_tokens_to_ids(tokens)
    assert wordpiece.convert_tokens_to_ids(["bank", "zzz"]) == [7, 1]


def test_wordpiece_refuses_a_word_that_is_not_text(wordpiece):
    with pytest.raises(TypeError, match=r"^word must be a str, got NoneType None; one word"):  # no len()
        wordpiece.wordpiece(None)
    assert wordpiece.wordpiece("ab") == ["a", "##b"]


def test_longest_first_refuses_a_negative_budget():
    # (3, 4, -1) used to keep -1 and 0 tokens
    with pytest.raises(ValueError, match=r"^budget=-1 must be at least 0"):
        longest_first(3, 4, -1)
    assert longest_first(6, 4, 7) == (4, 3) and longest_first(3, 4, 0) == (0, 0)


def test_vocab_lookup_refuses_an_id_for_a_token():
    vocab = Vocab(["a", "b", "c"])
    # lookup(3) used to give the <unk> id, silently
    with pytest.raises(TypeError, match=r"^token must be a str, got int 3; to turn ids into tokens use"):
        vocab.lookup(3)
    with pytest.raises(TypeError, match=r"^token must be a str, got int 5"):
        vocab.encode_tokens(["a", 5])
    assert vocab.lookup("zzz") == vocab.unk_id and vocab.lookup("b") == vocab.encode_tokens(["b"])[0]


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: squad_f1(None, ["Denver"]), r"^prediction must be a str, got NoneType None"),  # AttributeError
        (lambda: squad_exact_match(3, ["Denver"]), r"^prediction must be a str, got int 3"),
        (lambda: squad_normalize(None), r"^text must be a str, got NoneType None; an answer is a str"),
        (lambda: squad_f1("Denver", ["Denver", None]), r"^text must be a str, got NoneType None"),
        (lambda: word_spans(None), r"^text must be a str, got NoneType None"),  # expected string or bytes-like
    ],
    ids=["None prediction", "int prediction", "None text", "None gold answer", "word_spans of None"],
)
def test_squad_metrics_refuse_answers_that_are_not_text(call, message):
    with pytest.raises(TypeError, match=message):
        call()
    assert squad_f1("", ["Denver"]) == 0.0 and squad_exact_match("the Denver", ["Denver"]) == 1.0


@pytest.mark.parametrize(
    "n, error, message",
    [(2.5, TypeError, r"^n must be an int, got float 2\.5"), (0, ValueError, r"^n=0 must be at least 1")],
)
def test_make_date_pairs_names_a_bad_count(n, error, message):
    # 2.5 used to fail inside random: "'float' object cannot be interpreted as an integer"
    with pytest.raises(error, match=message):
        make_date_pairs(n)
    assert len(make_date_pairs(3)) == 3


def test_unanswerable_pairs_names_an_example_without_its_article():
    from onehot2gpt.qa import unanswerable_pairs

    with pytest.raises(ValueError, match="needs a 'title' and a 'context'"):
        unanswerable_pairs([{"context": "a b", "question": "q", "answers": []}])


@pytest.mark.parametrize(
    "tokens, specials", [("abc", ("<pad>",)), ([1, 2], ("<pad>",)), (["a", None], ("<pad>",)), (["a"], (0,))]
)
def test_vocab_refuses_a_string_or_tokens_that_are_not_strings(tokens, specials):
    with pytest.raises(TypeError, match=r"tokens and specials must be lists of strings.*list\(text\)"):
        Vocab(tokens, specials=specials)


def test_vocab_reads_an_iterator_of_tokens_once_and_keeps_them():
    assert Vocab(iter(["a", "b"]), specials=("<pad>",)).itos == ["<pad>", "a", "b"]
