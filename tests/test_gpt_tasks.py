"""Tests for onehot2gpt.gpt_tasks: GPT-1's input transformations, extract-token head, L3 = L2 + λ·L1.

Tiny random GPTs only (nothing downloaded); ids 1, 2, 3 play <start>, <delim>, <extract>.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from onehot2gpt.gpt import GPT, GPTConfig, lm_loss
from onehot2gpt.gpt_tasks import (
    GPT1_SPECIALS,
    GPTForMultipleChoice,
    GPTForSequenceClassification,
    classification_input,
    encode_choices_for_gpt,
    encode_for_gpt,
    entailment_input,
    evaluate_gpt,
    finetune_gpt,
    gpt1_loss,
    gpt_hidden_states,
    last_positions,
    multiple_choice_inputs,
    shuffled_ending_choices,
    similarity_inputs,
)

pytestmark = pytest.mark.usefixtures("one_thread")

V, MAX_LEN = 40, 24
SPECIAL_IDS = {"<start>": 1, "<delim>": 2, "<extract>": 3}
S, D, E = 1, 2, 3


def tiny_gpt(seed=0, **overrides):
    torch.manual_seed(seed)
    return GPT(GPTConfig(**{**dict(vocab_size=V, max_len=MAX_LEN, d_model=32, n_layers=2, n_heads=4), **overrides}))


def tiny_classifier(n_labels=3, seed=0, **overrides):
    model = GPTForSequenceClassification(tiny_gpt(seed, **overrides), n_labels).eval()
    with torch.no_grad():  # a visible classifier: std 0.02 would hide a wrong read below tolerance
        model.classifier.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(seed))
    return model


def padded_batch():
    """Three rows of lengths 5, 8, 3, right-padded with 0 to T = 8."""
    g = torch.Generator().manual_seed(1)
    lengths = torch.tensor([5, 8, 3])
    ids = torch.randint(4, V, (3, 8), generator=g)
    ids[torch.arange(8) >= lengths[:, None]] = 0
    return {"input_ids": ids, "lengths": lengths, "labels": torch.tensor([2, 0, 1])}


# ------------------------------------------------------------------ input transformations


def test_specials_are_gpt1s_three():
    assert GPT1_SPECIALS == ("<start>", "<delim>", "<extract>")


def test_classification_input_on_tokens_and_ids():
    assert classification_input(["a", "fine", "film"]) == ["<start>", "a", "fine", "film", "<extract>"]
    assert classification_input([7, 8], start=S, extract=E) == [1, 7, 8, 3]
    assert classification_input(torch.tensor([7, 8]), start=S, extract=E) == [1, 7, 8, 3]
    assert classification_input([]) == ["<start>", "<extract>"]
    assert classification_input(["x"], start="_s_", extract="_e_") == ["_s_", "x", "_e_"]


def test_entailment_input_puts_the_delimiter_between_premise_and_hypothesis():
    assert entailment_input(["it", "rains"], ["it", "is", "wet"]) == [
        "<start>",
        "it",
        "rains",
        "<delim>",
        "it",
        "is",
        "wet",
        "<extract>",
    ]
    assert entailment_input([5], [6, 7], start=S, delim=D, extract=E) == [1, 5, 2, 6, 7, 3]


def test_similarity_inputs_give_both_orders():
    ab, ba = similarity_inputs(["x"], ["y", "z"])
    assert ab == ["<start>", "x", "<delim>", "y", "z", "<extract>"]
    assert ba == ["<start>", "y", "z", "<delim>", "x", "<extract>"]
    assert similarity_inputs([5], [6], S, D, E) == ([1, 5, 2, 6, 3], [1, 6, 2, 5, 3])


def test_multiple_choice_inputs_one_sequence_per_answer():
    assert multiple_choice_inputs(["q", "?"], [["a"], ["b", "c"], []]) == [
        ["<start>", "q", "?", "<delim>", "a", "<extract>"],
        ["<start>", "q", "?", "<delim>", "b", "c", "<extract>"],
        ["<start>", "q", "?", "<delim>", "<extract>"],
    ]
    assert multiple_choice_inputs([9], [[5], [6]], S, D, E) == [[1, 9, 2, 5, 3], [1, 9, 2, 6, 3]]


def test_transformations_refuse_bad_input():
    with pytest.raises(TypeError, match="not a string"):
        classification_input("a fine film")
    with pytest.raises(TypeError, match="one kind"):
        classification_input([7, 8])  # ids with the default string specials
    with pytest.raises(TypeError, match="one kind"):
        entailment_input(["a"], [5], S, D, E)
    with pytest.raises(ValueError, match="already holds"):
        classification_input(["<start>", "a", "<extract>"])
    with pytest.raises(ValueError, match="already holds"):
        entailment_input([5, 2], [6], S, D, E)  # id 2 is the delimiter
    with pytest.raises(ValueError, match="distinct"):
        classification_input([5], start=3, extract=3)
    with pytest.raises(ValueError, match="non-empty"):
        multiple_choice_inputs(["q"], [])


# ------------------------------------------------------------------------------ the head


def test_hidden_state_path_reproduces_gpt_logits_exactly():
    gpt = tiny_gpt(dropout=0.1).eval()
    ids = torch.randint(0, V, (2, MAX_LEN), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        hidden = gpt_hidden_states(gpt, ids)
        assert hidden.shape == (2, MAX_LEN, 32)
        assert torch.equal(gpt.lm_head(hidden), gpt(ids).logits)
    with pytest.raises(ValueError, match="max_len"):
        gpt_hidden_states(gpt, torch.zeros(1, MAX_LEN + 1, dtype=torch.long))


def test_forward_shapes_and_lm_logits_are_the_gpts():
    model = tiny_classifier()
    batch = padded_batch()
    with torch.no_grad():
        logits, lm_logits = model(batch["input_ids"], batch["lengths"])
        assert logits.shape == (3, 3) and lm_logits.shape == (3, 8, V)
        assert torch.equal(lm_logits, model.gpt(batch["input_ids"]).logits)


def test_class_logits_come_from_each_rows_last_real_token():
    model = tiny_classifier()
    batch = padded_batch()
    ids, lengths = batch["input_ids"], batch["lengths"]
    with torch.no_grad():
        logits = model(ids, lengths).logits
        for i, n in enumerate(lengths.tolist()):  # each row alone, unpadded
            h = gpt_hidden_states(model.gpt, ids[i : i + 1, :n])[0, -1]
            torch.testing.assert_close(logits[i], model.classifier(h))
        # Other values in the padded positions, and more padding: nothing changes.
        repadded = torch.cat([ids, torch.zeros(3, 4, dtype=torch.long)], 1)
        repadded[torch.arange(12) >= lengths[:, None]] = 39
        torch.testing.assert_close(model(repadded, lengths).logits, logits)
        # The last real token, and an earlier one, matter.
        for position in (4, 0):
            changed = ids.clone()
            changed[0, position] = 4 if ids[0, position] != 4 else 5
            new = model(changed, lengths).logits
            assert not torch.allclose(new[0], logits[0])
            torch.testing.assert_close(new[1:], logits[1:])


def test_attention_mask_and_lengths_agree_and_no_padding_means_the_last_column():
    model = tiny_classifier()
    batch = padded_batch()
    ids, lengths = batch["input_ids"], batch["lengths"]
    mask = (torch.arange(8) < lengths[:, None]).long()
    with torch.no_grad():
        torch.testing.assert_close(model(ids, attention_mask=mask).logits, model(ids, lengths).logits)
        full = model(ids).logits
        h = gpt_hidden_states(model.gpt, ids)[:, -1]
        torch.testing.assert_close(full, model.classifier(h))
    assert last_positions(ids, lengths).tolist() == [4, 7, 2]
    with pytest.raises(ValueError, match="right-padded"):
        model(ids, attention_mask=mask.flip(1))
    with pytest.raises(ValueError, match="between 1 and"):
        model(ids, torch.tensor([5, 9, 3]))
    with pytest.raises(ValueError, match="between 1 and"):
        model(ids, torch.tensor([0, 8, 3]))
    with pytest.raises(ValueError, match="not both"):
        model(ids, lengths, mask)


def test_head_refuses_a_bad_model_or_label_count():
    with pytest.raises(TypeError, match="GPT"):
        GPTForSequenceClassification(torch.nn.Linear(2, 2), 2)
    with pytest.raises(ValueError, match="n_labels"):
        GPTForSequenceClassification(tiny_gpt(), 0)


# ------------------------------------------------------------------------------ the loss


def independent_l1(gpt, ids, lengths):
    """L1 from the library's lm_loss on each unpadded row, averaged over all predicted tokens."""
    total = sum(lm_loss(gpt, ids[i : i + 1, :n]) * (n - 1) for i, n in enumerate(lengths.tolist()))
    return total / (lengths - 1).sum()


def test_lm_weight_zero_is_exactly_the_classification_loss():
    model = tiny_classifier()
    batch = padded_batch()
    with torch.no_grad():
        loss = gpt1_loss(model, batch, lm_weight=0.0)
        expected = F.cross_entropy(model(batch["input_ids"], batch["lengths"]).logits, batch["labels"])
    assert torch.equal(loss.total, expected) and torch.equal(loss.clf, expected)


def test_lm_weight_adds_lambda_times_the_next_token_loss_over_real_tokens():
    model = tiny_classifier()
    batch = padded_batch()
    with torch.no_grad():
        l1 = independent_l1(model.gpt, batch["input_ids"], batch["lengths"])
        loss = gpt1_loss(model, batch, lm_weight=0.7)
    torch.testing.assert_close(loss.lm, l1)
    torch.testing.assert_close(loss.total, loss.clf + 0.7 * l1)
    # Counting padded positions too would give a different number: the test can tell.
    with torch.no_grad():
        logits = model.gpt(batch["input_ids"]).logits
        with_pads = F.cross_entropy(logits[:, :-1].flatten(0, 1), batch["input_ids"][:, 1:].flatten())
    assert not torch.allclose(with_pads, l1)


def test_loss_gradients_are_those_of_l2_plus_lambda_l1_computed_row_by_row():
    # gpt1_loss computes the LM logits only where a real next token is predicted; its gradient must
    # be that of the plain formula, and λ = 0 must leave L1 out of the backward pass entirely.
    for weight in (0.7, 0.0):
        model = tiny_classifier().eval()  # no dropout: the two passes must agree
        batch = padded_batch()
        loss = gpt1_loss(model, batch, lm_weight=weight)
        assert loss.lm.requires_grad == (weight != 0)
        loss.total.backward()
        ours = {name: p.grad.clone() for name, p in model.named_parameters()}
        model.zero_grad()
        clf = F.cross_entropy(model(batch["input_ids"], batch["lengths"]).logits, batch["labels"])
        (clf + weight * independent_l1(model.gpt, batch["input_ids"], batch["lengths"])).backward()
        for name, p in model.named_parameters():
            torch.testing.assert_close(ours[name], p.grad, msg=f"λ = {weight}: gradient of {name}")


def test_padding_values_do_not_change_the_loss():
    model = tiny_classifier()
    batch = padded_batch()
    other = dict(batch, input_ids=batch["input_ids"].clone())
    other["input_ids"][torch.arange(8) >= batch["lengths"][:, None]] = 17
    with torch.no_grad():
        a, b = gpt1_loss(model, batch, 0.5), gpt1_loss(model, other, 0.5)
    for x, y in zip(a, b):
        torch.testing.assert_close(x, y)


def test_loss_refuses_labels_out_of_range_and_a_negative_weight():
    model = tiny_classifier(n_labels=3)
    batch = padded_batch()
    with pytest.raises(ValueError, match="n_labels=3"):
        gpt1_loss(model, dict(batch, labels=torch.tensor([0, 3, 1])))
    with pytest.raises(ValueError, match="n_labels=3"):
        gpt1_loss(model, dict(batch, labels=torch.tensor([0, -1, 1])))
    with pytest.raises(ValueError, match="lm_weight"):
        gpt1_loss(model, batch, lm_weight=-1.0)


# ------------------------------------------------------------------------------ the data


def char_encode(text):
    """'a' → 4, 'b' → 5, …: a toy tokenizer that keeps the specials 0–3 free."""
    return [4 + ord(ch) - ord("a") for ch in text]


def test_encode_for_gpt_classification_worked_example():
    enc = encode_for_gpt(char_encode, ["ab", "c", ""], [1, 0, 1], SPECIAL_IDS, max_len=8, pad_id=0)
    assert enc["input_ids"].tolist() == [[1, 4, 5, 3], [1, 6, 3, 0], [1, 3, 0, 0]]
    assert enc["lengths"].tolist() == [4, 3, 2]
    assert enc["labels"].tolist() == [1, 0, 1]
    enc = encode_for_gpt(char_encode, ["a"], None, (1, 2, 3), max_len=8, pad_id=9)
    assert enc["input_ids"].tolist() == [[1, 4, 3]] and "labels" not in enc


def test_encode_for_gpt_pairs_and_label_names():
    enc = encode_for_gpt(
        char_encode, [("ab", "c"), "d"], ["yes", "no"], SPECIAL_IDS, max_len=8, pad_id=0, label_names=("no", "yes")
    )
    assert enc["input_ids"].tolist() == [[1, 4, 5, 2, 6, 3], [1, 7, 3, 0, 0, 0]]
    assert enc["lengths"].tolist() == [6, 3]
    assert enc["labels"].tolist() == [1, 0]


def test_encode_for_gpt_truncation_keeps_the_specials_and_the_first_tokens():
    enc = encode_for_gpt(char_encode, ["abcdefgh"], None, SPECIAL_IDS, max_len=5)
    assert enc["input_ids"].tolist() == [[1, 4, 5, 6, 3]]
    # A pair loses tokens from its longer side first: 6 + 2 > 7 − 3 = 4 → 2 + 2.
    enc = encode_for_gpt(char_encode, [("abcdef", "gh")], None, SPECIAL_IDS, max_len=7)
    assert enc["input_ids"].tolist() == [[1, 4, 5, 2, 10, 11, 3]]
    with pytest.raises(ValueError, match="truncation=True"):
        encode_for_gpt(char_encode, ["abc", "abcdefgh"], None, SPECIAL_IDS, max_len=5, truncation=False)
    fits = encode_for_gpt(char_encode, ["abc"], None, SPECIAL_IDS, max_len=5, truncation=False)
    assert fits["lengths"].tolist() == [5]


def test_encode_for_gpt_refuses_bad_input():
    with pytest.raises(ValueError, match="<delim>"):
        encode_for_gpt(char_encode, [("a", "b")], None, {"<start>": 1, "<extract>": 3}, max_len=8)
    with pytest.raises(ValueError, match="<extract>"):
        encode_for_gpt(char_encode, ["a"], None, {"<start>": 1}, max_len=8)
    with pytest.raises(ValueError, match="in this order"):
        encode_for_gpt(char_encode, ["a"], None, (1, 3), max_len=8)
    with pytest.raises(ValueError, match="already holds"):
        encode_for_gpt(lambda t: [3, 4], ["a"], None, SPECIAL_IDS, max_len=8)  # encode emits <extract>
    with pytest.raises(TypeError, match="token ids"):
        encode_for_gpt(list, ["ab"], None, SPECIAL_IDS, max_len=8)  # characters, not ids
    with pytest.raises(ValueError, match="one label per text"):
        encode_for_gpt(char_encode, ["a", "b"], [0], SPECIAL_IDS, max_len=8)
    with pytest.raises(ValueError, match="unknown labels"):
        encode_for_gpt(char_encode, ["a"], ["maybe"], SPECIAL_IDS, max_len=8, label_names=("no", "yes"))
    with pytest.raises(ValueError, match="n_labels=2"):
        encode_for_gpt(char_encode, ["a"], [2], SPECIAL_IDS, max_len=8, label_names=("no", "yes"))
    with pytest.raises(ValueError, match="≥ 0"):
        encode_for_gpt(char_encode, ["a"], [-1], SPECIAL_IDS, max_len=8)
    with pytest.raises(ValueError, match="no room"):
        encode_for_gpt(char_encode, [("a", "b")], None, SPECIAL_IDS, max_len=2)
    with pytest.raises(TypeError, match="not one string"):
        encode_for_gpt(char_encode, "ab", None, SPECIAL_IDS, max_len=8)


# ------------------------------------------------------------------ fine-tuning and scoring


def toy_task(n, seed):
    """Random 3–10 letter texts from 'b'…'p'; label 1 when an 'a' was dropped in (half of them)."""
    g = torch.Generator().manual_seed(seed)
    texts, labels = [], []
    for i in range(n):
        length = int(torch.randint(3, 11, (1,), generator=g))
        letters = [chr(ord("b") + int(k)) for k in torch.randint(0, 15, (length,), generator=g)]
        if i % 2:
            letters[int(torch.randint(0, length, (1,), generator=g))] = "a"
        texts.append("".join(letters))
        labels.append(i % 2)
    return encode_for_gpt(char_encode, texts, labels, SPECIAL_IDS, max_len=MAX_LEN)


def test_finetune_gpt_learns_whether_a_token_appears():
    torch.manual_seed(0)
    model = GPTForSequenceClassification(tiny_gpt(), n_labels=2)
    train, test = toy_task(256, seed=1), toy_task(128, seed=2)
    before = evaluate_gpt(model, test)
    history = finetune_gpt(model, train, lm_weight=0.5, epochs=8, batch_size=32, lr=3e-3, warmup=0.1, progress=False)
    after = evaluate_gpt(model, test)
    assert set(history) == {"total", "clf", "lm"}
    assert all(len(v) == 8 * 256 // 32 for v in history.values())
    for total, clf, lm in zip(*history.values()):
        assert total == pytest.approx(clf + 0.5 * lm, rel=1e-5)
    assert before["accuracy"] < 0.75
    assert after["accuracy"] >= 0.95, after
    assert after["loss"] < before["loss"]
    assert after["lm_loss"] < before["lm_loss"]  # L1 trains the model on the texts too
    assert not model.training


def test_evaluate_gpt_loss_is_the_mean_classification_loss():
    model = tiny_classifier()
    batch = padded_batch()
    result = evaluate_gpt(model, batch, batch_size=2)  # two batches of different widths
    with torch.no_grad():
        loss = gpt1_loss(model, batch, lm_weight=0.5)
        logits = model(batch["input_ids"], batch["lengths"]).logits
    assert result["predictions"].tolist() == logits.argmax(-1).tolist()
    assert result["accuracy"] == pytest.approx((logits.argmax(-1) == batch["labels"]).float().mean().item())
    assert result["loss"] == pytest.approx(loss.clf.item(), rel=1e-5)
    assert result["lm_loss"] == pytest.approx(loss.lm.item(), rel=1e-5)
    unlabelled = evaluate_gpt(model, {k: batch[k] for k in ("input_ids", "lengths")})
    assert set(unlabelled) == {"predictions"}


def test_finetune_gpt_refuses_bad_data():
    model = GPTForSequenceClassification(tiny_gpt(), n_labels=2)
    batch = padded_batch()  # labels reach 2: out of range
    with pytest.raises(ValueError, match="n_labels=2"):
        finetune_gpt(model, batch, progress=False)
    with pytest.raises(KeyError, match="labels"):
        finetune_gpt(model, {k: batch[k] for k in ("input_ids", "lengths")}, progress=False)
    with pytest.raises(ValueError, match="nothing to train"):
        finetune_gpt(model, dict(batch, labels=torch.tensor([0, 1, 1])), epochs=0, progress=False)


# ------------------------------------------------------------------ multiple choice


def test_encode_choices_for_gpt_one_row_per_answer_like_the_pairs():
    enc = encode_choices_for_gpt(char_encode, ["ab", "c"], [["c", "dd"], ["e", "f"]], [1, 0], SPECIAL_IDS, max_len=8)
    assert enc["input_ids"].shape == (2, 2, 7) and enc["lengths"].tolist() == [[6, 7], [5, 5]]
    assert enc["labels"].tolist() == [1, 0]
    pairs = encode_for_gpt(
        char_encode, [("ab", "c"), ("ab", "dd"), ("c", "e"), ("c", "f")], None, SPECIAL_IDS, max_len=8
    )
    assert torch.equal(enc["input_ids"].flatten(0, 1), pairs["input_ids"])
    assert enc["input_ids"][0, 1].tolist() == [1, 4, 5, 2, 7, 7, 3]  # <start> ab <delim> dd <extract>
    assert "labels" not in encode_choices_for_gpt(char_encode, ["a"], [["b", "c"]], None, SPECIAL_IDS)


def test_encode_choices_for_gpt_refuses_bad_questions():
    with pytest.raises(ValueError, match="same number of answers"):
        encode_choices_for_gpt(char_encode, ["a", "b"], [["c", "d"], ["e", "f", "g"]], None, SPECIAL_IDS)
    with pytest.raises(ValueError, match="at least 2"):
        encode_choices_for_gpt(char_encode, ["a"], [["c"]], None, SPECIAL_IDS)
    with pytest.raises(ValueError, match="one list of answers per context"):
        encode_choices_for_gpt(char_encode, ["a", "b"], [["c", "d"]], None, SPECIAL_IDS)
    with pytest.raises(TypeError, match="list of answer strings"):
        encode_choices_for_gpt(char_encode, ["a"], ["cd"], None, SPECIAL_IDS)
    with pytest.raises(ValueError, match="each question has 2 answers"):
        encode_choices_for_gpt(char_encode, ["a"], [["c", "d"]], [2], SPECIAL_IDS)
    with pytest.raises(ValueError, match="one label"):
        encode_choices_for_gpt(char_encode, ["a"], [["c", "d"]], [0, 1], SPECIAL_IDS)
    with pytest.raises(ValueError, match="<delim>"):
        encode_choices_for_gpt(char_encode, ["a"], [["c", "d"]], None, {"<start>": 1, "<extract>": 3})


def tiny_chooser(seed=0):
    model = GPTForMultipleChoice(tiny_gpt(seed)).eval()
    with torch.no_grad():  # a visible scorer, as in tiny_classifier
        model.classifier.weight.normal_(0, 1.0, generator=torch.Generator().manual_seed(seed))
    return model


def choice_batch():
    """Two questions of three answers each, from padded_batch's rows and two more."""
    enc = encode_choices_for_gpt(
        char_encode, ["ab", "c"], [["c", "dd", "e"], ["fgh", "i", "jj"]], [2, 0], SPECIAL_IDS, max_len=12
    )
    return enc


def test_multiple_choice_scores_each_answers_row_on_its_own():
    model = tiny_chooser()
    batch = choice_batch()
    with torch.no_grad():
        scores, lm_logits = model(batch["input_ids"], batch["lengths"])
        rows = GPTForSequenceClassification.forward(model, batch["input_ids"].flatten(0, 1), batch["lengths"].flatten())
    assert scores.shape == (2, 3) and lm_logits.shape == (2, 3, batch["input_ids"].size(2), V)
    torch.testing.assert_close(scores, rows.logits.view(2, 3))
    torch.testing.assert_close(lm_logits.flatten(0, 1), rows.lm_logits)
    with torch.no_grad():  # one answer alone gets the same score
        alone = model(batch["input_ids"][:1, 1:2], batch["lengths"][:1, 1:2]).logits
    torch.testing.assert_close(alone[0, 0], scores[0, 1])
    with pytest.raises(ValueError, match=r"\(B, K, T\)"):
        model(batch["input_ids"][0], batch["lengths"][0])
    with pytest.raises(ValueError, match="lengths must be shaped"):
        model(batch["input_ids"], batch["lengths"].flatten())


def test_multiple_choice_loss_is_a_softmax_over_the_answers_plus_lambda_lm():
    model = tiny_chooser()
    batch = choice_batch()
    with torch.no_grad():
        loss = gpt1_loss(model, batch, lm_weight=0.5)
        scores = model(batch["input_ids"], batch["lengths"]).logits
        ids, lengths = batch["input_ids"].flatten(0, 1), batch["lengths"].flatten()
        lm = (
            torch.stack(
                [lm_loss(model.gpt, ids[i : i + 1, : lengths[i]]) * (lengths[i] - 1) for i in range(len(ids))]
            ).sum()
            / (lengths - 1).sum()
        )
    torch.testing.assert_close(loss.clf, F.cross_entropy(scores, batch["labels"]))
    torch.testing.assert_close(loss.lm, lm)
    torch.testing.assert_close(loss.total, loss.clf + 0.5 * lm)
    with pytest.raises(ValueError, match="each question has 3 answers"):
        gpt1_loss(model, dict(batch, labels=torch.tensor([3, 0])))
    with pytest.raises(ValueError, match="use GPTForMultipleChoice"):
        gpt1_loss(tiny_classifier(), batch)
    with pytest.raises(ValueError, match="encode_choices_for_gpt"):
        gpt1_loss(model, padded_batch())


def toy_choices(n, seed):
    """Two answers of 2–6 letters from 'b'…'p'; the right one holds an 'a'."""
    g = torch.Generator().manual_seed(seed)
    contexts, answers, labels = [], [], []
    for i in range(n):
        pair = []
        for _ in range(2):
            length = int(torch.randint(2, 7, (1,), generator=g))
            pair.append([chr(ord("b") + int(k)) for k in torch.randint(0, 15, (length,), generator=g)])
        right = int(torch.randint(0, 2, (1,), generator=g))
        pair[right][int(torch.randint(0, len(pair[right]), (1,), generator=g))] = "a"
        contexts.append("b" * (1 + i % 3))
        answers.append(["".join(p) for p in pair])
        labels.append(right)
    return encode_choices_for_gpt(char_encode, contexts, answers, labels, SPECIAL_IDS, max_len=MAX_LEN)


def test_finetune_gpt_learns_a_multiple_choice_task():
    torch.manual_seed(0)
    model = GPTForMultipleChoice(tiny_gpt())
    train, test = toy_choices(256, seed=1), toy_choices(128, seed=2)
    before = evaluate_gpt(model, test)
    history = finetune_gpt(model, train, lm_weight=0.5, epochs=8, batch_size=32, lr=3e-3, warmup=0.1, progress=False)
    after = evaluate_gpt(model, test)
    assert all(len(v) == 8 * 256 // 32 for v in history.values())  # a batch is 32 questions
    assert before["predictions"].shape == (128,) and before["accuracy"] < 0.75
    assert after["accuracy"] >= 0.95, after
    assert after["loss"] < before["loss"]


def test_evaluate_gpt_gives_multiple_choice_predictions_in_the_questions_order():
    # evaluate_gpt runs questions sorted by their longest answer; the predictions come back in order.
    model = tiny_chooser()
    test = toy_choices(40, seed=3)
    assert not torch.equal(test["lengths"].amax(-1), test["lengths"].amax(-1).sort().values)
    one_by_one = torch.cat(
        [evaluate_gpt(model, {k: v[i : i + 1] for k, v in test.items()})["predictions"] for i in range(40)]
    )
    result = evaluate_gpt(model, test, batch_size=8)
    assert result["predictions"].tolist() == one_by_one.tolist()
    assert result["accuracy"] == pytest.approx((one_by_one == test["labels"]).float().mean().item())


@pytest.mark.parametrize("choices", [False, True])
def test_finetune_gpt_group_by_length_trims_padding_and_still_learns(choices, monkeypatch):
    from onehot2gpt import gpt_tasks

    train, test = (
        (toy_choices(256, seed=1), toy_choices(128, seed=2))
        if choices
        else (toy_task(256, seed=1), toy_task(128, seed=2))
    )
    widths, batch = [], gpt_tasks._batch
    monkeypatch.setattr(gpt_tasks, "_batch", lambda *a: widths.append((b := batch(*a))["input_ids"].numel()) or b)
    tokens = {}
    for grouped in (False, True):
        widths.clear()
        torch.manual_seed(0)
        model = GPTForMultipleChoice(tiny_gpt()) if choices else GPTForSequenceClassification(tiny_gpt(), n_labels=2)
        history = finetune_gpt(
            model,
            train,
            lm_weight=0.5,
            epochs=8,
            batch_size=32,
            lr=3e-3,
            warmup=0.1,
            progress=False,
            group_by_length=grouped,
        )
        assert len(history["total"]) == len(widths) == 8 * 256 // 32
        tokens[grouped] = sum(widths)
        assert evaluate_gpt(model, test)["accuracy"] >= 0.9, f"group_by_length={grouped} did not learn"
    assert tokens[True] < 0.9 * tokens[False]


def test_shuffled_ending_choices_hold_the_true_ending_and_a_reordering_of_it():
    words = "one two three four five six seven eight nine ten eleven twelve .".split()
    sentences = [" ".join(words[:k] + words[-1:]) for k in range(4, 13)]  # 5 to 13 words
    sentences += ["too short .", "a a a a a a a a ."]  # too short; no other order
    contexts, answers, labels = shuffled_ending_choices(sentences, seed=3, min_words=8)
    assert len(contexts) == len(answers) == len(labels) == 6  # the 8- to 13-word ones
    for context, (first, second), label in zip(contexts, answers, labels):
        true, false = (first, second) if label == 0 else (second, first)
        full = f"{context} {true}".split()
        assert full in [s.split() for s in sentences]  # context + true ending
        assert len(context.split()) == len(full) // 2
        assert false != true and sorted(false.split()) == sorted(true.split())
        assert false.split()[-1] == "."  # the last word stays last
    assert set(labels) == {0, 1}
    assert shuffled_ending_choices(sentences, seed=3, min_words=8) == (contexts, answers, labels)
    assert shuffled_ending_choices(sentences, 2, seed=3, min_words=8) == (contexts[:2], answers[:2], labels[:2])
    assert shuffled_ending_choices(sentences, seed=4, min_words=8) != (contexts, answers, labels)


def test_shuffled_ending_choices_label_the_true_ending_about_half_the_time_in_each_place():
    sentences = [" ".join(f"w{i}_{j}" for j in range(9)) + " ." for i in range(400)]
    _, _, labels = shuffled_ending_choices(sentences, seed=0)
    assert 150 < sum(labels) < 250


def test_shuffled_ending_choices_refuse_bad_input():
    good = ["one two three four five six seven eight ."]
    with pytest.raises(TypeError, match="not one string"):
        shuffled_ending_choices(good[0])
    with pytest.raises(TypeError, match="must be a string"):
        shuffled_ending_choices([good[0].split()])
    with pytest.raises(ValueError, match="min_words"):
        shuffled_ending_choices(good, min_words=4)
    with pytest.raises(ValueError, match="min_words"):
        shuffled_ending_choices(good, min_words=10, max_words=9)
    with pytest.raises(ValueError, match="n=0 must be at least 1"):
        shuffled_ending_choices(good, 0)
    with pytest.raises(ValueError, match="only 1 of the 1"):
        shuffled_ending_choices(good, 2)
    with pytest.raises(ValueError, match="only 0"):
        shuffled_ending_choices(["a b c d e f g h ."], max_words=8)
