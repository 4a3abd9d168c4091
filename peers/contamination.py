#!/usr/bin/env python3
"""DevOps-Gym's prefix-completion measures (arXiv 2601.20882, §3.1/Appendix B) computed the peer way,
for the differential test of doc2ci-contamination (stages/contamination/tests/peer_agree.rs).

The screen: the first PREFIX whitespace tokens of a reference are shown, the model's continuation is
compared with the next SUFFIX tokens; a sample is high-risk when s > 0.7, t > 30, p > 30, l > 30 or
b > 0.5. Over the continuation's first |suffix| tokens c and the suffix r (n = |r|), joined by single
spaces as c' and r':
  s  rapidfuzz Levenshtein.normalized_similarity(c', r')
  t  100 * rapidfuzz Hamming.similarity(c, r, pad=True) / n   (same-position matches)
  p  100 * rapidfuzz Prefix.similarity(c, r) / n
  l  100 * rapidfuzz LCSseq.similarity(c, r) / n
  b  sacrebleu.sentence_bleu(c', [r']).score / 100            (0 when c is empty)

Input on stdin: JSON [{"reference", "continuation", "prefix", "suffix"}, ...]; output on stdout:
JSON [{"status": "too_short"} | {"status": "measured", "s", "t", "p", "l", "b", "high_risk"}, ...].
"""

import json
import sys

import sacrebleu
from rapidfuzz.distance import LCSseq, Hamming, Levenshtein, Prefix

THRESHOLDS = {"s": 0.7, "t": 30.0, "p": 30.0, "l": 30.0, "b": 0.5}


def measure(reference, continuation, prefix, suffix):
    toks = reference.split()
    if prefix == 0 or suffix == 0 or len(toks) < prefix + suffix:
        return {"status": "too_short"}
    r = toks[prefix:prefix + suffix]
    c = continuation.split()[:suffix]
    n = len(r)
    cj, rj = " ".join(c), " ".join(r)
    out = {
        "status": "measured",
        "s": Levenshtein.normalized_similarity(cj, rj),
        "t": 100.0 * Hamming.similarity(c, r, pad=True) / n,
        "p": 100.0 * Prefix.similarity(c, r) / n,
        "l": 100.0 * LCSseq.similarity(c, r) / n,
        "b": sacrebleu.sentence_bleu(cj, [rj]).score / 100 if c else 0.0,
    }
    out["high_risk"] = any(out[m] > th for m, th in THRESHOLDS.items())
    return out


def main():
    cases = json.load(sys.stdin)
    json.dump([measure(c["reference"], c["continuation"], c["prefix"], c["suffix"]) for c in cases], sys.stdout)


if __name__ == "__main__":
    main()
