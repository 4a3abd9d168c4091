"""The study data as every peer reads it: the rows of a (gzipped) CSV, and SPEC §5's clean(x), the
text every metric compares. Standard library only, so the predecessor's environment and the bench
scripts import it too."""

import csv
import gzip
import io
import re

# An output can be a whole model's ramble: far beyond the csv module's 128 KiB field limit.
csv.field_size_limit(1 << 30)

_COMMENT = re.compile(r"(?<![\"'])#.*")


def clean(x):
    """Comment lines and inline comments (a `#` not right after a quote) dropped, trailing
    whitespace and blank lines too."""
    out = []
    for line in str(x).splitlines():
        if line.strip().startswith("#"):
            continue
        line = _COMMENT.sub("", line).rstrip()
        if line:
            out.append(line)
    return "\n".join(out)


def read_csv(path):
    """Every row of a CSV file, gzipped or not, as dicts."""
    with open(path, "rb") as raw:
        head = raw.read(2)
    opener = gzip.open if head == b"\x1f\x8b" else open
    with opener(path, "rb") as f:
        return list(csv.DictReader(io.TextIOWrapper(f, encoding="utf-8", newline="")))
