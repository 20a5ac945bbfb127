"""BERT's pre-training (notebook 07): masking, next-sentence pairs, the loss, the loop."""

import math

import pytest
import torch
from onehot2gpt.bert_pretraining import mask_tokens, nsp_pairs
from onehot2gpt.utils import IGNORE_INDEX

SPECIALS = [0, 1, 2, 3, 4]  # [PAD] [UNK] [CLS] [SEP] [MASK]
MASK, VOCAB = 4, 1000


def _batch(n_rows=400, length=250, seed=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, VOCAB, (n_rows, length), generator=g)
    pad = length // 6
    ids[:, 0], ids[:, -pad - 1], ids[:, -pad:] = 2, 3, 0  # [CLS] … [SEP] then padding
    return ids


def _within(observed, p, n, sigmas=5):
    return abs(observed - p) < sigmas * math.sqrt(p * (1 - p) / n)


def test_mask_tokens_proportions_follow_80_10_10():
    ids = _batch()
    inputs, labels = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=torch.Generator().manual_seed(1)
    )
    real = ~torch.isin(ids, torch.tensor(SPECIALS))
    chosen = labels != IGNORE_INDEX
    n_real, n_chosen = int(real.sum()), int(chosen.sum())
    assert _within(n_chosen / n_real, 0.15, n_real)
    assert not (chosen & ~real).any()  # specials never chosen
    assert torch.equal(labels[chosen], ids[chosen])  # labels = the originals
    assert torch.equal(inputs[~chosen], ids[~chosen])  # nothing else touched
    became_mask = (inputs == MASK) & chosen
    unchanged = (inputs == ids) & chosen
    randomised = chosen & ~became_mask & ~unchanged
    assert _within(became_mask.sum().item() / n_chosen, 0.8, n_chosen)
    # a random draw can hit the original id (1 in ~995): count those with "unchanged"
    assert _within(unchanged.sum().item() / n_chosen, 0.1, n_chosen, sigmas=6)
    assert _within(randomised.sum().item() / n_chosen, 0.1, n_chosen, sigmas=6)
    assert not torch.isin(inputs[randomised], torch.tensor(SPECIALS)).any()


def test_mask_tokens_is_seeded_and_validates():
    ids = _batch(20, 30)
    a = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=torch.Generator().manual_seed(5)
    )
    b = mask_tokens(
        ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=torch.Generator().manual_seed(5)
    )
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="special_ids"):
        mask_tokens(ids, mask_id=999, vocab_size=VOCAB, special_ids=SPECIALS)
    with pytest.raises(ValueError, match="between 0 and 1"):
        mask_tokens(ids, mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, prob=1.5)
    with pytest.raises(ValueError, match=r"\(B, T\)"):
        mask_tokens(ids[0], mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS)


def test_whole_word_masking_masks_all_pieces_of_a_word():
    ids = _batch(200, 60, seed=2)
    word_ids = torch.full_like(ids, -1)
    real = ~torch.isin(ids, torch.tensor(SPECIALS))
    word_ids[real] = (torch.arange(ids.size(1)).expand_as(ids)[real] - 1) // 3  # 3 pieces per word
    _, labels = mask_tokens(
        ids,
        mask_id=MASK,
        vocab_size=VOCAB,
        special_ids=SPECIALS,
        word_ids=word_ids,
        generator=torch.Generator().manual_seed(3),
    )
    chosen = labels != IGNORE_INDEX
    for row in range(ids.size(0)):
        for word in word_ids[row][word_ids[row] >= 0].unique():
            pieces = chosen[row][word_ids[row] == word]
            assert pieces.all() or not pieces.any()  # all or nothing
    assert _within(chosen.sum().item() / real.sum().item(), 0.15, real.sum().item() / 3)


def test_nsp_pairs_are_half_next_half_random_from_other_articles():
    articles = [[f"a{i} s{j}" for j in range(5)] for i in range(30)]
    pairs = nsp_pairs(articles, 4000, seed=0)
    assert _within(sum(label == 0 for *_, label in pairs) / 4000, 0.5, 4000)
    for a, b, label in pairs:
        art_a, j = a.split()[0], int(a.split()[1][1:])
        if label == 0:
            assert b == f"{art_a} s{j + 1}"
        else:
            assert b.split()[0] != art_a
    assert pairs == nsp_pairs(articles, 4000, seed=0)
    with pytest.raises(ValueError, match="two"):
        nsp_pairs([["only one"]], 3)


def test_wikitext_articles_hold_sentences():
    from onehot2gpt.data import wikitext_articles

    articles = wikitext_articles("valid")
    assert 30 < len(articles) < 200
    sentences = [s for a in articles for s in a]
    assert all(s.strip() for s in sentences)
    assert not any("<unk>" in s or "@-@" in s or "@,@" in s for s in sentences)
    assert sum(s.endswith(" .") for s in sentences) > 0.9 * len(sentences)


def test_apply_masking_is_the_80_10_10_rule_given_the_draws():
    from onehot2gpt.bert_pretraining import apply_masking

    ids = torch.tensor([[10, 11, 12, 13, 14]])
    chosen = torch.tensor([[True, True, True, False, True]])
    action = torch.tensor([[0.1, 0.85, 0.95, 0.1, 0.8]])
    random_ids = torch.tensor([[50, 51, 52, 53, 54]])
    inputs, labels = apply_masking(ids, chosen, action, random_ids, MASK)
    assert inputs.tolist() == [[MASK, 51, 12, 13, 54]]
    assert labels.tolist() == [[10, 11, 12, IGNORE_INDEX, 14]]
    assert ids.tolist() == [[10, 11, 12, 13, 14]]  # not changed in place


class _Tok:  # the ids a WordPieceTokenizer exposes, on a made-up vocabulary
    pad_id, unk_id, cls_id, sep_id, mask_id = 0, 1, 2, 3, 4

    def __len__(self):
        return VOCAB


def _articles(n=12, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [
        [
            torch.randint(5, VOCAB, (int(torch.randint(2, 9, (1,), generator=g)),), generator=g).tolist()
            for _ in range(4)
        ]
        for _ in range(n)
    ]


def test_pretraining_batch_is_pretraining_pairs_then_mask_tokens():
    from onehot2gpt.bert_pretraining import pretraining_batch, pretraining_pairs

    articles = _articles()
    batch = pretraining_batch(articles, 16, 20, _Tok(), torch.Generator().manual_seed(3))
    g = torch.Generator().manual_seed(3)
    pairs = pretraining_pairs(articles, 16, 20, _Tok(), g)
    inputs, labels = mask_tokens(pairs["input_ids"], mask_id=MASK, vocab_size=VOCAB, special_ids=SPECIALS, generator=g)
    assert torch.equal(batch["input_ids"], inputs) and torch.equal(batch["mlm_labels"], labels)
    for key in ("token_type_ids", "attention_mask", "nsp_labels"):
        assert torch.equal(batch[key], pairs[key])
    ids = pairs["input_ids"]
    assert (ids[:, 0] == _Tok.cls_id).all() and ((ids == _Tok.sep_id).sum(1) == 2).all()
    assert not torch.isin(ids, torch.tensor([MASK])).any()  # the pairs are not masked yet


def test_masked_lm_loss_equals_the_pretraining_loss_of_the_model():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import masked_lm_loss, pretraining_batch, pretraining_loss

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    ).eval()
    with torch.no_grad():
        model.mlm.decoder.bias.normal_()
    batch = pretraining_batch(_articles(), 8, 24, _Tok(), torch.Generator().manual_seed(0))
    _, mlm_loss, _, _, _ = pretraining_loss(model, batch)
    hidden = model.bert(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"]).last_hidden_state
    mine = masked_lm_loss(
        hidden,
        batch["mlm_labels"],
        model.mlm.dense,
        model.mlm.norm,
        model.bert.embeddings.tok_emb.weight,
        model.mlm.decoder.bias,
    )
    torch.testing.assert_close(mine, mlm_loss)
    assert mine.requires_grad  # usable in a training step


def test_pretrain_bert_stops_at_the_first_non_finite_loss():
    from onehot2gpt.bert import BertConfig, BertForPreTraining
    from onehot2gpt.bert_pretraining import pretrain_bert
    from onehot2gpt.utils import TrainingDiverged

    torch.manual_seed(0)
    model = BertForPreTraining(
        BertConfig(vocab_size=VOCAB, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32, dropout=0.0)
    )
    with torch.no_grad():
        model.nsp.weight.fill_(float("nan"))  # what a diverged update leaves behind
    with pytest.raises(TrainingDiverged, match=r"BERT diverged at step 0: the loss is nan.*\(now 0\.001\)"):
        pretrain_bert(model, _Tok(), _articles(), steps=3, batch_size=4, max_len=24, progress=False)


def test_pretraining_batch_masks_the_share_asked_for_and_15_percent_by_default():
    from onehot2gpt.bert_pretraining import pretraining_batch

    articles = _articles()

    def chosen_share(**kw):
        batch = pretraining_batch(articles, 200, 24, _Tok(), torch.Generator().manual_seed(5), **kw)
        real = ~torch.isin(batch["input_ids"], torch.tensor([0, 2, 3]))  # not [PAD] [CLS] [SEP]
        return float((batch["mlm_labels"] != IGNORE_INDEX).sum() / real.sum()), batch

    default, batch = chosen_share()
    same, batch_015 = chosen_share(mask_prob=0.15)
    assert torch.equal(batch["mlm_labels"], batch_015["mlm_labels"])  # the default is BERT's 15 %
    higher, _ = chosen_share(mask_prob=0.4)
    assert 0.10 < default < 0.20 and 0.33 < higher < 0.47, (default, higher)
