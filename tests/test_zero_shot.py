"""The zero-shot experiment: the corpus keeps its promises, the tests are held out, scoring is exact."""

import re

import pytest
import torch
from torch import nn

from onehot2gpt import zero_shot as zs
from onehot2gpt.gpt import GPT, GPTConfig, GPTOutput
from onehot2gpt.sampling import generate

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup():
    return zs.setup(n_test_items=40)


@pytest.fixture(scope="module")
def corpora(setup):
    return {share: zs.make_corpus(setup.world, setup.train_pairs, qa_share=share, n_documents=1500)
            for share in (0.0, 0.02, 0.1)}


def test_world_is_reproducible_and_split():
    a, b = zs.World(0), zs.World(0)
    assert a.people == b.people
    assert zs.World(1).people != a.people
    assert len(a.test_people) == 12 and not set(a.test_people) & set(a.train_people)
    with pytest.raises(KeyError, match="nobody called"):
        a.person("gandalf")
    with pytest.raises(ValueError, match="n_test"):
        zs.World(0, n_test=0)


def test_corpora_differ_only_in_the_qa_lines(corpora):
    base = corpora[0.0]
    assert "qa" not in base.kinds and "q :" not in base.text()
    for share in (0.02, 0.1):
        c = corpora[share]
        assert len(c.documents) == len(base.documents)
        for doc, kind, plain, plain_kind in zip(c.documents, c.kinds, base.documents, base.kinds):
            if kind == "qa":
                assert plain_kind == "prose" and doc.startswith(plain) and doc != plain
                assert all(line.startswith(("q : ", "a : ")) for line in doc[len(plain):].splitlines())
            else:
                assert doc == plain
    qa2 = {i for i, k in enumerate(corpora[0.02].kinds) if k == "qa"}
    qa10 = {i for i, k in enumerate(corpora[0.1].kinds) if k == "qa"}
    assert qa2 < qa10                                    # the small share nests in the large one
    n = len(base.documents)
    assert 0.05 * n < len(qa10) <= 0.1 * n and 0.005 * n < len(qa2) <= 0.02 * n
    counts = base.counts()
    assert abs(counts["translation"] / n - 0.2) < 0.04 and abs(counts["tldr"] / n - 0.1) < 0.03


def test_held_out_people_are_never_asked_about_or_summarised(setup, corpora):
    text = corpora[0.1].text()
    asked = set(re.findall(r"q : [a-z ]*?\b(\w+) (?:live|do for|keep)", text))
    summarised = set(re.findall(r"tl;dr : (\w+) is a", text))
    test_names = {p.name for p in setup.world.test_people}
    assert asked and summarised
    assert not asked & test_names and not summarised & test_names
    assert {p.name for p in setup.world.train_people} >= asked | summarised
    # ... but they are in the prose: the facts are there to be read.
    assert all(p.name in text for p in setup.world.test_people)


def test_facts_are_consistent_with_the_world(setup, corpora):
    world = setup.world
    for doc, kind in zip(corpora[0.1].documents, corpora[0.1].kinds):
        for name, town in re.findall(r"(\w+) lives in (\w+) \.", doc):
            if name in zs.NAMES:
                assert world.person(name).town == town
        if kind == "qa":
            for name, town in re.findall(r"q : where does (\w+) live \?\na : (\w+) \.", doc):
                assert world.person(name).town == town


def test_translation_test_sentences_are_held_out(setup):
    train_english = {e for e, _ in setup.train_pairs}
    assert len(setup.test_pairs) == 200 and not train_english & set(setup.test_pairs)
    for refs in setup.test_pairs.values():
        assert refs and len(set(refs)) == len(refs)
    for item in setup.tests["translation"]:
        assert item.prompt.endswith(" =") and item.prompt[:-2] in setup.test_pairs
        assert all(s.split(" = ")[0] in train_english for s in item.shots)


def test_test_items_ask_about_held_out_people(setup):
    test_names = {p.name for p in setup.world.test_people}
    for item in setup.tests["qa"]:
        question = item.prompt.splitlines()[-2]
        name = next(w for w in question.split() if w in zs.NAMES)
        assert name in test_names and item.prompt.endswith("a :")
        assert item.answers[0][:-2] in {setup.world.person(name).fact(r) for r in zs.RELATIONS}
        for shot in item.shots:                    # solved examples are about training people
            (asked,) = re.findall(r"q : [a-z ]*?\b(\w+) (?:live|do for|keep)", shot)
            assert asked not in test_names
    for item in setup.tests["tldr"]:
        assert item.answers[0].split()[0] in test_names and item.prompt.endswith("tl;dr :")


def test_tokenizer_round_trip_and_unknown_words(setup, corpora):
    tok = setup.tokenizer
    for doc in corpora[0.1].documents:
        assert tok.decode(tok.encode(doc)) == doc
    assert tok.tokenize("a b\nc <eod> d") == ["a", "b", "\n", "c", "<eod>", "d"]
    assert zs.corpus_ids(setup, 0.1, n_documents=200).min() >= 0          # raises on any <unk>
    assert tok.unknown("mira lives in paris with a zebra") == ["paris", "zebra"]
    assert tok.vocab.unk_id in tok.encode("zebra")
    with pytest.raises(TypeError):
        tok.encode(["mira"])


def test_make_corpus_rejects_bad_input(setup):
    with pytest.raises(ValueError, match="qa_share"):
        zs.make_corpus(setup.world, setup.train_pairs, qa_share=0.9)
    with pytest.raises(ValueError, match="translation pairs"):
        zs.make_corpus(setup.world, [], qa_share=0.1)


def test_greedy_agrees_is_greedy_decoding():
    torch.manual_seed(0)
    model = GPT(GPTConfig.tiny(vocab_size=40, max_len=16)).eval()
    with torch.no_grad():
        model.tok_emb.weight.mul_(10.0)
    rows, starts, flips = [], [], []
    for seed in range(6):
        prompt = torch.randint(0, 40, (5,), generator=torch.Generator().manual_seed(seed))
        out = generate(model, prompt, 4, greedy=True).tolist()
        rows.append(out)
        starts.append(5)
        wrong = list(out)
        wrong[5 + seed % 4] = (wrong[5 + seed % 4] + 1) % 40
        flips.append(wrong)
    assert zs.greedy_agrees(model, rows + flips, starts * 2, batch_size=4) == [True] * 6 + [False] * 6


class Oracle(nn.Module):
    """Predicts the next token of the texts it knows (longest known prefix wins), else token 0."""

    def __init__(self, tokenizer, texts, max_len=128):
        super().__init__()
        self.config = GPTConfig.tiny(vocab_size=len(tokenizer), max_len=max_len)
        self.anchor = nn.Parameter(torch.zeros(1))
        self.next = {}
        for text in texts:
            ids = tokenizer.encode(text)
            for i in range(1, len(ids)):
                self.next[tuple(ids[:i])] = ids[i]
        self.V = len(tokenizer)

    def forward(self, ids):
        logits = torch.zeros(*ids.shape, self.V)
        for b, row in enumerate(ids.tolist()):
            for t in range(len(row)):
                logits[b, t, self.next.get(tuple(row[:t + 1]), 0)] = 1.0
        return GPTOutput(logits, None, None)


def test_evaluate_scores_exact_match(setup):
    tests = {task: items[:6] for task, items in setup.tests.items()}
    tok = setup.tokenizer
    # Knows the answer of every second item, zero-shot only; for translation only the last reference.
    known = [item.prompt + " " + item.answers[-1] + "\n" for items in tests.values()
             for item in items[::2]]
    table = zs.evaluate(Oracle(tok, known), tok, tests)
    for task in zs.TASKS:
        assert table[task] == {"zero": 0.5, "few": 0.0}
    # A wrong answer is wrong, and so is a right answer that does not end its line.
    wrong = [item.prompt + " paris .\n" for item in tests["qa"]]
    unended = [item.prompt + " " + item.answers[0] + " and more" for item in tests["qa"]]
    assert zs.evaluate(Oracle(tok, wrong), tok, {"qa": tests["qa"]})["qa"]["zero"] == 0.0
    assert zs.evaluate(Oracle(tok, unended), tok, {"qa": tests["qa"]})["qa"]["zero"] == 0.0
    with pytest.raises(ValueError, match="modes"):
        zs.evaluate(Oracle(tok, known), tok, tests, modes=("one",))


def test_greedy_matches_rejects_long_or_empty_prompts(setup):
    tok = setup.tokenizer
    model = GPT(zs.experiment_config(len(tok), max_len=8, n_layers=1))
    with pytest.raises(ValueError, match="context of 8"):
        zs.greedy_matches(model, tok, ["mira lives in tolvan . where does mira live ?"], ["tolvan ."])
    with pytest.raises(ValueError, match="empty prompt"):
        zs.greedy_matches(model, tok, [""], ["tolvan ."])


def test_a_short_training_run_learns_the_corpus(setup):
    """Two hundred updates of a small model: the loss falls well below the uniform guess."""
    model, history = zs.train_variant(setup, 0.1, n_documents=400, progress=False,
                                      config_overrides=dict(n_layers=1, d_model=32, n_heads=2),
                                      recipe=dict(iters=200, batch_size=8, block_size=64, warmup=10))
    uniform = torch.log(torch.tensor(float(len(setup.tokenizer)))).item()
    assert history["loss"][-1] < 0.6 * uniform
    table = zs.evaluate(model, setup.tokenizer, {t: items[:5] for t, items in setup.tests.items()})
    assert set(table) == set(zs.TASKS) and all(0 <= v <= 1 for row in table.values() for v in row.values())


def test_course_checkpoints_generation_agrees_with_the_one_pass_score(setup):
    """On the stored 0.5% model (right about half the time): token-by-token greedy generation writes
    the accepted answer exactly when greedy_matches says so."""
    (model, tok), = zs.load_course_models([0.005]).values()
    assert tok.vocab.itos == setup.tokenizer.vocab.itos
    items = setup.tests["qa"][:20] + setup.tests["tldr"][:5]
    verdicts = zs.greedy_matches(model, tok, [it.prompt for it in items], [it.answers[0] for it in items])
    written = [zs.greedy_answer(model, tok, it.prompt) for it in items]
    assert verdicts == [w == " " + it.answers[0] + "\n" or w == it.answers[0] + "\n"
                        for w, it in zip(written, items)]
    assert 0 < sum(verdicts[:20]) < 20                     # both outcomes are exercised
    with pytest.raises(ValueError, match="exceeds the model's context"):
        zs.greedy_answer(model, tok, items[0].prompt, max_new=200)


def test_load_variant_rejects_a_mismatched_vocabulary(tmp_path, setup):
    from onehot2gpt.checkpoints import checkpoint_path
    import shutil
    folder = tmp_path / "copy"
    shutil.copytree(checkpoint_path(zs.checkpoint_name(0.1)), folder)
    (folder / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        zs.load_variant(folder)
    from onehot2gpt.vocab import Vocab
    Vocab(["a", "b"], specials=zs.SPECIALS).save(folder / "vocab.json")
    with pytest.raises(ValueError, match=r"vocab\.json has sha256"):
        zs.load_variant(folder)
