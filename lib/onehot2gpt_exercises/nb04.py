"""Checks for notebook 04 (ELMo), and the library's biLM layers that stand in for the student's
own in the notebook's later cells until they are written."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from .checking import check_function, first_match, rand_int, without_grad


def check_reverse_padded(fn: Callable) -> None:
    """Exercise: ids (B, T) right-padded, lengths (B,) → each row's real tokens reversed, padding kept."""
    from onehot2gpt.elmo import reverse_padded

    def make(gen):
        b, t = rand_int(gen, 1, 5), rand_int(gen, 1, 8)
        lengths = torch.randint(1, t + 1, (b,), generator=gen)
        ids = torch.randint(4, 50, (b, t), generator=gen)
        ids[torch.arange(t)[None, :] >= lengths[:, None]] = 0  # <pad>
        return ids, lengths

    check_function(
        fn,
        reverse_padded,
        make,
        name="reverse_padded",
        concept="a backward LM must start at a row's last real token, so only the real tokens of each row are put in "
        "reverse order; the padding after them stays where it is (reversing the whole row would put the padding first)",
        hint="in row b only the first n = lengths[b] positions hold real tokens: where does the token at position k "
        "(k < n) go when they are reversed, and what happens to the <pad> after them?",
    )


def check_scalar_mix(fn: Callable) -> None:
    """Exercise: layers (B, T, L, D), s (L,), gamma → γ · Σ_j softmax(s)_j · layers[..., j, :]."""

    def make(gen):
        b, t, n_layers, d = (rand_int(gen, 1, 5) for _ in range(4))
        return (
            torch.randn(b, t, n_layers, d, generator=gen),
            torch.randn(n_layers, generator=gen),
            float(torch.rand(1, generator=gen) * 2),
        )

    def reference(layers, s, gamma):
        return gamma * torch.einsum("btld,l->btd", layers, torch.softmax(s, 0))

    check_function(
        fn,
        reference,
        make,
        name="scalar_mix",
        concept="the raw weights become positive weights that sum to 1 (a softmax over the layers); each layer's "
        "vector is scaled by its weight, the layers are added up, and the sum is scaled by γ",
        hint="the raw weights s become w = softmax(s), one per layer, summing to 1; the answer is γ Σ_j w_j · "
        "layer_j, the weighted sum over the layer axis, so (B, T, L, D) becomes (B, T, D)",
    )


def library_scalar_mix(layers, s, gamma):
    """What notebook 04's cells after exercise 3 use while `my_scalar_mix` does not pass its check
    yet: the library's ``ScalarMix`` (no layer norm) with raw weights `s` and `gamma`, layers
    (..., L+1, D) → (..., D)."""
    from onehot2gpt.elmo import ScalarMix

    mix = ScalarMix(len(s))
    with torch.no_grad():
        mix.s.copy_(torch.as_tensor(s))
        mix.gamma.fill_(float(gamma))
        return mix(layers)


def check_sense_score(fn: Callable) -> None:
    """Exercise: vectors (N, D) and sense labels (N,) → mean cosine within senses − across senses."""

    def make(gen):
        n = rand_int(gen, 3, 9)
        labels = torch.randint(0, 2, (n,), generator=gen)
        labels[0], labels[1] = 0, 1  # both kinds of pair exist
        labels[2] = labels[rand_int(gen, 0, 2)]
        return torch.randn(n, 4, generator=gen), labels

    from onehot2gpt.probing import sense_grouping_score as reference

    check_function(
        fn,
        reference,
        make,
        name="sense_score",
        concept="cosine similarity compares directions, so the vectors' lengths must not matter; a vector compared "
        "with itself (cosine 1) is not a pair, and the score is the average similarity of same-sense pairs minus that "
        "of different-sense pairs",
        hint="normalise the rows, take all pairwise cosines, average those of pairs with the same label (leaving out "
        "each vector with itself) and subtract the average over pairs with different labels",
    )


# Exercise 2: the biLM's layers from a forward and a backward LSTM stack


def library_bilm_layers(x, fwd_lstms, bwd_lstms, lengths):
    """The library's biLM layers (:class:`~onehot2gpt.elmo.BiLM`, no dropout) over a token layer
    x (B, T, H) with the given LSTM stacks: (B, T, L+1, 2H), padded positions 0. The reference of
    :func:`check_bilm_layers`, and the stand-in for the student's function while it is unwritten."""
    from onehot2gpt.elmo import BiLM, BiLMConfig

    H, L = x.shape[-1], len(fwd_lstms)
    bilm = BiLM(BiLMConfig(vocab_size=2, d_model=1, hidden=H, n_layers=L, dropout=0.0, softmax="full"))
    bilm.fwd_layers, bilm.bwd_layers = nn.ModuleList(fwd_lstms), nn.ModuleList(bwd_lstms)
    mask = torch.arange(x.shape[1], device=x.device) < lengths.to(x.device)[:, None]  # (B, T)
    return bilm.eval()._layers(x, *bilm._directions(x, lengths), mask)


def _bilm_layers_variant(
    x, fwd_lstms, bwd_lstms, lengths, *, whole_rows=False, back=True, residual=True, zero_pad=True, swap=False
):
    """The biLM layers with one typical mistake switched on (for the diagnosis)."""
    from onehot2gpt.elmo import reverse_padded

    rev = (lambda h: h.flip(1)) if whole_rows else (lambda h: reverse_padded(h, lengths))

    def stack(lstms, h):
        states = []
        for j, lstm in enumerate(lstms):
            out, _ = lstm(h)
            h = out + h if j > 0 and residual else out
            states.append(h)
        return states

    fwd = stack(fwd_lstms, x)
    bwd = [rev(h) if back else h for h in stack(bwd_lstms, rev(x))]
    pairs = [(b, f) if swap else (f, b) for f, b in zip(fwd, bwd)]
    layers = torch.stack([torch.cat([x, x], -1)] + [torch.cat(p, -1) for p in pairs], dim=2)
    mask = torch.arange(x.shape[1]) < lengths[:, None]
    return layers * mask[:, :, None, None] if zero_pad else layers


_BILM_MISTAKES = {
    "the backward states are left in reading order: after the backward stack has read the reversed rows, reverse its "
    "states back so that position k holds the state of token k": {"back": False},
    "whole rows are reversed, padding included: the backward LM then starts each short row by reading padding; "
    "reverse only each row's real tokens": {"whole_rows": True},
    "layers 2..L have no residual connection: each of them adds its input to its LSTM's output": {"residual": False},
    "the padded positions are not zero: multiply by the mask of real tokens": {"zero_pad": False},
    "the halves are swapped: each layer is [forward; backward]": {"swap": True},
}


def _bilm_layers_diagnose(got, expected, x, fwd_lstms, bwd_lstms, lengths):
    if not isinstance(got, torch.Tensor):
        return None
    B, T, L1, D2 = expected.shape
    if got.shape == (B, T, L1 - 1, D2):
        return "one layer is missing: the token layer [x; x] comes first, then one layer per LSTM"
    if got.shape == (B, T, L1, D2 // 2):
        return "each layer must hold both directions side by side: [forward; backward], 2H wide"
    if got.shape != expected.shape:
        return None
    with torch.no_grad():
        return first_match(
            got, {m: _bilm_layers_variant(x, fwd_lstms, bwd_lstms, lengths, **k) for m, k in _BILM_MISTAKES.items()}
        )


def check_bilm_layers(fn: Callable) -> None:
    """Exercise: token layer x (B, T, H), the forward and backward stacks (lists of L one-layer
    ``nn.LSTM(H, H, batch_first=True)``) and lengths (B,) → the biLM's layers (B, T, L+1, 2H), the
    token layer [x; x] first, then [forward_j; backward_j], padded positions 0; compared with the
    library's :class:`~onehot2gpt.elmo.BiLM` holding the same LSTMs: random ones, and (every other
    test) the trained stacks of the course checkpoint ``bilm-wikitext2``."""

    def lstms(gen, H, L):
        stack = []
        for _ in range(L):
            lstm = nn.LSTM(H, H, batch_first=True)
            with torch.no_grad():
                for p in lstm.parameters():
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.5)
            stack.append(lstm)
        return stack

    trained: list = []

    def course_stacks():
        """The trained forward and backward stacks of the course checkpoint ``bilm-wikitext2``."""
        if not trained:
            from onehot2gpt.checkpoints import load

            bilm = load("bilm-wikitext2").model.eval()
            trained.append((list(bilm.fwd_layers), list(bilm.bwd_layers), bilm.config.hidden))
        return trained[0]

    trial = iter(range(10**6))

    def make(gen):
        B, T, H, L = rand_int(gen, 2, 5), rand_int(gen, 2, 8), rand_int(gen, 1, 5), rand_int(gen, 2, 4)
        lengths = torch.randint(1, T + 1, (B,), generator=gen)
        lengths[0] = T  # one full row,
        lengths[1] = rand_int(gen, 1, T)  # one padded row
        if next(trial) % 2:  # every other test: the course checkpoint's trained stacks
            fwd, bwd, H = course_stacks()
            return torch.randn(B, T, H, generator=gen) * 0.5, fwd, bwd, lengths
        return torch.randn(B, T, H, generator=gen), lstms(gen, H, L), lstms(gen, H, L), lengths

    check_function(
        without_grad(fn),
        without_grad(library_bilm_layers),
        make,
        name="bilm_layers",
        trials=5,
        diagnose=_bilm_layers_diagnose,
        concept="the forward stack reads each row left to right; the backward stack is the same kind of stack reading "
        "each row's real tokens from last to first, and its states are put back in sentence order so that position k "
        "of both halves describes token k. Every layer after the first adds its input (a residual). Token k's layers "
        "are the token layer twice, then forward and backward side by side, one per LSTM layer; padding positions "
        "hold zeros",
        hint="the backward stack must read each row's real tokens reversed (the previous exercise), and its states "
        "must be reversed back before they sit beside the forward ones; layer 0 is [x; x], layer j is [forward_j; "
        "backward_j], all stacked into (B, T, L+1, 2H) with zeros at the padding positions",
    )


# ULMFiT: the slanted triangular learning rate


def check_slanted_triangular_lr(fn: Callable) -> None:
    """Exercise: fn(step, total_steps, lr_max, cut_frac, ratio) → STLR's learning rate at `step`;
    compared with :func:`onehot2gpt.ulmfit.slanted_triangular_lr` at every step of a run."""
    from onehot2gpt.ulmfit import slanted_triangular_lr

    def make(gen):
        total = rand_int(gen, 8, 300)
        lr_max = float(10 ** (-4 + 3 * torch.rand(1, generator=gen)))
        cut_frac = [0.05, 0.1, 0.2, 0.25, 0.3][rand_int(gen, 0, 5)]
        ratio = [8.0, 16.0, 32.0][rand_int(gen, 0, 3)]
        return total, lr_max, cut_frac, ratio

    def every_step(schedule):
        def rates(total, lr_max, cut_frac, ratio):
            return torch.tensor(
                [float(schedule(t, total, lr_max, cut_frac, ratio)) for t in range(total)], dtype=torch.float64
            )

        return rates

    def diagnose(got, expected, total, lr_max, cut_frac, ratio):
        if got.numel() != expected.numel() or not torch.isfinite(got).all():
            return None
        if abs(got[0]) < 1e-12:
            return "your rate starts at 0; STLR starts at lr_max / ratio (p = 0 gives (1 + 0) / ratio)"
        if int(got.argmax()) != int(expected.argmax()):
            return (
                f"your rate peaks at step {int(got.argmax())}, STLR at step {int(expected.argmax())} "
                f"(cut = ⌊total_steps · cut_frac⌋ = ⌊{total} · {cut_frac}⌋)"
            )
        if got[-1] < expected[-1] * 0.5:
            return "your rate falls too far: at the last step it should be just above lr_max / ratio"
        return None

    check_function(
        every_step(fn),
        every_step(slanted_triangular_lr),
        make,
        name="slanted_triangular_lr",
        diagnose=diagnose,
        rtol=1e-6,
        atol=1e-12,
        concept="STLR rises linearly from lr_max / ratio to lr_max over the first cut = ⌊total_steps · cut_frac⌋ "
        "steps (at least 1), then falls linearly for the remaining steps, back towards lr_max / ratio; p goes 0 → 1 → "
        "0 and the rate is lr_max · (1 + p · (ratio − 1)) / ratio",
        hint="at which step does the rise end (cut, at least 1), and what fraction p of the rise, or of the fall "
        "after it, has been covered at `step`: 0 at step 0, 1 at cut, back towards 0 at total_steps?",
    )
