"""Widgets are driven the way a student drives them: by setting control values."""

import pytest

from onehot2gpt.vocab import Vocab, tokenize_chars, tokenize_words
from onehot2gpt.widgets import TokenExplorer


@pytest.fixture
def explorer():
    words = Vocab.build([tokenize_words("the cat sat on the mat . a dog")])
    chars = Vocab.build([tokenize_chars("the cat sat", keep_spaces=False)])
    return TokenExplorer({"words": words, "characters": chars}, text="the cat")


def test_token_explorer_shows_ids_and_one_hot(explorer):
    assert explorer.tokens == ["the", "cat"]
    assert explorer.ids == explorer.vocabs["words"].encode(["the", "cat"])
    assert "0</b> unseen" in explorer.summary.value
    assert explorer.one_hot_html.value.count("<b>1</b>") == 2


def test_unseen_words_are_counted_and_marked(explorer):
    explorer.text.value = "the zebra and the yak"
    unk = explorer.vocabs["words"].unk_id
    assert explorer.ids.count(unk) == 3
    assert "3</b> unseen" in explorer.summary.value


def test_switching_units_retokenizes(explorer):
    explorer.unit.value = "characters"
    assert explorer.tokens == list("thecat")


def test_empty_text_shows_a_prompt_not_an_error(explorer):
    explorer.text.value = "   "
    assert "Type a sentence" in explorer.summary.value
    assert explorer.status.value == ""


def test_errors_are_shown_and_state_is_kept(explorer, monkeypatch):
    explorer.text.value = "the mat"
    before = explorer.tokens_html.value

    def boom(*_):
        raise RuntimeError("broken tokenizer")
    monkeypatch.setitem(TokenExplorer.TOKENIZERS, "words", boom)
    explorer.text.value = "anything"          # must not raise into the kernel
    assert "broken tokenizer" in explorer.status.value
    assert explorer.tokens_html.value == before
    assert explorer.text.value == "anything"  # the student's input is kept


def test_long_text_is_truncated_for_display(explorer):
    explorer.max_tokens = 5
    explorer.text.value = "the cat " * 10
    assert len(explorer.ids) == 5 and "first 5" in explorer.summary.value


def test_bad_vocabs_argument():
    with pytest.raises(ValueError, match="vocabs"):
        TokenExplorer({"sentences": Vocab(["a"])})


class FakeVectors:
    """Duck-typed word vectors: four words on two axes."""

    def __init__(self):
        import torch
        self.table = {"cat": torch.tensor([1.0, 0.1]), "dog": torch.tensor([0.9, 0.2]),
                      "car": torch.tensor([0.1, 1.0]), "bus": torch.tensor([0.2, 0.9])}

    def __contains__(self, word):
        return word in self.table

    def __getitem__(self, word):
        return self.table[word]

    def most_similar(self, word, k=10):
        import torch
        v = self.table[word]
        sims = [(w, float(torch.cosine_similarity(v, u, dim=0))) for w, u in self.table.items() if w != word]
        return sorted(sims, key=lambda p: -p[1])[:k]


def test_embedding_explorer_draws_words_and_neighbours():
    from onehot2gpt.widgets import EmbeddingExplorer
    explorer = EmbeddingExplorer(FakeVectors(), words="cat, car", neighbours=1)
    assert explorer.labels == ["cat", "dog", "car", "bus"]
    assert explorer.image.value[:4] == b"\x89PNG"
    assert "dog" in explorer.table.value


def test_embedding_explorer_reports_unknown_words_and_keeps_picture():
    from onehot2gpt.widgets import EmbeddingExplorer
    explorer = EmbeddingExplorer(FakeVectors(), words="cat, car", neighbours=0)
    picture = explorer.image.value
    explorer.words.value = "cat, zebra"
    assert "zebra" in explorer.status.value and "at least two" in explorer.status.value
    assert explorer.image.value == picture and explorer.words.value == "cat, zebra"
    explorer.words.value = ""
    assert "at least two" in explorer.status.value
    explorer.neighbours.value = 2
    assert explorer.labels == ["cat", "car"]  # unchanged: nothing valid to draw yet
    explorer.words.value = "Cat, BUS"
    assert explorer.labels[0] == "cat" and "bus" in explorer.labels and explorer.status.value == ""
