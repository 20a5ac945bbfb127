"""Decoding a language model: greedy, temperature, top-k and top-p sampling, with a key/value cache.

Taught in notebook 09 (generation step by step) and used by notebook 10's prompting widget.
Top-k sampling follows Fan et al., "Hierarchical Neural Story Generation" (2018); top-p
("nucleus") sampling Holtzman et al., "The Curious Case of Neural Text Degeneration" (2020).

The filters take logits over the vocabulary in the last dimension, (V,) or (B, V), and set the
tokens they remove to -inf, so that a softmax afterwards gives them probability 0. They are
applied in Hugging Face's order: temperature, then top-k, then top-p.

:func:`generate` works with any model shaped like :class:`onehot2gpt.gpt.GPT`: ``model(ids,
past_key_values=…, use_cache=…)`` returns ``.logits`` (B, T, V) and ``.past_key_values``, and
``model.config.max_len`` is its context window.
"""

from __future__ import annotations

import numbers
import warnings
import zlib

import torch

from .utils import as_ids, check_choice, check_finite_logits, check_int, check_number, check_text, evaluating

# -------------------------------------------------------------------------------- Filters on logits


def _check_logits(logits, where: str = "logits"):
    """A float tensor (…, V) without NaN or +inf (-inf is how a filter removes a token), else a
    ValueError that `where` (the function's name) starts."""
    if not isinstance(logits, torch.Tensor) or logits.dim() == 0 or not logits.is_floating_point():
        raise ValueError("logits must be a float tensor with the vocabulary in the last dimension, (V,) or (B, V)")
    broken = torch.isnan(logits) | torch.isposinf(logits)
    if bool(broken.any()):
        kinds = " and ".join(k for k, m in (("NaN", torch.isnan(logits)), ("+inf", torch.isposinf(logits))) if m.any())
        raise ValueError(
            f"{where}: logits hold {kinds} ({int(broken.sum())} of {logits.numel()} values); pass finite "
            f"logits (-inf only for removed tokens). A model with NaN weights gives NaN logits: check the weights"
        )
    if logits.numel() and not bool((logits > float("-inf")).any(-1).all()):
        raise ValueError(
            f"{where}: a row of logits is -inf everywhere: every token is removed, so there is nothing "
            f"to keep or sample; leave at least one token finite in each row"
        )


def _check_options(temperature=1.0, top_k=None, top_p=None, *, allow_zero: bool = True):
    """Check the sampling options (top_k and top_p only when given); temperature 0 only with `allow_zero`."""
    fix = "its limit temperature → 0 is greedy decoding: generate(…, temperature=0) or greedy=True"
    check_number(temperature, "temperature", 0, low_open=not allow_zero, fix=fix)
    if top_k is not None:
        check_int(top_k, "top_k", 1, fix="how many of the most likely tokens to keep; top_k=None keeps them all")
    if top_p is not None:
        check_number(
            top_p, "top_p", 0, 1, low_open=True, fix="the probability mass to keep; 1 or None keeps every token"
        )


def apply_temperature(logits, temperature: float):
    """logits (…, V) → logits / temperature. Below 1 sharpens the distribution, above 1 flattens it.

    Example:
        >>> torch.softmax(apply_temperature(torch.tensor([0.0, 1.0]), 0.5), -1)
        tensor([0.1192, 0.8808])
    """
    _check_logits(logits, "apply_temperature")
    _check_options(temperature, allow_zero=False)
    return logits / temperature


def filter_top_k(logits, k: int):
    """logits (…, V) → the same with all but the k largest set to -inf. Exactly min(k, V) stay:
    a tie at the k-th place goes to the lower token id.

    Example:
        >>> filter_top_k(torch.tensor([1.0, 3.0, 2.0, 3.0]), 2)
        tensor([-inf, 3., -inf, 3.])
    """
    _check_logits(logits, "filter_top_k")
    _check_options(top_k=k)
    if k >= logits.size(-1):
        return logits.clone()
    # A stable sort keeps equal logits in id order, so ties are broken the same way every time.
    order = torch.sort(logits, dim=-1, descending=True, stable=True).indices  # (…, V)
    keep = torch.zeros_like(logits, dtype=torch.bool).scatter(-1, order[..., :k], True)
    return logits.masked_fill(~keep, float("-inf"))


def filter_top_p(logits, p: float):
    """logits (…, V) → the same with -inf outside the nucleus: the smallest set of most likely
    tokens whose probability mass is ≥ p. The most likely token always stays.

    Example:
        >>> filter_top_p(torch.tensor([0.5, 0.3, 0.2]).log(), 0.75)   # 0.5 < 0.75 ≤ 0.5 + 0.3
        tensor([-0.6931, -1.2040,    -inf])
    """
    _check_logits(logits, "filter_top_p")
    _check_options(top_p=p)
    if p == 1:
        return logits.clone()
    probs, order = torch.sort(torch.softmax(logits.float(), dim=-1), dim=-1, descending=True, stable=True)  # (…, V)
    before = probs.cumsum(-1).roll(1, dims=-1)  # mass of the tokens more likely than each one…
    before[..., 0] = 0.0  # …(the first has none)
    keep_sorted = before < p  # still short of p: this token is needed
    keep = torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)
    return logits.masked_fill(~keep, float("-inf"))


def _filtered_logits(logits, temperature: float, top_k: int | None, top_p: float | None):
    """Temperature, then top-k, then top-p: logits (…, V) → logits (…, V)."""
    logits = apply_temperature(logits, temperature)
    if top_k is not None:
        logits = filter_top_k(logits, top_k)
    if top_p is not None:
        logits = filter_top_p(logits, top_p)
    return logits


# -------------------------------------------------------------------------------- Running the model


def _prompt_batch(model, ids, max_new_tokens: int, on_crop: str):
    """A prompt (T,) or (B, T) → ((B, T) long tensor, whether it was 1-D), checked against the
    model's vocabulary and context (:func:`_crop_notice`)."""
    ids = as_ids(ids, getattr(model.config, "vocab_size", None), dims=(1, 2), name="the prompt", allow_empty=True)
    if ids.numel() == 0:
        raise ValueError(
            "the prompt is empty: give at least one token to continue from (e.g. the id "
            "of a newline, or of <bos>); a GPT has no start state of its own"
        )
    _crop_notice(ids.size(-1), max_new_tokens, model.config.max_len, on_crop)
    return (ids[None], True) if ids.dim() == 1 else (ids, False)


def _crop_notice(T: int, max_new_tokens: int, max_len: int, on_crop: str):
    """Warn (or raise, on_crop="error") when the model would have to read more than max_len tokens."""
    check_choice(on_crop, "on_crop", ("crop", "error"), fix="'crop' slides a window of max_len tokens")
    longest = T + max_new_tokens - 1  # the last sampled token is never fed back to the model
    if longest <= max_len:
        return
    message = (
        f"the prompt ({T} tokens) plus {max_new_tokens} new tokens exceed the model's context "
        f"of max_len={max_len} tokens"
    )
    if on_crop == "error":
        keep = max(max_len - max_new_tokens + 1, 1)
        raise ValueError(
            f"{message}; shorten the prompt to ids[:, -{keep}:], ask for fewer tokens, "
            f"or pass on_crop='crop' to slide a window over the text"
        )
    warnings.warn(
        f"{message}: the model reads only the last {max_len} tokens at each step, and "
        f"forgets the earlier ones (pass on_crop='error' to stop instead)",
        stacklevel=5,  # the line that called generate (past _prompt_batch and no_grad's wrapper)
    )


@torch.no_grad()
def next_token_distribution(model, ids, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None):
    """Prompt ids (T,) → the probabilities (V,) of the next token after temperature, top-k and
    top-p, the distribution :func:`generate` samples from ((B, T) → (B, V)). Temperature 0 puts all
    the mass on the most likely token. A prompt longer than max_len is cropped (with a warning)."""
    _check_options(temperature, top_k, top_p)
    batch, squeeze = _prompt_batch(model, ids, 1, "crop")
    max_len = model.config.max_len
    with evaluating(model):
        logits = model(batch[:, -max_len:]).logits[:, -1]  # (B, V)
    check_finite_logits(logits)  # a diverged model: say so, rather than all the mass on token 0
    if temperature == 0:  # all the mass on the argmax
        probs = torch.zeros_like(logits).scatter(-1, logits.argmax(-1, keepdim=True), 1.0)
    else:
        probs = torch.softmax(_filtered_logits(logits, temperature, top_k, top_p), dim=-1)
    return probs[0] if squeeze else probs


@torch.no_grad()
def generate(
    model,
    ids,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    greedy: bool = False,
    use_cache: bool = True,
    generator: torch.Generator | None = None,
    on_crop: str = "crop",
):
    """Prompt ids (B, T) → (B, T + max_new_tokens): the prompt followed by its continuation ((T,) → 1-D).

    Each step feeds the text so far, takes the last position's logits and picks a token: the
    argmax when `greedy` or temperature == 0, else a sample (drawn with `generator`, for
    reproducible runs) after temperature, top-k and top-p. With `use_cache` the model keeps each
    layer's keys and values and reads only the newest token per step.

    The model reads at most max_len tokens. When the text grows longer, on_crop="crop" (default)
    warns once and slides a window over the last max_len tokens (a full cache is then recomputed
    on the window, so cached and uncached runs agree); on_crop="error" raises a ValueError first.
    `ids` are token ids (a tensor or a list of ints; encode text first); a model whose scores are
    NaN (its training diverged) raises a ValueError that says so.

    Example:
        >>> from onehot2gpt.checkpoints import load
        >>> gpt = load("gpt-char-shakespeare").model
        >>> out = generate(gpt, torch.tensor([[0]]), 5, temperature=0)
        >>> out.shape, out[0, 0].item()   # the prompt, then 5 new tokens
        (torch.Size([1, 6]), 0)
    """
    _check_options(temperature, top_k, top_p)
    check_int(max_new_tokens, "max_new_tokens", 0)
    out, squeeze = _prompt_batch(model, ids, max_new_tokens, on_crop)
    max_len = model.config.max_len
    greedy = greedy or temperature == 0
    past = None
    with evaluating(model):
        for _ in range(max_new_tokens):
            # 1. Logits for the next token: only the newest token while the cache has room,
            #    otherwise (first step, no cache, or a full cache) the last max_len tokens.
            if past is not None and out.size(1) <= max_len:
                step = model(out[:, -1:], past_key_values=past, use_cache=True)
            else:
                step = model(out[:, -max_len:], use_cache=use_cache)
            past = step.past_key_values
            logits = step.logits[:, -1]  # (B, V)
            check_finite_logits(logits)  # a diverged model: say so, rather than token 0 forever
            # 2. Pick: the argmax, or a sample from the filtered distribution.
            if greedy:
                nxt = logits.argmax(-1)  # (B,)
            else:
                probs = torch.softmax(_filtered_logits(logits, temperature, top_k, top_p), dim=-1)
                nxt = torch.multinomial(probs, 1, generator=generator).squeeze(-1)  # (B,)
            out = torch.cat([out, nxt[:, None]], dim=1)  # (B, T + 1)
    return out[0] if squeeze else out


# ------------------------------------------------------------------------- One generator per prompt


def prompt_generator(prompt, seed: int = 0) -> torch.Generator:
    """A random-number generator of its own for one prompt (its text or ids), seeded from `seed`
    and the prompt: the same prompt and seed give the same sample, while different prompts no
    longer share one sequence of random draws (and repeat each other's phrases).

    Example:
        >>> a, b = prompt_generator("ROMEO:"), prompt_generator("JULIET:")
        >>> torch.rand(1, generator=a).item() != torch.rand(1, generator=b).item()
        True
    """
    check_int(seed, "seed", 0)
    if isinstance(prompt, torch.Tensor):
        prompt = prompt.flatten().tolist()
    if isinstance(prompt, str):
        key = prompt.encode("utf-8")
    elif isinstance(prompt, (list, tuple)) and all(
        isinstance(i, numbers.Integral) and not isinstance(i, bool) for i in prompt
    ):
        key = ",".join(str(int(i)) for i in prompt).encode()
    else:
        raise ValueError(f"prompt must be text or a sequence of token ids, got {type(prompt).__name__}")
    if not key:
        raise ValueError("the prompt is empty: give the text or the ids the sample will continue")
    # crc32 is stable across runs and machines (Python's hash() of a str is not); the seed goes
    # into the hashed bytes, because the CPU generator keeps only the low 32 bits of its seed
    return torch.Generator().manual_seed(zlib.crc32(f"{int(seed)}:".encode() + key))


# ------------------------------------------------------------------------- Measuring generated text

_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~“”‘’«»—–…"


def text_words(text: str) -> list[str]:
    """Text → its words: split at whitespace, punctuation stripped from both ends of each piece,
    lower-cased; pieces with nothing left (a lone "--" or ":") are dropped. An apostrophe inside a
    word stays ("o'er", "king's").

    Example:
        >>> text_words("ROMEO:\\nO'er the hill, my lord -- away!")
        ['romeo', "o'er", 'the', 'hill', 'my', 'lord', 'away']
    """
    check_text(text, "text", empty_ok=True, fix="decode ids to text first")
    words = (piece.strip(_PUNCTUATION).lower() for piece in text.split())
    return [w for w in words if w]


def real_word_share(text: str, known_words) -> float:
    """The share of `text`'s words (:func:`text_words`) that are in `known_words`, e.g. the set of
    words of the training text (``set(text_words(training_text))``): 1.0 when every word the model
    wrote is one it read, lower the more of its words are invented.

    Example:
        >>> real_word_share("the kinge of the Hill!", {"the", "of", "hill"})
        0.8
    """
    if isinstance(known_words, str) or not hasattr(known_words, "__contains__"):
        raise ValueError(
            "known_words must be a set of words (e.g. set(text_words(training_text))), "
            f"got {type(known_words).__name__}"
        )
    if not known_words:
        raise ValueError("known_words is empty: build it from a text, set(text_words(training_text))")
    words = text_words(text)
    if not words:
        raise ValueError(f"the text has no words to score (got {text[:40]!r}); generate more characters")
    return sum(w in known_words for w in words) / len(words)


def _as_sequence(seq):
    """A string, or a list of words or ids (a tensor becomes one), else a ValueError."""
    if isinstance(seq, torch.Tensor):
        seq = seq.flatten().tolist()
    if not isinstance(seq, (str, list, tuple)):
        raise ValueError(f"seq must be a string, a list of words or of ids, got {type(seq).__name__}")
    return seq


def repeated_ngram_share(seq, n: int) -> float:
    """The share of the n-grams of `seq` (a string: its characters; a list: its items, e.g. words)
    that already occurred earlier in `seq`: 0 when no n-gram repeats, close to 1 when the text
    loops. A text with fewer than n + 1 items has no earlier n-gram to repeat, and scores 0.

    Example:
        >>> repeated_ngram_share("the cat the cat the".split(), 2)   # 'the cat', 'cat the' come back
        0.5
    """
    check_int(n, "n", 1, fix="the length of the n-grams")
    seq = _as_sequence(seq)
    grams = [tuple(seq[i : i + n]) for i in range(len(seq) - n + 1)]
    if not grams:
        return 0.0
    seen, repeats = set(), 0
    for g in grams:
        repeats += g in seen
        seen.add(g)
    return repeats / len(grams)


def repeating_tail(seq, max_period: int | None = None) -> tuple[int, int]:
    """The loop a text ends in → (period, span): the last `span` items of `seq` repeat a cycle of
    `period` items, at least twice over (span ≥ 2 · period). Among all periods up to `max_period`
    (default half the length) the one with the longest span wins, the shortest period on a tie;
    (0, 0) when the text ends in no repeated cycle.

    Example:
        >>> repeating_tail("once upon the shall the shall the shall")
        (10, 30)
    """
    seq = _as_sequence(seq)
    n = len(seq)
    max_period = n // 2 if max_period is None else check_int(max_period, "max_period", 1)
    best = (0, 0)
    for p in range(1, min(max_period, n // 2) + 1):
        i = n - 1
        while i - p >= 0 and seq[i] == seq[i - p]:
            i -= 1
        span = n - 1 - i + p  # seq[i + 1 - p:] repeats with period p
        if span >= 2 * p and span > best[1]:
            best = (p, span)
    return best
