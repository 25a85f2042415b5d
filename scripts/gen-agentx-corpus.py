#!/usr/bin/env python3
"""Writes datasets/agentx-corpus.txt: the text AgentX prompt blocks are cut from.

The AgentX traces carry no prompt text, only token counts and KV block ids, so every prompt is
synthesized (spec §2.6). The blocks need words a coding agent's context would hold; their exact
meaning does not matter. This script composes that text from word lists and sentence shapes
written for specperf (Apache-2.0, like the repository): narration of a coding session, review
notes, and small code listings.

Deterministic: a fixed-seed xorshift generator (not Python's `random`, whose streams are not
promised across versions), so re-running it rewrites the committed file byte for byte:

    python3 scripts/gen-agentx-corpus.py            # writes datasets/agentx-corpus.txt
    python3 scripts/gen-agentx-corpus.py --check    # exits 1 if the committed file differs
"""

import re
import sys
from pathlib import Path

TARGET_BYTES = 240_000
OUT = Path(__file__).resolve().parent.parent / "datasets" / "agentx-corpus.txt"


class Rng:
    """xorshift64*: small, fast, and the same on every Python."""

    def __init__(self, seed):
        self.s = seed or 0x9E3779B97F4A7C15

    def next(self):
        s = self.s
        s ^= (s >> 12) & 0xFFFFFFFFFFFFFFFF
        s ^= (s << 25) & 0xFFFFFFFFFFFFFFFF
        s ^= (s >> 27) & 0xFFFFFFFFFFFFFFFF
        self.s = s & 0xFFFFFFFFFFFFFFFF
        return (self.s * 0x2545F4914F6CDD1D) & 0xFFFFFFFFFFFFFFFF

    def pick(self, items):
        return items[self.next() % len(items)]

    def chance(self, percent):
        return self.next() % 100 < percent


NOUNS = """
scheduler parser buffer handler request response session worker lane queue channel socket
stream token block prefix cache entry record histogram counter gauge metric snapshot summary
report table column row field value key index offset length limit budget deadline timeout
retry backoff connection client server endpoint route header body payload message chunk frame
event signal callback future task thread runtime executor pool allocator arena slice vector
string map set tree node edge graph branch commit patch diff hunk line file folder path module
crate package library binary test fixture assertion benchmark profile trace span log warning
error panic result option iterator closure trait struct enum variant pattern match loop guard
lock mutex atomic reference pointer lifetime borrow owner scope config flag argument parameter
default schema version migration database query transaction cursor batch window interval clock
timer tick rate ratio percentile mean median sample dataset corpus prompt template tokenizer
vocabulary encoder decoder model layer weight tensor shape kernel device memory page region
marker digest checksum seed generator shuffle permutation boundary segment tail head frontier
manifest lockfile workflow pipeline stage job runner artifact release changelog readme comment
docstring example tutorial issue ticket reviewer maintainer contributor user operator caller
callee function method constructor builder factory adapter wrapper proxy gateway balancer
""".split()

VERBS = """
reads writes parses returns sends receives builds checks validates rejects accepts counts
records measures schedules dispatches cancels retries drains flushes closes opens spawns joins
waits blocks yields polls wakes stores loads caches evicts hashes sorts merges splits trims
pads encodes decodes renders formats logs reports exports imports resolves registers removes
replaces updates clears resets advances rewinds skips copies moves clones borrows owns drops
allocates frees grows shrinks compares matches filters maps folds collects groups partitions
""".split()

BASE_VERBS = """
read write parse return send receive build check validate reject accept count record measure
schedule dispatch cancel retry drain flush close open spawn join wait block yield poll wake
store load cache evict hash sort merge split trim pad encode decode render format log report
export import resolve register remove replace update clear reset advance rewind skip copy move
clone borrow drop allocate free grow shrink compare match filter map fold collect group rename
refactor inline extract document simplify rewrite revert bisect reproduce profile benchmark
""".split()

ADJECTIVES = """
empty full partial stale fresh cached pending ready idle busy slow fast small large nested
flat sorted unsorted shared private public local remote blocking async deterministic random
bounded unbounded optional required default custom legacy new old first last next previous
current final initial valid invalid broken flaky stable unstable strict lenient exact rough
typed untyped mutable immutable atomic concurrent sequential parallel lazy eager hidden visible
""".split()

ADVERBS = """
quickly slowly carefully again once twice already still only always never rarely usually
silently loudly eagerly lazily safely correctly exactly roughly early late first finally
""".split()

AGENT_OPENERS = [
    "Let me look at how the {n} {v} the {n2}.",
    "I will start by reading the {n} module to see where the {n2} is {pp}.",
    "First I need to understand why the {a} {n} {v} an {a2} {n2}.",
    "The failing test suggests the {n} {v} the {n2} before the {n3} is ready.",
    "Now I can see the problem: the {n} never {v} the {a} {n2}.",
    "Next I should check whether the {n} still {v} the {n2} when the {n3} is {a}.",
    "I am going to {bv} the {n} so that it {v} the {n2} {adv}.",
    "Looking at the call site, the {n} is {pp} twice when the {n2} is {a}.",
]

AGENT_MIDDLES = [
    "The {n} {v} the {n2} and then {v2} the {n3}, which is why the {n4} looks {a}.",
    "When the {n} is {a}, the {n2} {v} the {n3} {adv} instead of waiting for the {n4}.",
    "Each {n} holds a {a} {n2}, so the {n3} must {bv} it before it can {bv2} the {n4}.",
    "If the {n} {v} a {a} {n2}, the {n3} has to {bv} the whole {n4} again.",
    "The {a} {n} is only {pp} after the {n2} {v} the last {n3}.",
    "Because the {n} {v} the {n2} {adv}, the {n3} sees a {a} {n4} on the next {n5}.",
    "The {n} and the {n2} both {bv} the same {n3}, which makes the {n4} {a}.",
    "This {n} {v} every {n2} in the {n3} and keeps the {a} ones in a {n4}.",
    "The test {v} a {a} {n} and expects the {n2} to {bv} it without touching the {n3}.",
    "Nothing else {v} the {n}, so it is safe to {bv} it here and {bv2} the {n2} later.",
    "The {n} should {bv} the {n2} once per {n3}, not once per {n4}.",
    "Instead of a {a} {n}, we can keep a {a2} {n2} and {bv} it when the {n3} changes.",
]

AGENT_CLOSERS = [
    "I will {bv} the {n} now and run the tests again.",
    "With that change the {n} {v} the {n2} {adv} and the test passes.",
    "That fixes the {a} {n}; the remaining {n2} is unrelated and can wait.",
    "Let me run the whole suite to make sure nothing else {v} the {n}.",
    "The {n} is now {a}, and the {n2} no longer {v} the {n3}.",
    "I have updated the {n} and added a test that {v} the {a} {n2}.",
]

REVIEW_LINES = [
    "Please {bv} the {n} before the {n2} {v} it; otherwise the {n3} stays {a}.",
    "Could this {n} {bv} the {n2} instead? It would keep the {n3} {a}.",
    "Nit: the {n} name does not say that it {v} the {n2}.",
    "Why does the {n} {bv} the {n2} here and not in the {n3}?",
    "This looks right, but a test for the {a} {n} would help the next reader.",
    "The {n} is {pp} on every {n2}; consider moving it out of the {n3}.",
    "I think the {a} {n} case is missing: what happens when the {n2} is {a2}?",
]

IDENT_PARTS = """
read write parse next prev first last total count max min len size offset start end block
token turn lane tree node conv trace hash seed pool text tail head buf line row col key val
state plan step tick time delay gap cap limit rate ratio hit miss seen kept lost done ready
""".split()

TYPE_NAMES = """
Scheduler Parser Buffer Handler Request Response Session Worker Lane Queue Record Snapshot
Summary Report Config Options Builder Plan Turn Trace Block Segment Pool Marker Digest Error
""".split()

PAST_PARTICIPLES = """
read written parsed returned sent received built checked validated rejected accepted counted
recorded measured scheduled dispatched cancelled retried drained flushed closed opened spawned
joined stored loaded cached evicted hashed sorted merged split trimmed encoded decoded rendered
""".split()


def ident(rng):
    parts = [rng.pick(IDENT_PARTS) for _ in range(1 + rng.next() % 3)]
    return "_".join(parts)


def fill(rng, shape):
    return shape.format(
        n=rng.pick(NOUNS), n2=rng.pick(NOUNS), n3=rng.pick(NOUNS), n4=rng.pick(NOUNS),
        n5=rng.pick(NOUNS), v=rng.pick(VERBS), v2=rng.pick(VERBS), bv=rng.pick(BASE_VERBS),
        bv2=rng.pick(BASE_VERBS), a=rng.pick(ADJECTIVES), a2=rng.pick(ADJECTIVES),
        adv=rng.pick(ADVERBS), pp=rng.pick(PAST_PARTICIPLES),
    )


def narration(rng):
    sentences = [fill(rng, rng.pick(AGENT_OPENERS))]
    for _ in range(2 + rng.next() % 5):
        sentences.append(fill(rng, rng.pick(AGENT_MIDDLES)))
    sentences.append(fill(rng, rng.pick(AGENT_CLOSERS)))
    return " ".join(sentences)


def review(rng):
    return "\n".join("- " + fill(rng, rng.pick(REVIEW_LINES)) for _ in range(2 + rng.next() % 4))


def listing(rng):
    ty = rng.pick(TYPE_NAMES)
    fname = ident(rng)
    arg = ident(rng)
    lines = [
        "```rust",
        f"/// {fill(rng, rng.pick(AGENT_MIDDLES))}",
        f"fn {fname}(&mut self, {arg}: &{ty}) -> Result<usize, Error> {{",
    ]
    for _ in range(2 + rng.next() % 5):
        local = ident(rng)
        if rng.chance(40):
            lines.append(f"    let {local} = self.{ident(rng)}.get({arg}.{ident(rng)})?;")
        elif rng.chance(50):
            lines.append(f"    if {arg}.{ident(rng)} > self.{ident(rng)} {{")
            lines.append(f"        // {fill(rng, rng.pick(REVIEW_LINES))}")
            lines.append(f"        return Err(Error::{rng.pick(TYPE_NAMES)});")
            lines.append("    }")
        else:
            lines.append(f"    for {local} in self.{ident(rng)}.iter() {{")
            lines.append(f"        self.{ident(rng)}.push({local}.{ident(rng)});")
            lines.append("    }")
    lines.append(f"    Ok(self.{ident(rng)}.len())")
    lines.append("}")
    lines.append("```")
    return "\n".join(lines)


def main():
    rng = Rng(0x5EC_9E2F_A6E7)
    parts = []
    size = 0
    while size < TARGET_BYTES:
        roll = rng.next() % 10
        part = listing(rng) if roll < 2 else review(rng) if roll < 4 else narration(rng)
        parts.append(part)
        size += len(part) + 2
    text = "\n\n".join(parts) + "\n"
    # Articles agree with the word drawn after them.
    text = re.sub(r"\b([Aa]) ([aeiou])", r"\1n \2", text)
    text = re.sub(r"\b([Aa])n ([^aeiou\W])", r"\1 \2", text)
    if "--check" in sys.argv[1:]:
        if OUT.read_text() != text:
            print(f"{OUT} differs from the generator's output; re-run without --check", file=sys.stderr)
            sys.exit(1)
        return
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text)} bytes)")


if __name__ == "__main__":
    main()
