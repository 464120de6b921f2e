"""Prompts of a chosen number of tokens for a server whose tokenizer rooflab does not have.

A prompt is a tag that makes it unique (so no prefix cache serves it from an earlier request)
and then words from a fixed list. How many tokens a number of words makes is asked of the
server: its tokenize endpoint where it has one (llama-server and vLLM ``/tokenize``,
llama-cpp-python ``/extras/tokenize``), else the ``usage.prompt_tokens`` of short requests that
ask for one token. Two probes give tokens per word and the fixed part; the count for each
length asked is then searched for and checked with the same counter. On the chat endpoint the
chat template's own tokens are measured by one request and taken off. Without either source
the lengths are an estimate (1.3 tokens per word), and a warning says so.

A counter is the server's, so it is not believed blindly: counts outside [0, 2^30] are no
answer, a slope outside 0.5 to 16 tokens per word (no tokenizer splits these words so) falls
back to the estimate, and no prompt has more than 2 words per token asked (plus a few), so a
server cannot make rooflab build a prompt many times the size asked for."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from rooflab.core.measure.loadtest.untrusted import reported_count as checked_count

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu").split()
PROBES = (32, 128)             # words in the two calibration prompts
EXACT_LENGTHS = 32             # distinct lengths searched for one by one; the rest use the fit
SEARCH_ROUNDS = 4
ESTIMATE_PER_WORD = 1.3        # tokens per word when the server cannot say (English BPE vocabularies)
PER_WORD_RANGE = (0.5, 16.0)   # tokens per word a counter may report and be believed
TOKENIZE_PATHS = ("/tokenize", "/extras/tokenize")

Counter = Callable[[str], Awaitable[int | None]]     # text -> tokens, None when it cannot tell


PADS = (" x", "x")             # appended to reach a count the words step over (a word, or a letter)
PAD_TRIES = 6


def prompt_text(tag: str, words: int, pads: int = 0) -> str:
    """The prompt: ``tag``, then ``words`` words of the list in turn, then ``pads``: a count of
    ``PADS[0]`` (below 1,000) or, 1,000 and up, of ``PADS[1]``."""
    pad = PADS[0] * pads if pads < 1000 else PADS[1] * (pads - 1000)
    return f"{tag}: " + " ".join(WORDS[i % len(WORDS)] for i in range(max(0, words))) + pad


def tokens_in(body: Any) -> int | None:
    """A tokenize endpoint's answer as a count: ``count`` (vLLM) or the ``tokens`` list."""
    if not isinstance(body, dict):
        return None
    if "count" in body:
        return checked_count(body["count"])
    tokens = body.get("tokens")
    return len(tokens) if isinstance(tokens, list) else None


@dataclass
class PromptMaker:
    """Words for a length: ``fixed`` tokens plus ``per_word`` tokens a word, refined to the
    counts ``exact`` found (length -> (words, pads, tokens)). ``method``: where counts came from."""

    method: str
    per_word: float
    fixed: float
    exact: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    extra: int = 0             # tokens the chat template adds

    def words_for(self, tokens: int) -> int:
        return most_words(tokens, round((tokens - self.extra - self.fixed) / self.per_word))

    def prompt(self, tag: str, tokens: int) -> tuple[str, int]:
        """(text, its tokens as counted or estimated) for a prompt of ``tokens`` tokens."""
        if tokens in self.exact:
            words, pads, counted = self.exact[tokens]
            return prompt_text(tag, words, pads), counted
        words = self.words_for(tokens)
        return prompt_text(tag, words), round(self.fixed + self.per_word * words) + self.extra


def most_words(tokens: int, words: int) -> int:
    """``words`` held to [1, 2 x ``tokens`` + 64]: what any believable counter needs for
    ``tokens`` tokens (``PER_WORD_RANGE``), whatever the counts said."""
    return min(max(1, words), 2 * tokens + 64)


TAG = "000000-00-00000"        # as long as every request's (``request_tag``)


def request_tag(run: int, level: int, index: int) -> str:
    """A prompt's unique start: a number drawn for the run (so no cache of an earlier run
    serves it), the level and the request, in digits of a fixed width (a fixed token count)."""
    return f"{run % 1_000_000:06d}-{level % 100:02d}-{index % 100_000:05d}"


async def calibrate_prompt_words(count: Counter | None, usage_count: Counter | None, lengths: set[int],
                    chat: bool) -> tuple[PromptMaker, list[str]]:
    """The ``PromptMaker`` for ``lengths``: counts from ``count`` (a tokenize endpoint) or else
    ``usage_count`` (a request's usage); warnings for what could not be measured."""
    warnings: list[str] = []
    counter, method = count, "the server's tokenize endpoint"
    if counter is None or await counter(prompt_text(TAG, PROBES[0])) is None:
        counter, method = usage_count, "the prompt_tokens of one-token requests"
    if counter is None:
        return _estimate(warnings), warnings
    low = await counter(prompt_text(TAG, PROBES[0]))
    high = await counter(prompt_text(TAG, PROBES[1]))
    if low is None or high is None:
        return _estimate(warnings), warnings
    if high <= low:
        return _estimate(warnings, f"{method} counted {low} tokens for {PROBES[0]} words and {high} for "
                                   f"{PROBES[1]}"), warnings
    per_word = (high - low) / (PROBES[1] - PROBES[0])
    if not PER_WORD_RANGE[0] <= per_word <= PER_WORD_RANGE[1]:
        why = (f"{method} gave {per_word:.3g} tokens per word, outside {PER_WORD_RANGE[0]:g} to "
               f"{PER_WORD_RANGE[1]:g}, which is not believed")
        return _estimate(warnings, why), warnings
    maker = PromptMaker(method=method, per_word=per_word, fixed=low - per_word * PROBES[0])
    if chat and counter is count and usage_count is not None:
        whole = await usage_count(prompt_text(TAG, PROBES[0]))
        if whole is not None and whole >= low:
            maker.extra = whole - low
            maker.method += f" (+{maker.extra} tokens of chat template, from a request)"
        else:
            warnings.append("the chat template's tokens could not be measured: prompts count the message only")
    for target in sorted(lengths)[:EXACT_LENGTHS]:
        maker.exact[target] = await _search(maker, counter, target)
    off = [f"{t} -> {c}" for t, (_, _, c) in maker.exact.items() if abs(c - t) > max(2, 0.02 * t)]
    if off:
        warnings.append("prompt lengths could not be hit exactly (asked -> made): " + ", ".join(off[:6]))
    return maker, warnings


async def _search(maker: PromptMaker, counter: Counter, target: int) -> tuple[int, int, int]:
    """(words, pads, tokens) whose count is closest to ``target``: a few rounds of the fitted
    slope over words from below, then pads (one token each, or what the first one shows)."""
    words = maker.words_for(target)
    best: tuple[int, int, int] | None = None
    for _ in range(SEARCH_ROUNDS):
        counted = await counter(prompt_text(TAG, words))
        if counted is None:
            break
        counted += maker.extra
        if best is None or (counted <= target and (best[2] > target or counted > best[2])) or \
                (best[2] > target and counted < best[2]):
            best = (words, 0, counted)
        if counted == target:
            return best
        step = round((target - counted) / maker.per_word) or (1 if counted < target else -1)
        words = most_words(target, words + step)
    if best is None:
        return (words, 0, round(maker.fixed + maker.per_word * words) + maker.extra)
    words, _, counted = best
    tries = 0
    for base in (0, 1000):                     # spaced pads, then letters glued to the last word
        pads = base
        while counted < target and tries < PAD_TRIES:
            tries += 1
            pads += 1
            found = await counter(prompt_text(TAG, words, pads))
            if found is None or found + maker.extra > target:
                break
            best = (words, pads, found + maker.extra)
            counted = best[2]
    return best


def _estimate(warnings: list[str],
              why: str = "the server has no tokenize endpoint and reports no usage") -> PromptMaker:
    warnings.append(f"{why}: prompt lengths are estimates ({ESTIMATE_PER_WORD} tokens per word)")
    return PromptMaker(method="an estimate", per_word=ESTIMATE_PER_WORD, fixed=len(TAG))
