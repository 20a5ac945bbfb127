import pytest
import torch
from onehot2gpt.vocab import (
    PAD,
    SPECIALS,
    UNK,
    Vocab,
    bag_of_words,
    cosine_similarity,
    one_hot,
    tokenize_chars,
    tokenize_words,
)


@pytest.mark.parametrize(
    "text", ["", "hello world", "naïve café, déjà vu!", "潮水 退了 就 知道", "emoji 🙂 ok", "tabs\tand\nnewlines"]
)
def test_char_tokens_round_trip(text):
    import unicodedata

    assert "".join(tokenize_chars(text)) == unicodedata.normalize("NFC", text)


def test_word_tokenizer_splits_punctuation_and_keeps_contractions():
    assert tokenize_words("Don't stop, well-known!") == ["don't", "stop", ",", "well-known", "!"]
    assert tokenize_words("ABC", lower=False) == ["ABC"]
    assert tokenize_words("") == []


def test_every_chinese_character_is_a_token():
    assert tokenize_words("潮水退了 ok") == ["潮", "水", "退", "了", "ok"]


def test_tokenizers_reject_non_strings():
    with pytest.raises(TypeError, match="join"):
        tokenize_words(["a", "b"])


def test_build_orders_by_frequency_and_applies_cut_off():
    vocab = Vocab.build([["b", "a", "b", "c"], ["b", "a"]], min_freq=2)
    assert vocab.itos == list(SPECIALS) + ["b", "a"]
    assert vocab.counts == {"b": 3, "a": 2}
    assert len(vocab) == 6 and "c" not in vocab


def test_max_size_keeps_most_frequent():
    vocab = Vocab.build([list("aaabbc")], max_size=2)
    assert vocab.itos[len(SPECIALS) :] == ["a", "b"]


def test_unknown_tokens_map_to_unk_or_raise_when_strict():
    vocab = Vocab.build([["x", "y"]])
    assert vocab.encode_tokens(["x", "zebra"]) == [vocab["x"], vocab.unk_id]
    with pytest.raises(KeyError, match="zebra"):
        vocab.encode_tokens(["zebra"], strict=True)
    with pytest.raises(KeyError, match="'z' is not in the vocabulary"):
        vocab.encode("xz", strict=True)  # one-character tokens: the text is split into characters


def test_encode_decode_round_trip_with_unicode():
    tokens = tokenize_words("Déjà vu: 潮水 退了!")
    vocab = Vocab.build([tokens])
    assert vocab.decode_tokens(vocab.encode_tokens(tokens)) == tokens
    assert vocab.decode_tokens(torch.tensor(vocab.encode_tokens(tokens))) == tokens
    assert vocab.encode_tokens([]) == [] and vocab.decode_tokens([]) == []


def test_encode_takes_a_text_and_decode_gives_one_back_split_as_the_vocabulary_says():
    words = Vocab.build([tokenize_words("the cat sat on the mat")])
    assert words.split == "words"
    tokens = ["the", "cat", "sat", ",", "on", "the", "mat"]
    assert words.encode("The cat sat, on the mat") == words.encode_tokens(tokens)
    assert words.decode(words.encode("the cat sat on the mat")) == "the cat sat on the mat"
    chars = Vocab.build([list("to be or not")])
    assert chars.split == "chars"
    assert chars.decode(chars.encode("not to be")) == "not to be"
    assert Vocab(["ab", "c"], split="chars").encode("abc") == [1, 1, 5]  # split given: every character
    with pytest.raises(ValueError, match="split='bytes' must be one of 'words', 'chars'"):
        Vocab(["a"], split="bytes")


@pytest.mark.parametrize(
    "bad, error", [([], ValueError), ([[]], ValueError), ("some text", TypeError), (["a string", "b"], TypeError)]
)
def test_build_rejects_bad_input_with_advice(bad, error):
    with pytest.raises(error):
        Vocab.build(bad)


def test_encode_and_decode_refuse_bad_input_with_advice():
    vocab = Vocab.build([["a"]])
    with pytest.raises(TypeError, match="encode_tokens takes a list of tokens"):
        vocab.encode_tokens("a b")
    with pytest.raises(TypeError, match="text must be a str, got list.*encode_tokens"):
        vocab.encode(["a", "b"])
    with pytest.raises(ValueError, match="text is empty"):
        vocab.encode("")
    for decode in (vocab.decode, vocab.decode_tokens):
        with pytest.raises(IndexError, match="outside"):
            decode([len(vocab)])


def test_save_load_round_trip(tmp_path):
    vocab = Vocab.build([tokenize_words("the cat sat on the 墊子")])
    vocab.save(tmp_path / "v.json")
    loaded = Vocab.load(tmp_path / "v.json")
    assert loaded.itos == vocab.itos and loaded.counts == vocab.counts and loaded.split == "words"
    Vocab(["a", "b"], split="words").save(tmp_path / "w.json")
    assert Vocab.load(tmp_path / "w.json").split == "words"  # a split that inference would not give


def test_specials_come_first_with_fixed_ids():
    vocab = Vocab(["a"])
    assert (vocab.pad_id, vocab.unk_id, vocab.stoi["<bos>"], vocab.stoi["<eos>"]) == (0, 1, 2, 3)
    assert vocab.itos[0] == PAD and vocab.itos[1] == UNK


def test_one_hot_rows_have_a_single_one_at_the_id():
    ids = torch.tensor([[3, 0, 2], [1, 1, 4]])
    out = one_hot(ids, 5)
    assert out.shape == (2, 3, 5) and out.dtype == torch.float32
    assert torch.equal(out.sum(-1), torch.ones(2, 3))
    assert torch.equal(out.argmax(-1), ids)


def test_one_hot_rejects_ids_outside_the_vocabulary():
    with pytest.raises(IndexError, match="0…2"):
        one_hot([0, 3], 3)
    with pytest.raises(IndexError):
        one_hot([-1], 3)


def test_different_one_hot_vectors_are_orthogonal():
    vectors = one_hot(torch.arange(6), 6)
    sims = cosine_similarity(vectors[:, None, :], vectors[None, :, :])
    assert torch.equal(sims, torch.eye(6))


def test_bag_of_words_counts_and_ignores_order():
    assert torch.equal(bag_of_words([2, 0, 2], 4), torch.tensor([1.0, 0, 2, 0]))
    assert torch.equal(bag_of_words([1, 2, 3], 4), bag_of_words([3, 2, 1], 4))


def test_cosine_matches_torch():
    a, b = torch.randn(7, 4), torch.randn(7, 4)
    torch.testing.assert_close(cosine_similarity(a, b), torch.nn.functional.cosine_similarity(a, b))
