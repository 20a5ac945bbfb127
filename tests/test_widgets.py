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
    assert explorer.ids == explorer.vocabs["words"].encode_tokens(["the", "cat"])
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


def test_errors_are_shown_and_state_is_kept_whole(explorer, monkeypatch):
    explorer.text.value = "the mat"
    before = explorer.tokens_html.value
    tokens, ids = explorer.tokens, explorer.ids

    def boom(*_):
        raise RuntimeError("broken tokenizer")

    monkeypatch.setitem(TokenExplorer.TOKENIZERS, "words", boom)
    explorer.text.value = "anything"  # must not raise into the kernel
    assert "broken tokenizer" in explorer.status.value
    assert explorer.tokens_html.value == before
    assert explorer.text.value == "anything"  # the student's input is kept
    # the attributes stay together with the view: tokens and ids of the same last good sentence
    assert (explorer.tokens, explorer.ids) == (tokens, ids) == (["the", "mat"], ids) and len(ids) == 2


def test_tokens_and_ids_always_describe_the_same_sentence(explorer):
    for text in ["the cat sat", "", "mat"]:
        explorer.text.value = text
        assert len(explorer.tokens) == len(explorer.ids) or len(explorer.tokens) > explorer.max_tokens


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

        self.table = {
            "cat": torch.tensor([1.0, 0.1]),
            "dog": torch.tensor([0.9, 0.2]),
            "car": torch.tensor([0.1, 1.0]),
            "bus": torch.tensor([0.2, 0.9]),
        }

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


# ---------------------------------------------------------------------------------------------
# Attention: the explorer, bertviz and the heat map


class FakeSource:
    """A deterministic attention source: tokens = text.split(), seeded random softmax maps."""

    def __init__(self, n_layers=2, n_heads=3):
        self.n_layers, self.n_heads, self.calls = n_layers, n_heads, []

    def maps(self, text):
        import torch

        tokens = text.split()
        g = torch.Generator().manual_seed(sum(map(ord, text)) + 1000 * self.n_layers)
        T = len(tokens)
        return tokens, tuple(
            torch.randn(1, self.n_heads, T, T, generator=g).mul(3).softmax(-1) for _ in range(self.n_layers)
        )

    def __call__(self, text):
        self.calls.append(text)
        return self.maps(text)


def expected_top(tokens, row, k):
    values, index = row.topk(min(k, len(tokens)))
    return [tokens[j] for j in index.tolist()], values


def assert_top(explorer, tokens, row):
    want_tokens, want_values = expected_top(tokens, row, explorer.top_k)
    assert [t for t, _ in explorer.top] == want_tokens
    assert [w for _, w in explorer.top] == pytest.approx(want_values.tolist())


TEXT = "the animal did not cross the street because it was too tired"


@pytest.fixture
def attention_explorer():
    from onehot2gpt.widgets import AttentionExplorer

    small, big = FakeSource(2, 3), FakeSource(4, 5)
    explorer = AttentionExplorer({"small": small, "big": big}, text=TEXT, token="it", top_k=4)
    return explorer, small, big


def test_attention_explorer_shows_the_chosen_row(attention_explorer):
    explorer, small, _ = attention_explorer
    tokens, maps = small.maps(TEXT)
    assert explorer.tokens == tokens
    assert explorer.token.value == tokens.index("it")
    assert (explorer.layer.max, explorer.head.max) == (1, 2)
    assert explorer.image.value[:4] == b"\x89PNG" and explorer.status.value == ""
    assert_top(explorer, tokens, maps[0][0, 0, tokens.index("it")])
    assert "it</b>" in explorer.top_html.value


def test_attention_explorer_follows_layer_head_average_and_token(attention_explorer):
    import torch

    explorer, small, _ = attention_explorer
    tokens, maps = small.maps(TEXT)
    explorer.layer.value, explorer.head.value = 1, 2
    torch.testing.assert_close(explorer.weights, maps[1][0, 2])
    assert_top(explorer, tokens, maps[1][0, 2, tokens.index("it")])
    explorer.token.value = 1
    assert_top(explorer, tokens, maps[1][0, 2, 1])
    explorer.average.value = True
    torch.testing.assert_close(explorer.weights, maps[1][0].mean(0))
    assert_top(explorer, tokens, maps[1][0].mean(0)[1])
    assert explorer.head.disabled
    assert len(small.calls) == 1  # moving controls only redraws


def test_attention_explorer_refits_controls_to_each_model(attention_explorer):
    import torch

    explorer, _, big = attention_explorer
    explorer.model.value = "big"
    assert (explorer.layer.max, explorer.head.max) == (3, 4)
    explorer.layer.value, explorer.head.value = 3, 4
    tokens, maps = big.maps(TEXT)
    torch.testing.assert_close(explorer.weights, maps[3][0, 4])
    assert explorer.token.value == tokens.index("it")  # the chosen token survives the switch
    explorer.model.value = "small"
    assert (explorer.layer.max, explorer.head.max) == (1, 2)
    assert (explorer.layer.value, explorer.head.value) == (1, 2)  # clamped


def test_attention_explorer_keeps_the_token_across_texts(attention_explorer):
    explorer, small, _ = attention_explorer
    explorer.token.value = explorer.tokens.index("street")
    explorer.text.value = "a quiet street at night"
    assert explorer.tokens[explorer.token.value] == "street"
    explorer.text.value = "no such word here"
    assert explorer.token.value == 0  # neither "street" nor the default "it"
    explorer.text.value = "is it raining"
    assert explorer.tokens[explorer.token.value] == "it"


def test_attention_explorer_caches_each_model_and_text(attention_explorer, monkeypatch):
    import onehot2gpt.widgets.attention as widgets

    explorer, small, big = attention_explorer
    drawn = []
    real = widgets.figure_to_png
    monkeypatch.setattr(widgets, "figure_to_png", lambda fig: drawn.append(1) or real(fig))
    explorer.text.value = "one two three"
    assert len(drawn) == 1  # refitting sliders and token list triggers no extra redraws
    explorer.text.value = TEXT
    explorer.model.value = "big"
    explorer.model.value = "small"
    explorer.text.value = "one two three"
    assert small.calls == [TEXT, "one two three"]
    assert big.calls == [TEXT]


def test_attention_explorer_reports_bad_input_and_keeps_state(attention_explorer):
    explorer, _, _ = attention_explorer
    tokens, picture = explorer.tokens, explorer.image.value
    explorer.text.value = "   "
    assert "type a sentence" in explorer.status.value
    assert explorer.tokens == tokens and explorer.image.value == picture
    explorer.layer.value = 1  # the old picture is redrawn; the message stays until the text is fixed
    assert "type a sentence" in explorer.status.value
    explorer.text.value = "fine again"
    assert explorer.status.value == "" and explorer.tokens == ["fine", "again"]


def test_attention_explorer_survives_a_failing_source():
    from onehot2gpt.widgets import AttentionExplorer

    def boom(text):
        if "bad" in text:
            raise RuntimeError("the model exploded")
        return FakeSource()(text)

    def wrong_length(text):
        tokens, maps = FakeSource()(text)
        return tokens[:-1], maps

    explorer = AttentionExplorer({"boom": boom, "short": wrong_length}, text="all good here")
    explorer.text.value = "a bad sentence"
    assert "the model exploded" in explorer.status.value
    assert explorer.tokens == ["all", "good", "here"] and explorer.text.value == "a bad sentence"
    explorer.text.value = "all good here"
    explorer.model.value = "short"
    assert "positions but there are" in explorer.status.value
    assert explorer.tokens == ["all", "good", "here"]


def test_attention_explorer_with_minilm(one_thread):
    from onehot2gpt.pretrained import hf_attention, load_minilm, minilm_source
    from onehot2gpt.widgets import AttentionExplorer

    explorer = AttentionExplorer({"MiniLM": minilm_source()}, token="it", layer=4, head=7)
    tokens, maps = hf_attention(*load_minilm(), explorer.text.value)
    assert explorer.tokens == tokens and tokens[explorer.token.value] == "it"
    assert (explorer.layer.max, explorer.head.max) == (5, 11)
    assert_top(explorer, tokens, maps[4][0, 7, tokens.index("it")])
    explorer.text.value = "word " * 600
    assert "shorten the text" in explorer.status.value and explorer.tokens == tokens


def test_attention_explorer_with_our_own_encoder(one_thread):
    import torch
    from onehot2gpt.transformer import Seq2SeqTransformer, TransformerConfig, attention_source
    from onehot2gpt.widgets import AttentionExplorer

    vocab = Vocab.build([tokenize_words(TEXT)])
    torch.manual_seed(0)
    model = Seq2SeqTransformer(TransformerConfig.tiny(vocab_size=len(vocab), n_layers=3))
    explorer = AttentionExplorer(
        {"ours": attention_source(model, vocab, tokenize_words)}, text=TEXT, token="it", layer=2, head=1
    )
    ids = torch.tensor([vocab.encode_tokens(tokenize_words(TEXT))])
    maps = model.eval().encode(ids, output_attentions=True)[2]
    tokens = tokenize_words(TEXT)
    assert (explorer.layer.max, explorer.head.max) == (2, 1)
    assert_top(explorer, tokens, maps[2][0, 1, tokens.index("it")])
    explorer.text.value = "the zebra crossed"
    assert "zebra" in explorer.status.value and explorer.tokens == tokens


def test_bertviz_views_contain_the_tokens():
    from IPython.display import HTML
    from onehot2gpt.widgets import bertviz_view

    tokens, maps = FakeSource()("zebra quokka narwhal")
    for view in ("head", "model"):
        page = bertviz_view(maps, tokens, view=view)
        assert isinstance(page, HTML)
        assert all(f'"{t}"' in page.data for t in tokens)
    pair = bertviz_view(maps, tokens, sentence_b_start=1)
    assert "Sentence A -> Sentence B" in pair.data


def test_bertviz_view_rejects_what_bertviz_would_garble():
    import torch
    from onehot2gpt.widgets import bertviz_view

    tokens, maps = FakeSource()("zebra quokka narwhal")
    stacked = torch.cat(maps)  # (L, H, T, T)
    with pytest.raises(TypeError, match="torch.from_numpy"):
        bertviz_view(stacked.numpy(), tokens)
    with pytest.raises(TypeError, match="torch.from_numpy"):
        bertviz_view([m.numpy() for m in maps], tokens)
    with pytest.raises(TypeError, match=r"list\(stacked.unsqueeze\(1\)\)"):
        bertviz_view(stacked, tokens)
    with pytest.raises(ValueError, match=r"unsqueeze\(0\)"):
        bertviz_view([m[0] for m in maps], tokens)
    with pytest.raises(ValueError, match="batch of size 1"):
        bertviz_view([m.expand(2, -1, -1, -1) for m in maps], tokens)
    with pytest.raises(ValueError, match="3 positions but there are 2 tokens"):
        bertviz_view(maps, tokens[:2])
    with pytest.raises(ValueError, match="empty.*eager"):
        bertviz_view((), tokens)
    with pytest.raises(ValueError, match="same"):
        bertviz_view([maps[0], maps[1][:, :2]], tokens)
    with pytest.raises(ValueError, match="view='neuron' must be one of 'head', 'model'"):
        bertviz_view(maps, tokens, view="neuron")
    with pytest.raises(ValueError, match=r"sentence_b_start=3 must be in \[1, 2\]"):
        bertviz_view(maps, tokens, sentence_b_start=3)


def test_the_fixes_the_messages_suggest_work():
    import torch
    from onehot2gpt.widgets import validate_attentions

    tokens, maps = FakeSource()("zebra quokka narwhal")
    stacked = torch.cat(maps)  # (L, H, T, T)
    for fixed in (
        list(stacked.unsqueeze(1)),
        [torch.from_numpy(a)[None] for a in stacked.numpy()],
        [m[0].unsqueeze(0) for m in maps],
        [m.expand(2, -1, -1, -1)[:1] for m in maps],
    ):
        for got, want in zip(validate_attentions(fixed, tokens), maps, strict=True):
            torch.testing.assert_close(got, want)


def test_plot_attention_draws_and_validates():
    import matplotlib.pyplot as plt
    import torch
    from onehot2gpt.plots import plot_attention

    weights = torch.tensor([[1.0, 0.0, 0.0], [0.5, 0.5, 0.0], [0.2, 0.3, 0.5]])
    ax = plot_attention(weights, ["a", "b", "c"], highlight=1)
    assert isinstance(ax, plt.Axes)
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("attended to (key)", "attending (query)")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["a", "b", "c"]
    assert len(ax.patches) == 1  # the highlighted row
    plt.close(ax.figure)
    ax = plot_attention(weights[:2], ["a", "b"], ["x", "y", "z"])
    assert [t.get_text() for t in ax.get_xticklabels()] == ["x", "y", "z"]
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="one head"):
        plot_attention(weights[0], ["a", "b", "c"])
    with pytest.raises(ValueError, match=r"\(3, 3\) need 3 query and 3 key labels, got 2"):
        plot_attention(weights, ["a", "b"])


# BERT widgets (notebook 07) ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def bert_tokenizer():
    from onehot2gpt.subword import WordPieceTokenizer

    text = "harry potter is a series of fantasy novels written by british author j . k . rowling"
    return WordPieceTokenizer.train([text] * 3, vocab_size=80, min_frequency=1)


def test_masking_explorer_shows_the_80_10_10_outcomes(bert_tokenizer):
    import torch
    from onehot2gpt.bert_pretraining import mask_tokens
    from onehot2gpt.widgets import MaskingExplorer

    explorer = MaskingExplorer(bert_tokenizer, prob=0.5, seed=3)
    enc = bert_tokenizer.encode_words(explorer.text.value.split())
    specials = [
        bert_tokenizer.pad_id,
        bert_tokenizer.unk_id,
        bert_tokenizer.cls_id,
        bert_tokenizer.sep_id,
        bert_tokenizer.mask_id,
    ]
    inputs, labels = mask_tokens(
        torch.tensor([enc["input_ids"]]),
        mask_id=bert_tokenizer.mask_id,
        vocab_size=len(bert_tokenizer),
        special_ids=specials,
        prob=0.5,
        generator=torch.Generator().manual_seed(3),
    )
    assert explorer.labels == labels[0].tolist()
    assert explorer.inputs == bert_tokenizer.convert_ids_to_tokens(inputs[0].tolist())
    for token, shown, kind, label in zip(explorer.tokens, explorer.inputs, explorer.kinds, explorer.labels):
        assert (kind == "") == (label == -100)
        assert kind != "mask" or shown == "[MASK]"
        assert kind != "same" or shown == token
    assert explorer.kinds[0] == explorer.kinds[-1] == ""  # [CLS], [SEP] never chosen
    before = explorer.labels
    explorer.seed.value = 4
    assert explorer.labels != before


def test_masking_explorer_whole_words_and_empty_text(bert_tokenizer):
    from onehot2gpt.widgets import MaskingExplorer

    explorer = MaskingExplorer(bert_tokenizer, text="rowling rowling rowling", prob=0.5, whole_word=True)
    pieces_per_word = len(bert_tokenizer.wordpiece("rowling"))
    chosen = [k != "" for k in explorer.kinds[1:-1]]
    for w in range(3):
        group = chosen[w * pieces_per_word : (w + 1) * pieces_per_word]
        assert all(group) or not any(group)
    tokens = explorer.tokens
    explorer.text.value = "   "
    assert "type a sentence" in explorer.status.value and explorer.tokens == tokens


def test_fill_in_the_blank_shows_predictions_and_errors():
    from onehot2gpt.widgets import FillInTheBlank

    def predict(text, k):
        if "[MASK]" not in text:
            raise ValueError("no [MASK] in the text")
        return [(i, [(f"w{j}", 1 / (j + 2)) for j in range(k)]) for i, w in enumerate(text.split()) if w == "[MASK]"]

    widget = FillInTheBlank(predict, text="a [MASK] b [MASK]", top_k=3)
    assert [p for p, _ in widget.predictions] == [1, 3]
    assert len(widget.predictions[0][1]) == 3 and "w2" in widget.output.value
    widget.top_k.value = 5
    assert len(widget.predictions[0][1]) == 5
    widget.text.value = "no blank here"
    assert "no [MASK]" in widget.status.value and len(widget.predictions) == 2


def test_fill_in_the_blank_opens_on_a_sentence_the_course_bert_gets_right():
    from onehot2gpt.bert import fill_mask
    from onehot2gpt.checkpoints import load
    from onehot2gpt.widgets import FillInTheBlank

    bert, tokenizer, _, _ = load("bert-wikitext2")
    widget = FillInTheBlank(lambda text, k: fill_mask(bert, tokenizer, text, k))
    ((_, guesses),) = widget.predictions
    assert guesses[0][0] == "century", f"the default sentence {widget.text.value!r} now gets {guesses}"
    assert guesses[0][1] > 2 * guesses[1][1], "the right answer should stand well clear of the next guess"


# Sampling (notebook 09) -------------------------------------------------------------------------

SHAKESPEARE = "to be, or not to be: that is the question.\n"
CHARS = sorted(set(SHAKESPEARE))


def char_encode(text):
    return [CHARS.index(c) if c in CHARS else {}[c] for c in text]  # KeyError for unknown characters


def char_decode(ids):
    return "".join(CHARS[i] for i in ids)


@pytest.fixture(scope="module")
def tiny_gpt():
    import torch
    from onehot2gpt.gpt import GPT, GPTConfig

    torch.manual_seed(0)
    return GPT(GPTConfig.tiny(vocab_size=len(CHARS))).eval()  # max_len 16


def sampling_explorer(model, **kwargs):
    from onehot2gpt.widgets import SamplingExplorer

    return SamplingExplorer(model, char_encode, char_decode, **{"prompt": "to be", "length": 30, **kwargs})


def test_sampling_explorer_shows_the_next_token_distribution(tiny_gpt, one_thread):
    import torch
    from onehot2gpt.sampling import next_token_distribution

    w = sampling_explorer(tiny_gpt, temperature=0.7)
    ids = torch.tensor(char_encode("to be"))
    torch.testing.assert_close(w.probs, next_token_distribution(tiny_gpt, ids, 0.7))
    assert sum(p for _, p in w.distribution) == pytest.approx(1, abs=1e-5)
    assert [t for t, _ in w.distribution] == [char_decode([int(i)]) for i in w.probs.argsort(descending=True)]
    assert len(w.top) == 15 and w.status.value == "" and "to be" in w.table.value
    w.top_k.value = 3
    torch.testing.assert_close(w.probs, next_token_distribution(tiny_gpt, ids, 0.7, top_k=3))
    assert sum(p > 0 for _, p in w.distribution) == 3 and int((w.probs > 0).sum()) == 3
    assert w.table.value.count("removed by top-k") == 12  # the 15 rows shown, less the 3 kept
    torch.testing.assert_close(w.probs_before, next_token_distribution(tiny_gpt, ids, 0.7))
    w.top_k.value, w.top_p.value = 0, 0.3
    torch.testing.assert_close(w.probs, next_token_distribution(tiny_gpt, ids, 0.7, top_p=0.3))
    kept = int((w.probs > 0).sum())
    assert 1 <= kept < len(CHARS) and w.table.value.count("removed by top-p") == 15 - kept
    w.temperature.value = 0.0  # greedy: all the mass on the argmax
    assert w.distribution[0][1] == 1.0 and sum(p > 0 for _, p in w.distribution) == 1


def test_sampling_explorer_generates_reproducibly(tiny_gpt, one_thread):
    import torch
    from onehot2gpt.sampling import generate

    w = sampling_explorer(tiny_gpt, temperature=1.5)
    assert w.continuation == ""
    w.generate()
    first = w.continuation
    assert len(w.generated_ids) == 30 and first == char_decode(w.generated_ids)
    w.button.click()  # the button does the same, with the same seed
    assert w.continuation == first
    with pytest.warns(UserWarning, match="context"):  # 5 + 30 tokens: a sliding window over 16
        expected = generate(
            tiny_gpt,
            torch.tensor(char_encode("to be")),
            30,
            temperature=1.5,
            generator=torch.Generator().manual_seed(0),
        )
    assert w.generated_ids == expected[5:].tolist()
    w.seed.value = 1
    w.generate()
    assert w.continuation != first
    assert "<b style='background:#dde7f3'>to be</b>" in w.output.value  # the prompt stands out
    w.temperature.value = 0.0
    w.generate()
    with pytest.warns(UserWarning, match="context"):
        greedy = generate(tiny_gpt, torch.tensor(char_encode("to be")), 30, temperature=0)
    assert w.generated_ids == greedy[5:].tolist() and "greedy" in w.output.value
    w.seed.value = 7
    w.generate()
    assert w.generated_ids == greedy[5:].tolist()  # greedy ignores the seed


def test_sampling_explorer_reports_bad_prompts_and_keeps_its_output(tiny_gpt, one_thread):
    w = sampling_explorer(tiny_gpt, temperature=1.5)
    w.generate()
    continuation, probs, table, output = w.continuation, w.probs, w.table.value, w.output.value
    for prompt, message in (("", "prompt is empty"), ("to bx", "does not know &#x27;x&#x27;")):
        w.prompt.value = prompt  # must not raise into the kernel
        assert message in w.status.value
        assert w.probs is probs and w.table.value == table
        w.generate()
        assert message in w.status.value
        assert (w.continuation, w.output.value) == (continuation, output)
        assert w.prompt.value == prompt  # the student's input is kept
    w.top_k.value = 2  # moving a slider re-reads the (still bad) prompt
    assert "does not know" in w.status.value and w.probs is probs
    w.prompt.value = "to be"
    assert w.status.value == "" and int((w.probs > 0).sum()) == 2


def test_sampling_explorer_crops_a_long_prompt_with_a_notice(tiny_gpt, one_thread):
    import warnings

    import torch
    from onehot2gpt.sampling import generate, next_token_distribution

    w = sampling_explorer(tiny_gpt, temperature=1.5)
    w.generate()
    continuation = w.continuation
    long = "to be, or not to be: that is"  # 28 characters, the context is 16
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w.prompt.value = long
    assert not caught  # cropped by the widget, which says so in .status
    assert "28 tokens" in w.status.value and "max_len=16" in w.status.value
    assert f"the last 16, “{long[-16:]}”" in w.status.value
    torch.testing.assert_close(w.probs, next_token_distribution(tiny_gpt, torch.tensor(char_encode(long[-16:])), 1.5))
    assert w.continuation == continuation  # nothing generated until asked
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        w.generate()
    assert not caught
    assert "28 tokens" in w.status.value and "reads only the last 16" in w.output.value
    with pytest.warns(UserWarning, match="context"):
        expected = generate(
            tiny_gpt, torch.tensor(char_encode(long)), 30, temperature=1.5, generator=torch.Generator().manual_seed(0)
        )
    assert w.generated_ids == expected[28:].tolist()


def test_sampling_explorer_survives_a_failing_model(tiny_gpt):
    from onehot2gpt.widgets import SamplingExplorer

    w = sampling_explorer(tiny_gpt)
    w.model = None  # anything that raises inside the model call
    w.prompt.value = "that"
    w.generate()
    assert "⚠" in w.status.value
    with pytest.raises(ValueError, match="top_k"):
        SamplingExplorer(tiny_gpt, char_encode, char_decode, top_k=0)


# -- the zero-shot prompter -------------------------------------------------------------------


def test_render_prompt_shapes_and_errors():
    from onehot2gpt.widgets import render_prompt

    assert (
        render_prompt("Q: … A:", "mira lives in tolvan .", "where does mira live?")
        == "mira lives in tolvan .\nQ: where does mira live?\nA:"
    )
    assert render_prompt("TL;DR:", " a story ", examples=["x\nTL;DR: y"]) == "x\nTL;DR: y\na story\nTL;DR:"
    assert render_prompt("english = french", "i am tired .", examples=("a = b\n",)) == "a = b\ni am tired . ="
    assert render_prompt("free text", "anything", examples=["ignored"]) == "anything"
    with pytest.raises(ValueError, match="input is empty"):
        render_prompt("TL;DR:", "   ")
    with pytest.raises(ValueError, match="question is empty"):
        render_prompt("Q: … A:", "a passage")
    with pytest.raises(ValueError, match="template='summarise:' must be one of 'Q: … A:', 'TL;DR:'"):
        render_prompt("summarise:", "a passage")


def zero_shot_prompter(model, **kwargs):
    from onehot2gpt.widgets import ZeroShotPrompter

    return ZeroShotPrompter(
        {"tiny": (model, char_encode, char_decode)},
        **{"template": "free text", "text": "to be", "max_tokens": 6, **kwargs},
    )


def test_zero_shot_prompter_greedy_matches_generate_with_probabilities(tiny_gpt):
    import torch
    from onehot2gpt.sampling import generate

    w = zero_shot_prompter(tiny_gpt)
    w.stop_at_newline.value = False
    w.run()
    assert w.status.value == ""
    expected = generate(tiny_gpt, torch.tensor(char_encode("to be")), 6, greedy=True)[5:].tolist()
    assert [s["id"] for s in w.steps] == expected and w.continuation == char_decode(expected)
    ids = char_encode("to be")
    for s in w.steps:  # p is the model's own probability of the token
        with torch.no_grad():
            probs = torch.softmax(tiny_gpt(torch.tensor([ids])).logits[0, -1], -1)
        assert s["p"] == pytest.approx(float(probs[s["id"]]), abs=1e-6)
        assert s["alternatives"][0] == (char_decode([int(probs.argmax())]), pytest.approx(float(probs.max()), abs=1e-6))
        ids.append(s["id"])
    assert all(char_decode([s["id"]]) in w.output.value for s in w.steps if s["token"].isalpha())


def test_zero_shot_prompter_sampling_is_seeded_and_top_k_1_is_greedy(tiny_gpt):
    w = zero_shot_prompter(tiny_gpt, max_tokens=10)
    w.stop_at_newline.value = False
    w.run()
    greedy = w.continuation
    w.greedy.value = False
    w.temperature.value = 2.0
    runs = []
    for seed in (0, 0, 1):
        w.seed.value = seed
        w.run()
        runs.append(w.continuation)
    assert runs[0] == runs[1] and runs[0] != runs[2]
    w.top_k.value = 1
    w.run()
    assert w.continuation == greedy


def test_zero_shot_prompter_stops_at_the_line_end(tiny_gpt):
    from onehot2gpt.widgets import ZeroShotPrompter

    w = zero_shot_prompter(tiny_gpt)
    w.run()
    first = w.steps[0]["id"]
    decode = lambda ids: "\n" if list(ids) == [first] else char_decode(ids)  # noqa: E731
    w = ZeroShotPrompter({"tiny": (tiny_gpt, char_encode, decode)}, template="free text", text="to be")
    w.run()
    assert len(w.steps) == 1 and w.continuation == "\n"
    w.stop_at_newline.value = False
    w.run()
    assert len(w.steps) == w.max_tokens.value


def test_zero_shot_prompter_templates_examples_and_bad_input(tiny_gpt):
    w = zero_shot_prompter(tiny_gpt, examples={"TL;DR:": ["an example\nTL;DR: short"]})
    w.template.value = "TL;DR:"
    assert w.prompt.value == "to be\nTL;DR:"
    w.shots.value = 1
    assert w.prompt.value == "an example\nTL;DR: short\nto be\nTL;DR:"
    w.shots.value = 2
    assert "only 1 solved examples" in w.status.value and w.prompt.value.startswith("an example")
    w.template.value = "free text"
    w.run()
    kept = w.continuation
    w.prompt.value = "   "
    w.run()
    assert "prompt is empty" in w.status.value and w.continuation == kept
    w.prompt.value = "to be, or not to be: that is"  # 28 characters, context 16
    w.run()
    assert "28 tokens" in w.status.value and "last 10 tokens" in w.status.value and len(w.steps) <= 6
    w.prompt.value = "to be?"  # '?' is not a character of this model
    w.run()
    assert "cannot encode the prompt" in w.status.value and "&#x27;?&#x27;" in w.status.value
    w.prompt.value = "to be"
    w.max_tokens.value = 16
    w.run()
    assert "do not fit the model&#x27;s context of 16" in w.status.value


def test_zero_shot_prompter_gpt2_choice_offline_and_online(tiny_gpt):
    from onehot2gpt.widgets import ZeroShotPrompter

    def offline():
        raise OSError("could not load the model 'gpt2': needs internet")

    w = ZeroShotPrompter(
        {"tiny": (tiny_gpt, char_encode, char_decode)}, gpt2=offline, template="free text", text="to be"
    )
    w.model_choice.value = "GPT-2 (downloads once)"
    assert "needs internet" in w.status.value and w.model_choice.value == "tiny"
    w.run()
    assert w.steps and "tiny" in w.output.value
    w = ZeroShotPrompter(
        {"tiny": (tiny_gpt, char_encode, char_decode)},
        gpt2=lambda: (tiny_gpt, char_encode, char_decode),
        template="free text",
        text="to be",
    )
    w.model_choice.value = "GPT-2 (downloads once)"
    assert w.status.value == "" and "GPT-2 (downloads once)" in w.models
    with pytest.raises(TypeError, match="model, encode, decode"):
        ZeroShotPrompter({"tiny": tiny_gpt})
    with pytest.raises(ValueError, match="shots"):
        ZeroShotPrompter({"tiny": (tiny_gpt, char_encode, char_decode)}, shots=5)


def test_zero_shot_prompter_never_runs_a_prompt_its_inputs_no_longer_make(tiny_gpt):
    w = zero_shot_prompter(tiny_gpt, template="TL;DR:", examples={"TL;DR:": ["an example\nTL;DR: short"]})
    w.run()
    steps, prompt = w.steps, w.prompt_text
    w.shots.value = 2  # only one example: the inputs are bad now
    assert "only 1 solved examples" in w.status.value
    w.run()  # the old prompt is still in the box …
    assert "fix the input first" in w.status.value  # … but it is not run, and the error stays
    assert w.steps is steps and w.prompt_text == prompt
    w.prompt.value = "to be or"  # typing a prompt by hand makes it the input
    w.run()
    assert w.status.value == "" and w.prompt_text == "to be or"


def test_sampling_explorer_says_when_the_model_diverged(tiny_gpt, one_thread):
    import copy

    import torch

    broken = copy.deepcopy(tiny_gpt)
    with torch.no_grad():
        next(broken.parameters()).fill_(float("nan"))  # what lr=100 leaves behind
    w = sampling_explorer(broken)
    assert "NaN" in w.status.value and "lower" in w.status.value
    w.generate()
    assert "NaN" in w.status.value and "learning rate" in w.status.value
    assert "cannot convert" not in w.status.value
