"""Checks for notebook 10 (zero-shot prompting)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from onehot2gpt.utils import seeded

from .checking import check_function, rand_int

_WORDS = tuple("mira tolvan lives in keeps a goat baker is where does live what owl the cat sailor brisk".split())


def _random_sentence(gen: torch.Generator, low: int = 2, high: int = 7) -> str:
    return " ".join(_WORDS[rand_int(gen, 0, len(_WORDS))] for _ in range(rand_int(gen, low, high)))


def _reference_qa_prompt(passage, question, examples=()):
    shots = "".join(f"{p}\nq : {q}\na : {a} .\n" for p, q, a in examples)
    return f"{shots}{passage}\nq : {question}\na :"


def check_qa_prompt(fn: Callable) -> None:
    """Exercise: (passage, question, examples=[(passage, question, answer), …]) → the prompt in
    the pre-training corpus's Q/A shape, ending with "a :"."""

    def make(gen):
        examples = [
            (_random_sentence(gen), _random_sentence(gen) + " ?", _random_sentence(gen, 1, 3))
            for _ in range(rand_int(gen, 0, 3))
        ]
        return _random_sentence(gen) + " .", _random_sentence(gen) + " ?", examples

    check_function(
        fn,
        _reference_qa_prompt,
        make,
        name="qa_prompt",
        trials=8,
        concept="a zero-shot prompt works only if it looks exactly like the documents the model read in pre-training: "
        "the solved examples first, each in the corpus's Q/A layout, then the new passage and question, ending where "
        "the answer should begin",
        hint="each solved example is its passage, a line break, 'q : ' and the question, a line break, 'a : ', the "
        "answer and ' .', and a line break; after all of them come the new passage, a line break, 'q : ' and the "
        "question, a line break and 'a :' (no space after the colon: the model writes the answer's first word, space "
        "included, itself). Print the corpus's Q/A document above and copy its shape exactly",
    )


def _tiny_lm(gen: torch.Generator):
    from onehot2gpt.gpt import GPT, GPTConfig

    seed = int(torch.randint(0, 2**31 - 1, (1,), generator=gen))
    with seeded(seed):  # the notebook's own randomness is left as it was
        model = GPT(GPTConfig.tiny(vocab_size=rand_int(gen, 5, 12), max_len=32)).eval()
    with torch.no_grad():
        model.tok_emb.weight.mul_(10.0)  # spread the logits, so greedy choices are clear-cut
    return model


def _reference_greedy_until_newline(model, ids, newline_id, max_new):
    ids, new = list(ids), []
    with torch.no_grad():
        for _ in range(max_new):
            nxt = int(model(torch.tensor([ids])).logits[0, -1].argmax())
            new.append(nxt)
            ids.append(nxt)
            if nxt == newline_id:
                break
    return new


def check_greedy_until_newline(fn: Callable) -> None:
    """Exercise: (model, prompt ids, newline id, max_new) → the greedily chosen new ids, the line
    break included, at most max_new of them."""

    def make(gen):
        model = _tiny_lm(gen)
        ids = torch.randint(0, model.config.vocab_size, (rand_int(gen, 1, 8),), generator=gen).tolist()
        free = _reference_greedy_until_newline(model, ids, -1, 8)
        # Half the tests stop at a line break the model does write, the others run to max_new.
        newline = free[rand_int(gen, 0, 8)] if rand_int(gen, 0, 2) else model.config.vocab_size - 1
        return model, ids, newline, rand_int(gen, 1, 9)

    check_function(
        fn,
        _reference_greedy_until_newline,
        make,
        name="greedy_until_newline",
        trials=8,
        concept="greedy decoding feeds the model everything so far, takes the single most likely next token, appends "
        "it and repeats; an answer is one line, so generation stops as soon as the end-of-line token has been "
        "produced (and never goes beyond max_new tokens)",
        hint="loop at most max_new times: run the model on all ids so far (a (1, T) tensor), take the arg-max of the "
        "last position's logits, append it to both the ids and the list you return, and stop right after appending "
        "newline_id. Return a list of Python ints, not tensors",
    )


def _reference_answer_matches(logits, start, answer_ids):
    predicted = logits[start - 1 : start - 1 + len(answer_ids)].argmax(-1)
    return bool((predicted == torch.as_tensor(answer_ids)).all())


def check_answer_matches(fn: Callable) -> None:
    """Exercise: (logits (T, V) of prompt + answer, start = the answer's first position, answer ids)
    → would greedy decoding after the prompt write exactly the answer?"""

    def make(gen):
        T, V = rand_int(gen, 4, 12), rand_int(gen, 3, 10)
        logits = torch.randn(T, V, generator=gen)
        start = rand_int(gen, 1, T)
        greedy = logits[start - 1 : T - 1].argmax(-1).tolist()
        answer = list(greedy)
        if rand_int(gen, 0, 2):  # half the tests: one answer token differs from greedy
            k = rand_int(gen, 0, len(answer))
            answer[k] = (answer[k] + 1) % V
        return logits, start, answer

    check_function(
        fn,
        _reference_answer_matches,
        make,
        name="answer_matches",
        trials=12,
        concept="one teacher-forced pass gives, at every position, the model's guess for the NEXT token; greedy "
        "decoding would write the answer exactly when the guess at each position just before an answer token is that "
        "answer token",
        hint="the logits at position t predict token t + 1, so answer token k (counting from 0) is predicted at "
        "position start − 1 + k: do the arg-max predictions at those positions all equal the answer's ids? Return one "
        "Python bool",
    )
