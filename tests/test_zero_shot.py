"""The zero-shot experiment: the corpus keeps its promises, the tests separate reading from
recall, and scoring is exact."""

import re

import pytest
import torch
from onehot2gpt import zero_shot as zs
from onehot2gpt.gpt import GPT, GPTConfig, GPTOutput
from onehot2gpt.sampling import generate
from torch import nn

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup():
    return zs.setup(n_test_items=40)


@pytest.fixture(scope="module")
def corpora(setup):
    return {
        share: zs.make_corpus(setup.world, setup.train_pairs, qa_share=share, n_documents=1500)
        for share in (0.0, 0.02, 0.1)
    }


stated_facts = zs.stated_facts


def test_stated_facts_reads_every_wording():
    p = zs.Person("mira", "tolvan", "baker", "goat")
    for relation, templates in zs.FACT_TEMPLATES.items():
        for t in templates:
            text = "the weather in brisk is wet . " + t.format(n="mira", t="tolvan", j="baker", a="goat")
            assert stated_facts(text) == [("mira", relation, p.fact(relation))], t
    # fillers, summaries and questions state no fact; a fact inside another wording is not read twice
    assert stated_facts(
        "on market day mira walks to brisk . mira is a friend of kai . by trade mira is a baker .\n"
        "tl;dr : mira is a baker in tolvan .\nq : where does mira live ?\na : tolvan ."
    ) == [("mira", "trade", "baker")]
    with pytest.raises(TypeError):
        stated_facts(None)


def test_world_is_reproducible_and_has_known_people_and_strangers():
    a, b = zs.World(0), zs.World(0)
    assert a.people == b.people and a.strangers == b.strangers
    assert zs.World(1).people != a.people
    assert len(a.people) == 24 and len(a.strangers) == len(zs.NAMES) - 24
    assert not {p.name for p in a.people} & set(a.strangers)
    assert a.person(a.people[0].name) == a.people[0] == a.memorised(a.people[0].name)
    assert a.memorised(a.strangers[0]) is None
    with pytest.raises(KeyError, match="stranger"):
        a.person(a.strangers[0])
    with pytest.raises(KeyError, match="nobody called"):
        a.person("gandalf")
    with pytest.raises(KeyError, match="nobody called"):
        a.draw("gandalf", zs.random.Random(0))
    for bad in (0, len(zs.NAMES) - 1):
        with pytest.raises(ValueError, match="n_known"):
            zs.World(0, n_known=bad)
    for bad in (2.5, True):
        with pytest.raises(TypeError, match="n_known"):
            zs.World(0, n_known=bad)
    with pytest.raises(ValueError, match="relation"):
        a.people[0].fact("age")
    with pytest.raises(ValueError, match="town='paris' must be one of 'tolvan'"):
        a.people[0].changed("town", "paris")


def test_draw_keeps_known_facts_and_redraws_strangers():
    world, rng = zs.World(0), zs.random.Random(0)
    known = world.people[3]
    assert all(world.draw(known.name, rng) == known for _ in range(20))
    drawn = [world.draw(world.strangers[0], rng) for _ in range(60)]
    assert {p.name for p in drawn} == {world.strangers[0]}
    for relation in zs.RELATIONS:
        assert len({p.fact(relation) for p in drawn}) >= len(zs.VALUES[relation]) - 2


def test_corpora_differ_only_in_the_qa_lines(corpora):
    base = corpora[0.0]
    assert "qa" not in base.kinds and "q :" not in base.text()
    for share in (0.02, 0.1):
        c = corpora[share]
        assert len(c.documents) == len(base.documents)
        for doc, kind, plain, plain_kind in zip(c.documents, c.kinds, base.documents, base.kinds):
            if kind == "qa":
                assert plain_kind == "prose" and doc.startswith(plain) and doc != plain
                assert all(line.startswith(("q : ", "a : ")) for line in doc[len(plain) :].splitlines())
            else:
                assert doc == plain
    qa2 = {i for i, k in enumerate(corpora[0.02].kinds) if k == "qa"}
    qa10 = {i for i, k in enumerate(corpora[0.1].kinds) if k == "qa"}
    assert qa2 < qa10  # the small share nests in the large one
    n = len(base.documents)
    assert 0.07 * n < len(qa10) < 0.13 * n and 0.01 * n < len(qa2) < 0.03 * n
    counts = base.counts()
    assert abs(counts["translation"] / n - 0.2) < 0.04 and abs(counts["tldr"] / n - 0.1) < 0.03


def test_known_facts_are_fixed_and_strangers_facts_cannot_be_memorised(setup, corpora):
    world = setup.world
    seen: dict[tuple[str, str], dict[str, int]] = {}
    for name, relation, value in stated_facts(corpora[0.1].text()):
        seen.setdefault((name, relation), {}).setdefault(value, 0)
        seen[(name, relation)][value] += 1
    for p in world.people:  # a known person: one value, always the same
        for r in zs.RELATIONS:
            assert seen[(p.name, r)] == {p.fact(r): seen[(p.name, r)][p.fact(r)]}
    for name in world.strangers:  # a stranger: no value is theirs
        for r in zs.RELATIONS:
            counts = seen[(name, r)]
            assert len(counts) >= len(zs.VALUES[r]) - 3, (name, r, counts)
            assert max(counts.values()) / sum(counts.values()) < 0.35, (name, r, counts)


def test_questions_and_summaries_in_pretraining_answer_from_their_own_passage(corpora):
    """Every Q/A answer and every TL;DR is the fact its own paragraph states."""
    c = corpora[0.1]
    asked = summarised = 0
    for doc, kind in zip(c.documents, c.kinds):
        stated = {(n, r): v for n, r, v in stated_facts(doc.split("\nq :")[0].split("\ntl;dr")[0])}
        for name, answer in re.findall(r"q : where does (\w+) live \?\na : (\w+) \.", doc):
            assert stated[(name, "town")] == answer
            asked += 1
        for name, trade, town in re.findall(r"tl;dr : (\w+) is a (\w+) in (\w+) \.", doc):
            assert stated[(name, "trade")] == trade and stated[(name, "town")] == town
            summarised += 1
    assert asked > 20 and summarised > 100


def test_the_changed_facts_of_the_tests_never_occur_in_pretraining(setup, corpora):
    """A changed-fact passage states something no pre-training text states; its memorised value
    is nowhere in it; and a new-person passage is about a stranger."""
    world = setup.world
    pretraining = set(stated_facts(corpora[0.1].text()))
    for test in ("qa_changed", "qa_new"):
        for item in setup.tests[test]:
            question = item.prompt.splitlines()[-2]
            name = next(w for w in question.split() if w in zs.NAMES)
            relation = next(r for r, q in zs.QUESTIONS.items() if q.format(n=name) in question)
            value = item.answers[0][:-2]
            passage = item.prompt[: item.prompt.index("q :")]
            assert (name, relation, value) in stated_facts(passage)
            if test == "qa_new":
                assert name in world.strangers and item.memorised == ()
            else:
                known = world.person(name)
                assert item.memorised == (f"{known.fact(relation)} .",) and value != known.fact(relation)
                assert known.fact(relation) not in passage.split()
                assert (name, relation, value) not in pretraining
            for shot in item.shots:  # solved examples are about strangers
                (asked,) = re.findall(r"q : [a-z ]*?\b(\w+) (?:live|do for|keep)", shot)
                assert asked in world.strangers
    for item in setup.tests["tldr_changed"]:
        name = item.answers[0].split()[0]
        known = world.person(name)
        assert item.memorised == (zs.tldr(known),) and item.answers != item.memorised
        changed = [w for w, m in zip(item.answers[0].split(), item.memorised[0].split()) if w != m]
        assert len(changed) == 1 and changed[0] in item.prompt.split()
        wrong = next(m for w, m in zip(item.answers[0].split(), item.memorised[0].split()) if w != m)
        assert wrong not in item.prompt.split() and item.prompt.endswith("tl;dr :")
    for item in setup.tests["tldr_new"]:
        assert item.answers[0].split()[0] in world.strangers and item.memorised == ()


def test_classify_answer():
    c = zs.classify_answer
    assert c(" kestrel .\n", ["kestrel ."], ["marsh ."]) == "read"
    assert c("kestrel  .\nq : more", ["kestrel ."], ["marsh ."]) == "read"  # the first line counts
    assert c(" marsh .\n", ["kestrel ."], ["marsh ."]) == "memorised"
    assert c(" fjell .\n", ["kestrel ."], ["marsh ."]) == "other"
    assert c(" kestrel . kestrel .\n", ["kestrel ."], ["marsh ."]) == "other"
    assert c(" kestrel .", ["kestrel ."], ["marsh ."]) == "other"  # never ended its line
    assert c(" marsh .\n", ["kestrel ."]) == "other"  # nothing memorisable
    assert c(" je suis là .\n", ["je suis là .", "j'y suis ."], ["je suis là ."]) == "read"  # read first
    assert c("\n", ["kestrel ."], ["marsh ."]) == "other"
    with pytest.raises(ValueError, match="answers is empty"):
        c(" kestrel .\n", [])
    with pytest.raises(TypeError, match="not one string"):
        c(" kestrel .\n", "kestrel .")
    with pytest.raises(TypeError, match="written"):
        c(None, ["kestrel ."])
    assert zs.shares(["read", "other", "read", "memorised"]) == {"read": 0.5, "memorised": 0.25, "other": 0.25}
    with pytest.raises(ValueError, match="unknown labels"):
        zs.shares(["read", "copied"])
    with pytest.raises(ValueError, match="no labels"):
        zs.shares([])


def test_translation_test_sentences_are_held_out(setup):
    train_english = {e for e, _ in setup.train_pairs}
    assert len(setup.test_pairs) == 200 and not train_english & set(setup.test_pairs)
    for refs in setup.test_pairs.values():
        assert refs and len(set(refs)) == len(refs)
    recalled = {f for _, f in setup.train_pairs}
    for item in setup.tests["translation"]:
        assert item.prompt.endswith(" =") and item.prompt[:-2] in setup.test_pairs
        assert item.answers == tuple(setup.test_pairs[item.prompt[:-2]]) and set(item.memorised) == recalled
        assert all(s.split(" = ")[0] in train_english for s in item.shots)


def test_tokenizer_round_trip_and_unknown_words(setup, corpora):
    tok = setup.tokenizer
    for doc in corpora[0.1].documents:
        assert tok.decode(tok.encode(doc)) == doc
    assert tok.tokenize("a b\nc <eod> d") == ["a", "b", "\n", "c", "<eod>", "d"]
    assert zs.corpus_ids(setup, 0.1, n_documents=200).min() >= 0  # raises on any <unk>
    assert tok.unknown("mira lives in paris with a zebra") == ["paris", "zebra"]
    assert tok.vocab.unk_id in tok.encode("zebra")
    with pytest.raises(TypeError):
        tok.encode(["mira"])


def test_make_corpus_rejects_bad_input(setup):
    with pytest.raises(ValueError, match="qa_share"):
        zs.make_corpus(setup.world, setup.train_pairs, qa_share=0.9)
    with pytest.raises(ValueError, match="translation pairs"):
        zs.make_corpus(setup.world, [], qa_share=0.1)
    for bad in (float("nan"), -0.1):
        with pytest.raises(ValueError, match="qa_share"):
            zs.make_corpus(setup.world, setup.train_pairs, qa_share=bad)
    with pytest.raises(TypeError, match="qa_share"):
        zs.make_corpus(setup.world, setup.train_pairs, qa_share="0.1")
    with pytest.raises(ValueError, match="n_documents"):
        zs.make_corpus(setup.world, setup.train_pairs, qa_share=0.1, n_documents=0)
    with pytest.raises(ValueError, match="n=0 must be at least 1"):
        zs.make_tests(setup.world, setup.train_pairs, setup.test_pairs, n=0)


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
    """Predicts the next token of the texts it knows (longest known prefix wins), else token 0.
    Its "cache" is the ids read so far, so it runs under sampling.generate like a GPT."""

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

    def forward(self, ids, past_key_values=None, use_cache=False):
        full = ids if past_key_values is None else torch.cat([past_key_values, ids], dim=1)
        logits = torch.zeros(*ids.shape, self.V)
        offset = full.size(1) - ids.size(1)
        for b, row in enumerate(full.tolist()):
            for t in range(ids.size(1)):
                logits[b, t, self.next.get(tuple(row[: offset + t + 1]), 0)] = 1.0
        return GPTOutput(logits, None, full if use_cache else None)


def test_evaluate_labels_read_memorised_and_other(setup):
    tests = {task: items[:8] for task, items in setup.tests.items()}
    tok = setup.tokenizer
    # Zero-shot, the oracle reads items 0, 4 (the passage's line), recalls items 1, 5 where a
    # memorised line exists, and writes something else on 2, 6; few-shot it knows nothing.
    texts = []
    for items in tests.values():
        for k, item in enumerate(items):
            if k % 4 == 0:
                texts.append(item.prompt + " " + item.answers[-1] + "\n")
            elif k % 4 == 1 and item.memorised:
                texts.append(item.prompt + " " + item.memorised[0] + "\n")
            elif k % 4 == 2:
                texts.append(item.prompt + " paris .\n")
    table = zs.evaluate(Oracle(tok, texts), tok, tests)
    for task in zs.TESTS:
        memorised = 0.25 if tests[task][1].memorised else 0.0
        # the format: the first word is of the asked kind on items read or recalled, not on "paris"
        fmt = {} if task == "translation" else {"format": 0.25 + memorised}
        assert table[task]["zero"] == {"read": 0.25, "memorised": memorised, "other": 0.75 - memorised, **fmt}, task
        assert table[task]["few"] == {"read": 0.0, "memorised": 0.0, "other": 1.0, **({"format": 0.0} if fmt else {})}
    assert table["qa_changed"]["zero"]["memorised"] == 0.25 and table["qa_new"]["zero"]["memorised"] == 0.0
    # One pass per candidate line labels as generating the line and reading it does.
    oracle = Oracle(tok, texts)
    for task in ("qa_changed", "tldr_changed"):
        items = tests[task]
        written = zs.greedy_lines(oracle, tok, [it.prompt for it in items], zs.answer_length(tok, items))
        assert zs.classify(oracle, tok, items) == [
            zs.classify_answer(w, it.answers, it.memorised) for w, it in zip(written, items)
        ]
    # A right answer that does not end its line is not read.
    unended = [item.prompt + " " + item.answers[0] + " and more" for item in tests["qa_new"]]
    assert zs.evaluate(Oracle(tok, unended), tok, {"qa_new": tests["qa_new"]})["qa_new"]["zero"]["read"] == 0.0
    with pytest.raises(ValueError, match="modes"):
        zs.evaluate(Oracle(tok, texts), tok, tests, modes=("one",))
    with pytest.raises(ValueError, match="no test items"):
        zs.evaluate(Oracle(tok, texts), tok, {"qa_new": []})


def test_greedy_lines_is_greedy_answer_for_every_prompt():
    """Batched by length, with the cache: the same lines as one generation per prompt."""
    world = zs.World(0)
    tok = zs.WorldTokenizer.build(world, [("hello", "bonjour")])
    torch.manual_seed(3)
    model = GPT(GPTConfig.tiny(vocab_size=len(tok), max_len=64)).eval()
    with torch.no_grad():
        model.tok_emb.weight.mul_(5.0)
        model.tok_emb.weight[tok.vocab["\n"]].mul_(3.0)  # line breaks are written now and then
    rng = zs.random.Random(1)
    prompts = [world.prose(rng, [world.draw(n, rng) for n in rng.sample(zs.NAMES, 2)]) + "q :" for _ in range(9)] + [
        "mira",
        "mira",
        "tolvan .",
    ]
    lines = zs.greedy_lines(model, tok, prompts, max_new=6, batch_size=2)
    assert lines == [zs.greedy_answer(model, tok, p, max_new=6) for p in prompts]
    assert any(line.endswith("\n") for line in lines) and any(not line.endswith("\n") for line in lines)
    with pytest.raises(ValueError, match="prompt 1 is empty"):
        zs.greedy_lines(model, tok, ["mira", ""], max_new=3)
    with pytest.raises(ValueError, match="context of 64"):
        zs.greedy_lines(model, tok, ["mira"], max_new=64)
    with pytest.raises(ValueError, match="max_new"):
        zs.greedy_lines(model, tok, ["mira"], max_new=0)


def test_greedy_matches_rejects_long_or_empty_prompts(setup):
    tok = setup.tokenizer
    model = GPT(zs.experiment_config(len(tok), max_len=8, n_layers=1))
    with pytest.raises(ValueError, match="context of 8"):
        zs.greedy_matches(model, tok, ["mira lives in tolvan . where does mira live ?"], ["tolvan ."])
    with pytest.raises(ValueError, match="prompt is empty"):
        zs.greedy_matches(model, tok, [""], ["tolvan ."])


def test_a_short_training_run_learns_the_corpus(setup):
    """Two hundred updates of a small model: the loss falls well below the uniform guess."""
    model, history = zs.train_variant(
        setup,
        0.1,
        n_documents=400,
        progress=False,
        config_overrides=dict(n_layers=1, d_model=32, n_heads=2),
        recipe=dict(iters=200, batch_size=8, block_size=64, warmup=10),
    )
    uniform = torch.log(torch.tensor(float(len(setup.tokenizer)))).item()
    assert history["loss"][-1] < 0.6 * uniform
    table = zs.evaluate(model, setup.tokenizer, {t: items[:5] for t, items in setup.tests.items()})
    assert set(table) == set(zs.TESTS)
    for test, row in table.items():
        for mode in ("zero", "few"):
            assert set(row[mode]) == set(zs.LABELS) | ({"format"} if test != "translation" else set())
            assert abs(sum(row[mode][x] for x in zs.LABELS) - 1) < 1e-9 and 0 <= row[mode].get("format", 0) <= 1


def test_course_checkpoints_generation_agrees_with_the_one_pass_score_and_the_labels(setup):
    """On a stored model: token-by-token greedy generation writes the passage's answer exactly
    when greedy_matches says so, and classify labels what generation writes."""
    ((model, tok),) = zs.load_course_models([0.1]).values()
    assert tok.vocab.itos == setup.tokenizer.vocab.itos
    items = setup.tests["qa_new"][:12] + setup.tests["qa_changed"][:12] + setup.tests["tldr_changed"][:6]
    verdicts = zs.greedy_matches(model, tok, [it.prompt for it in items], [it.answers[0] for it in items])
    written = [zs.greedy_answer(model, tok, it.prompt) for it in items]
    assert verdicts == [w == " " + it.answers[0] + "\n" or w == it.answers[0] + "\n" for w, it in zip(written, items)]
    labels = zs.classify(model, tok, items)
    assert labels == [zs.classify_answer(w, it.answers, it.memorised) for w, it in zip(written, items)]
    assert [x == "read" for x in labels] == verdicts
    assert len(set(labels)) >= 2  # more than one outcome is exercised
    with pytest.raises(ValueError, match="exceeds the model's context"):
        zs.greedy_answer(model, tok, items[0].prompt, max_new=200)


def test_a_zero_shot_checkpoint_with_a_mismatched_vocabulary_is_refused(tmp_path, setup):
    import shutil

    from onehot2gpt.checkpoints import checkpoint_path, load

    folder = tmp_path / "copy"
    shutil.copytree(checkpoint_path(zs.checkpoint_name(0.1)), folder)
    (folder / "vocab.json").unlink()
    with pytest.raises(FileNotFoundError, match="vocab.json"):
        load(folder)
    from onehot2gpt.vocab import Vocab

    Vocab(["a", "b"], specials=zs.SPECIALS).save(folder / "vocab.json")
    with pytest.raises(ValueError, match=r"vocab\.json has sha256"):
        load(folder)


def test_qa_prompt_lays_out_every_qa_item_as_stored(setup):
    """The Q/A items keep their parts; the library's prompt writer gives back the stored text."""
    items = setup.tests["qa_new"] + setup.tests["qa_changed"]
    assert all(it.qa for it in items) and not any(it.qa for it in setup.tests["tldr_new"])
    for it in items:
        for few in (False, True):
            assert it.text(few, zs.qa_prompt) == it.text(few)
    passage, question, examples = items[0].qa
    assert len(examples) == 1 and len(examples[0]) == 3 and question.endswith("?")


def test_evaluate_runs_on_a_students_prompt_writer_and_matcher(setup):
    """evaluate's `prompt` lays out the Q/A items and `matches` scores every candidate: the
    library's own give the default table; a different layout or a matcher that accepts everything
    changes it; what is not a function, or a matcher's non-bool answer, is refused by name."""
    ((model, tok),) = zs.load_course_models([0.1]).values()
    tests = {t: setup.tests[t][:12] for t in ("qa_new", "qa_changed", "tldr_changed")}
    default = zs.evaluate(model, tok, tests)
    calls = []

    def counting(logits, start, answer_ids):
        calls.append(len(answer_ids))
        return zs.answer_matches(logits, start, answer_ids)

    assert zs.evaluate(model, tok, tests, prompt=zs.qa_prompt, matches=counting) == default
    assert calls, "the matcher decided the candidates"

    def no_answer_line(passage, question, examples=()):  # not the corpus's layout: no "a :" to continue
        return zs.qa_prompt(passage, question, examples)[: -len("\na :")]

    changed = zs.evaluate(model, tok, tests, prompt=no_answer_line)
    assert changed["qa_changed"]["zero"]["memorised"] < default["qa_changed"]["zero"]["memorised"]
    assert changed["tldr_changed"] == default["tldr_changed"]  # not a Q/A item: laid out as stored
    accepting = zs.evaluate(model, tok, tests, matches=lambda logits, start, ids: True)
    assert accepting["qa_new"]["zero"]["read"] == 1.0 != default["qa_new"]["zero"]["read"]
    with pytest.raises(TypeError, match="prompt=.* is not a function"):
        zs.evaluate(model, tok, tests, prompt="q : a :")
    with pytest.raises(TypeError, match="must return True or False"):
        zs.evaluate(model, tok, tests, matches=lambda logits, start, ids: [1, 2])
    with pytest.raises(TypeError, match="not the prompt as a str"):
        zs.evaluate(model, tok, tests, prompt=lambda p, q, e=(): None)
