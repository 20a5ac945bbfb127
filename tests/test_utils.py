"""One validator for token ids (`utils.as_ids`), used by every function that takes ids."""

import numpy as np
import pytest
import torch
from onehot2gpt.utils import InvalidIds, as_ids
from onehot2gpt.vocab import Vocab, one_hot


@pytest.mark.parametrize(
    "good, expected",
    [
        ([1, 2, 3], torch.tensor([1, 2, 3])),
        ([[1, 2], [3, 4]], torch.tensor([[1, 2], [3, 4]])),
        (torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1, 2])),
        (np.array([4, 5]), torch.tensor([4, 5])),
        ((np.int64(3), 1), torch.tensor([3, 1])),
    ],
)
def test_integer_ids_come_back_as_long_tensors(good, expected):
    got = as_ids(good, vocab_size=6)
    assert got.dtype == torch.long and torch.equal(got, expected)


@pytest.mark.parametrize(
    "bad, says",
    [
        ("ROMEO:", "encode the text"),
        ([1, 2.0], "never rounded"),  # a float in a list is not truncated
        ([[1, 2], [3, 4.7]], r"position \[1, 1\]"),
        (torch.tensor([1.0, 2.0]), "torch.float32"),
        (np.array([1.5]), "float64"),
        ([True, False], "bool"),
        (torch.ones(3, dtype=torch.bool), "bool"),
        ([[1, 2], [3]], "ragged"),
        ([], "empty"),
        ([0, 9], "outside 0…5"),
        ([-1, 2], "outside 0…5"),
        ({"input_ids": [1]}, "tensor or a list"),
        (["the", "cat"], "encode text"),
    ],
)
def test_bad_ids_are_refused_with_what_to_do(bad, says):
    with pytest.raises(InvalidIds, match=says):
        as_ids(bad, vocab_size=6)


def test_dimensions_are_checked_with_the_fix():
    with pytest.raises(InvalidIds, match=r"\(B, T\).*ids\[None\]"):
        as_ids([1, 2], dims=2)
    with pytest.raises(InvalidIds, match=r"ids\[0\]"):
        as_ids([[1, 2]], dims=1)
    assert as_ids([], dims=1, allow_empty=True).shape == (0,)


def test_invalid_ids_are_caught_by_the_old_exception_types():
    for kind in (ValueError, TypeError, IndexError):
        with pytest.raises(kind):
            as_ids([1.5])


@pytest.mark.parametrize(
    "call",
    [
        lambda: one_hot([0, 1.9], 3),
        lambda: one_hot(torch.tensor([0.0, 1.0]), 3),
        lambda: Vocab(["a", "b"]).decode([2.0]),
        lambda: Vocab(["a", "b"]).decode([99]),
    ],
)
def test_library_functions_refuse_float_ids_instead_of_truncating(call):
    with pytest.raises(InvalidIds):
        call()


# ------------------------------------------------------------------ every function that takes ids


def _tiny_models():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.gpt import GPT, GPTConfig
    from onehot2gpt.rnn_lm import LSTMLM

    torch.manual_seed(0)
    return (
        GPT(GPTConfig.tiny(vocab_size=10)).eval(),
        BertForPreTraining(
            BertConfig(vocab_size=10, d_model=8, n_layers=1, n_heads=2, d_ff=16, max_len=16, dropout=0.0)
        ).eval(),
        LSTMLM(10, d_model=8, n_layers=1, dropout=0.0),
    )


def test_every_function_that_takes_ids_refuses_float_ids_and_text_with_what_to_do():
    from onehot2gpt import bert_pretraining, gpt, sampling, word2vec
    from onehot2gpt.bert import pseudo_log_likelihood

    gpt_model, bert_model, lstm = _tiny_models()
    calls = [
        lambda ids: sampling.generate(gpt_model, ids, 2),
        lambda ids: gpt.lm_loss(gpt_model, [ids]),
        lambda ids: gpt.sequence_log_prob(gpt_model, ids),
        lambda ids: bert_model.bert([ids]),
        lambda ids: pseudo_log_likelihood(bert_model, ids, mask_id=4),
        lambda ids: lstm.generate(ids, 2),
        lambda ids: word2vec.skipgram_pairs(ids, 1),
        lambda ids: word2vec.cbow_examples(ids, 1),
        lambda ids: word2vec.context_windows(ids, 1),
        lambda ids: bert_pretraining.mask_tokens([ids], mask_id=4, vocab_size=10, special_ids=[0, 4]),
    ]
    for call in calls:
        with pytest.raises(InvalidIds, match="never rounded"):
            call([2, 5.7, 3])  # not cut to 5
        with pytest.raises(InvalidIds, match="encode"):
            call("ROMEO:")


def test_lists_of_ids_work_where_tensors_do():
    from onehot2gpt.gpt import lm_loss
    from onehot2gpt.sampling import generate

    gpt_model, bert_model, _ = _tiny_models()
    assert torch.equal(lm_loss(gpt_model, [[1, 2, 3]]), lm_loss(gpt_model, torch.tensor([[1, 2, 3]])))
    assert generate(gpt_model, [1, 2], 3, temperature=0).tolist()[:2] == [1, 2]
    torch.testing.assert_close(
        bert_model.bert([[2, 5, 3]]).last_hidden_state, bert_model.bert(torch.tensor([[2, 5, 3]])).last_hidden_state
    )
    with pytest.raises(InvalidIds, match=r"torch.tensor\(ids\)"):
        gpt_model([[1, 2]])  # the model itself: a clear error


def test_generate_refuses_a_prompt_of_text_and_ids_outside_the_vocabulary():
    from onehot2gpt.sampling import generate

    gpt_model, _, _ = _tiny_models()
    with pytest.raises(InvalidIds, match="the prompt is a string.*encode"):
        generate(gpt_model, "ROMEO:", 3)
    with pytest.raises(InvalidIds, match="outside 0…9"):
        generate(gpt_model, [1, 12], 3)


def test_mask_tokens_refuses_ids_outside_the_vocabulary():
    from onehot2gpt.bert_pretraining import mask_tokens

    with pytest.raises(InvalidIds, match="outside 0…9"):
        mask_tokens(torch.tensor([[2, 7, 10]]), mask_id=4, vocab_size=10, special_ids=[0, 2, 4])


# ------------------------------------------------------------------ a finite loss, finite scores


def test_check_finite_loss_names_the_step_the_loss_and_the_fix():
    from onehot2gpt.utils import TrainingDiverged, check_finite_loss

    assert check_finite_loss(torch.tensor(2.5), 0) == 2.5 and check_finite_loss(1.0, 3) == 1.0
    for bad in (float("nan"), float("inf"), torch.tensor(float("-inf"))):
        with pytest.raises(
            TrainingDiverged,
            match=r"GPT diverged at step 7: the loss is .*learning "
            r"rate \(now 100\), or check the data",
        ):
            check_finite_loss(bad, 7, lr=100, what="GPT")
    assert issubclass(TrainingDiverged, FloatingPointError)


def test_check_finite_logits_allows_banned_tokens_but_not_nan():
    from onehot2gpt.utils import check_finite_logits

    check_finite_logits(torch.tensor([[0.0, float("-inf"), 1.0]]))  # a filtered row is fine
    for bad in ([[0.0, float("nan")]], [[float("inf"), 0.0]], [[float("-inf")] * 2]):
        with pytest.raises(ValueError, match="NaN or infinite.*lower learning rate"):
            check_finite_logits(torch.tensor(bad))


# ------------------------------------------------------------------ shared pieces, written once


def test_ignore_index_is_defined_once():
    """Every library module that names IGNORE_INDEX imports utils' one (none defines its own)."""
    import importlib
    import re
    from pathlib import Path

    import onehot2gpt
    from onehot2gpt.utils import IGNORE_INDEX

    assert IGNORE_INDEX == -100
    root = Path(onehot2gpt.__file__).parent
    users = [p for p in sorted(root.rglob("*.py")) if p.name != "utils.py" and "IGNORE_INDEX" in p.read_text()]
    assert len(users) >= 3, users  # the BERT modules and the shared training code use it
    for path in users:
        assert not re.search(r"^\s*IGNORE_INDEX\s*[:=]", path.read_text(), re.M), f"{path.name} defines its own"
        module = importlib.import_module("onehot2gpt." + ".".join(path.relative_to(root).with_suffix("").parts))
        assert getattr(module, "IGNORE_INDEX", IGNORE_INDEX) is IGNORE_INDEX, path.name


def test_the_shared_training_module_holds_no_model_and_no_loop():
    """Each model's loops and tasks sit beside it (transformer_tasks, bert_pretraining, bert_tasks,
    gpt_training, gpt_tasks); onehot2gpt.training keeps only what they share."""
    import ast
    from pathlib import Path

    import onehot2gpt.training

    tree = ast.parse(Path(onehot2gpt.training.__file__).read_text(encoding="utf-8"))
    relative = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level]
    assert relative == [], f"onehot2gpt.training imports {relative}: shared pieces must not depend on a model"
    functions = sorted(node.name for node in tree.body if isinstance(node, ast.FunctionDef))
    assert functions == sorted(onehot2gpt.training.__all__)
    assert not any(name.startswith(("train_", "pretrain", "finetune")) for name in functions)


@pytest.mark.parametrize("package", ["onehot2gpt", "onehot2gpt_exercises", "onehot2gpt_teach"])
def test_no_module_imports_another_modules_private_names(package):
    """In the library, its exercise checks and the lecturer's package alike, what one module takes
    from another is public there."""
    import ast
    import importlib
    from pathlib import Path

    root = Path(importlib.import_module(package).__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                found += [
                    f"{path.relative_to(root)}:{node.lineno} {alias.name}"
                    for alias in node.names
                    if alias.name.startswith("_") and not alias.name.startswith("__")
                ]
    assert not found, f"private names imported across modules: {found}"


# -- library code never reseeds the caller's random numbers ------------------------------------


def test_seeded_repeats_a_block_and_gives_the_callers_state_back():
    from onehot2gpt.utils import seeded

    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    with seeded(0):
        inside = torch.rand(2)
    with seeded(0):
        assert torch.equal(torch.rand(2), inside)
    assert torch.equal(torch.rand(3), expected)


def test_a_probe_and_a_check_leave_the_callers_randomness_alone(capsys):
    import onehot2gpt_exercises as exercises
    from onehot2gpt.probing import train_probe

    torch.manual_seed(7)
    expected = torch.rand(4)
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(40, 2, 4, generator=g), torch.randint(0, 3, (40,), generator=g)
    torch.manual_seed(7)
    train_probe(x, y, x, y, epochs=1, seed=3)
    assert torch.equal(torch.rand(4), expected), "train_probe reseeded torch's global RNG"

    from onehot2gpt_exercises import nb10

    greedy = nb10._reference_greedy_until_newline  # a right answer: the check passes
    torch.manual_seed(7)
    exercises.check_greedy_until_newline(greedy)
    assert torch.equal(torch.rand(4), expected), "a check cell reseeded torch's global RNG"


def test_library_code_seeds_only_inside_seeded_or_fork_rng():
    """A bare torch.manual_seed in library code would change the next notebook cell's randomness;
    only utils.set_seed (asked for by name) and the command-line entry points may seed globally."""
    import re
    from pathlib import Path

    import onehot2gpt

    root = Path(onehot2gpt.__file__).parent
    bare = []
    for path in sorted(root.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\btorch\.manual_seed\(", line):
                before = "\n".join(lines[max(0, i - 3) : i])
                first_def = next((l for l in reversed(lines[:i]) if l.startswith("def ")), "")
                if (
                    "fork_rng" in before
                    or first_def.startswith(("def set_seed", "def seeded"))
                    or re.match(r"def (_\w*command|main)\b", first_def)
                ):
                    continue
                bare.append(f"{path.relative_to(root)}:{i + 1}: {line.strip()}")
    assert not bare, "global reseeding in library code:\n" + "\n".join(bare)


# -- where models run: ONEHOT2GPT_DEVICE ---------------------------------------------------------


def test_course_device_is_the_cpu_unless_the_variable_says_otherwise(monkeypatch):
    from onehot2gpt.utils import DEVICE_ENV, course_device, resolve_device

    monkeypatch.delenv(DEVICE_ENV, raising=False)
    assert course_device() == torch.device("cpu") and resolve_device(None) == torch.device("cpu")
    monkeypatch.setenv(DEVICE_ENV, "cpu")
    assert course_device() == torch.device("cpu")
    monkeypatch.setenv(DEVICE_ENV, "cuda")
    if torch.cuda.is_available():
        assert course_device().type == "cuda"
    else:
        with pytest.raises(ValueError, match=r"ONEHOT2GPT_DEVICE='cuda'.*no CUDA.*unset ONEHOT2GPT_DEVICE"):
            course_device()
    assert resolve_device("cpu") == torch.device("cpu")  # an explicit device wins over the variable
    monkeypatch.setenv(DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match="ONEHOT2GPT_DEVICE='tpu'.*not a torch device"):
        resolve_device(None)


def test_loading_on_the_course_device_follows_the_variable(monkeypatch):
    from onehot2gpt.checkpoints import load
    from onehot2gpt.utils import DEVICE_ENV

    monkeypatch.setenv(DEVICE_ENV, "cpu")
    model = load("gpt-char-shakespeare", device=None).model
    assert next(model.parameters()).device.type == "cpu"
    monkeypatch.setenv(DEVICE_ENV, "tpu")
    with pytest.raises(ValueError, match="ONEHOT2GPT_DEVICE"):
        load("gpt-char-shakespeare", device=None)
    model = load("gpt-char-shakespeare").model  # the default stays the CPU
    assert next(model.parameters()).device.type == "cpu"
    vectors = load("word2vec-wikitext2", device=None).model  # word vectors stay on the CPU
    assert type(vectors).__name__ == "WordVectors"


def test_positive_int_check_names_the_argument():
    from onehot2gpt.utils import check_positive_int

    assert check_positive_int(3, "epochs") == 3
    for bad, error in ((0, ValueError), (-2, ValueError), (True, TypeError), (2.0, TypeError), ("3", TypeError)):
        with pytest.raises(error, match="epochs must be a positive int"):
            check_positive_int(bad, "epochs")


# ------------------------------------------------------------------ one eval mode, one weight copy


def test_evaluating_turns_off_dropout_and_gradients_and_restores_every_submodule():
    from onehot2gpt.utils import evaluating

    net = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.9), torch.nn.Sequential(torch.nn.Dropout(0.9)))
    net.train()
    net[2].eval()  # a submodule the caller froze in eval mode stays so afterwards
    x = torch.ones(2, 4)
    with evaluating(net) as same:
        assert same is net and not any(m.training for m in net.modules())
        assert not torch.is_grad_enabled()
        out = net(x)
        assert torch.equal(out, net(x)) and not out.requires_grad  # no dropout, no graph
    assert torch.is_grad_enabled()
    assert [m.training for m in net.modules()] == [True, True, True, False, False]
    with pytest.raises(RuntimeError, match="boom"):
        with evaluating(net):
            raise RuntimeError("boom")
    assert [m.training for m in net.modules()] == [True, True, True, False, False]
    with pytest.raises(TypeError, match="torch.nn.Module"):
        with evaluating("model"):
            pass


def test_copy_weights_copies_from_a_model_or_a_dict_and_refuses_a_mismatch_before_copying():
    from onehot2gpt.gpt import GPT, GPTConfig
    from onehot2gpt.utils import copy_weights

    torch.manual_seed(0)
    source, target = GPT(GPTConfig.tiny(vocab_size=30)), GPT(GPTConfig.tiny(vocab_size=30))
    assert copy_weights(target, source) is target
    assert all(torch.equal(a, b) for a, b in zip(source.parameters(), target.parameters()))
    assert target.lm_head.weight is target.tok_emb.weight  # the tied weight is copied once and stays tied
    wider = GPT(GPTConfig.tiny(vocab_size=31))
    before = [p.clone() for p in wider.parameters()]
    weights = dict(source.named_parameters())
    weights["extra.weight"] = torch.zeros(1)
    del weights["pos_emb.weight"]
    with pytest.raises(KeyError) as info:
        copy_weights(
            wider, weights, problems=["the caller's own problem"], what="the file", hint="do this", error=KeyError
        )
    message = info.value.args[0]
    assert message.index("the caller's own problem") < message.index("missing pos_emb.weight")
    assert "unexpected extra.weight" in message and "tok_emb.weight: shape (30, 32) in the file, (31, 32)" in message
    assert message.startswith("the file do not fit this GPT: ") and message.endswith(". do this")
    assert all(torch.equal(a, b) for a, b in zip(before, wider.parameters()))  # nothing half-copied
    with pytest.raises(TypeError, match="source must be a torch.nn.Module or a dict"):
        copy_weights(target, [1, 2])
