#!/usr/bin/env python3
"""The repository explains itself: no tracked file points at contract pages outside the repository, and
every docs/ page (and quoted section) that a file cites exists.

A file fails when it contains
  - a section sign (the old citations were "<page>.md" plus a section number);
  - a numbered decision reference: a capital D and digits standing alone as a word; hex numbers, "D2H"
    and identifiers with such a part do not match;
  - a path into the "shared" directory beside the checkout;
  - "<page>.md" for a page name of the old contract set (decisions, master, python-api, c-api, errors,
    transfer-engine, metadata, p2p-store, seed-requirements) not written as "docs/<page>.md";
and a citation "docs/<page>.md" fails when that page is missing, "docs/<page>.md, "<Title>"" (comma
optional) when no heading or bold lead-in of the page starts with <Title>.

The limits the pages state stay true (docs/testing.md, "Checking the docs' references"): a line of docs/*.md or
README.md that says something is missing (LIMIT_WORDS, outside backticks) fails unless it or the line before
carries "<!-- limit: <name> -->"; a marked <name> that a test source (tests/**/*.c, tests/**/*.py) mentions fails
unless the marker says "tested" (a test asserts the limit itself), and a "tested" one that no test mentions fails.

Usage: check_doc_refs.py <repository root>. Exit 0 when clean, 1 with one line per finding, 77 (skipped)
when the root is not a git checkout."""
import os
import re
import subprocess
import sys

# Files being rewritten elsewhere, exempt until they cite docs/ (none now: the check covers every file).
ALLOW_FOR_NOW = set()
# Data, not text: fuzz corpora are byte strings a fuzzer may grow in any direction.
DATA_DIRS = ("tests/fuzz/corpus/",)

PAGES = r"(?:decisions|master|python-api|c-api|errors|transfer-engine|metadata|p2p-store|seed-requirements)"
RULES = [
    ("section sign (cite docs/<page>.md, \"<Section>\")", re.compile("\u00a7")),
    ("numbered decision reference (state the decision in docs/)", re.compile(r"(?<![\w$])D[0-9]+(?![\w$])")),
    # ("%s" keeps the directory's name out of the pattern's text, so that this file passes its own check)
    ("path outside the repository", re.compile(r"\.\./%s\b|/%s/|\b%s/spec/" % (("shared",) * 3))),
]
# A page name (not part of a longer name such as store_errors.md) with the path written before it.
PAGE_REF = re.compile(r"(?<![\w.-])((?:[\w.-]+/)*)" + PAGES + r"\.md\b")
ROOT = "."
# What a statement that something is missing says; such a line needs a limit marker.
LIMIT_WORDS = re.compile(r"not implemented|not done|not supported|unsupported|not yet|is a no-op|accepted and ignored"
                         r"|accepted with a warning", re.I)
LIMIT_MARK = re.compile(r"<!--\s*limit:\s*([A-Za-z_][\w.]*)(\s+tested)?\s*-->")
CODE_SPAN = re.compile(r"`[^`]*`")  # may run over a line break
CITATION = re.compile(r"\bdocs/([A-Za-z0-9_.-]+\.md)(?:,?\s*\"([^\"\n]+)\")?")


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z"], check=True, capture_output=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]


def read_text(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None  # listed by git but deleted in the work tree
    if b"\0" in data:
        return None  # binary
    return data.decode("utf-8", "replace")


def heads_of(text):
    """Headings and bold lead-ins of a docs page: what a quoted section title may name."""
    heads = [m.group(1).strip() for m in re.finditer(r"^#+\s+(.*)$", text, re.M)]
    heads += [m.group(1).strip() for m in re.finditer(r"\*\*([^*\n]+)\*\*", text)]
    return heads


def findings_in(rel, text, pages):
    out = []
    for no, line in enumerate(text.splitlines(), 1):
        for what, rx in RULES:
            if rx.search(line):
                out.append("%s:%d: %s: %s" % (rel, no, what, line.strip()[:120]))
        for m in PAGE_REF.finditer(line):
            if m.group(1) != "docs/" and not m.group(1).endswith("/docs/"):
                out.append("%s:%d: contract page outside docs/ (cite docs/<page>.md): %s" % (rel, no, line.strip()[:120]))
                break
        for m in CITATION.finditer(line):
            page, title = m.group(1), m.group(2)
            if page not in pages:
                body = read_text(os.path.join(ROOT, "docs", page))
                pages[page] = None if body is None else heads_of(body)
            if pages[page] is None:
                out.append("%s:%d: cites docs/%s, which does not exist" % (rel, no, page))
            elif title and not any(h.startswith(title) for h in pages[page]):
                out.append("%s:%d: docs/%s has no section \"%s\"" % (rel, no, page, title))
    return out


def is_doc_page(rel):
    return rel == "README.md" or (rel.startswith("docs/") and rel.endswith(".md"))


def is_test_source(rel):
    return rel.startswith("tests/") and rel.endswith((".c", ".py"))


def limit_findings(rel, text, test_text):
    """A docs page's limits: every line that says something is missing is marked, and a marked name is
    mentioned by a test only when the marker says the test checks the limit."""
    # Code is not a statement: fenced blocks and quoted names, log lines and status codes are blanked, line
    # breaks kept so that line numbers still match.
    fence, lines = False, []
    for line in text.splitlines():
        is_fence = line.lstrip().startswith("```")
        lines.append("" if fence or is_fence else line)
        fence ^= is_fence
    prose = CODE_SPAN.sub(lambda m: "\n" * m.group(0).count("\n"), "\n".join(lines)).split("\n")
    out, before = [], ""
    for no, (raw, line) in enumerate(zip(text.splitlines(), prose), 1):
        marks = LIMIT_MARK.findall(line)
        if LIMIT_WORDS.search(LIMIT_MARK.sub("", line)) and not marks and not LIMIT_MARK.search(before):
            out.append("%s:%d: says something is missing without <!-- limit: <name> -->: %s" % (rel, no, raw.strip()[:120]))
        for name, tested in marks:
            named = re.search(r"(?<!\w)%s(?!\w)" % re.escape(name), test_text)
            if named and not tested:
                out.append("%s:%d: limit \"%s\" is exercised by a test: fix the page, or mark it \"%s tested\" if "
                           "the test asserts the limit" % (rel, no, name, name))
            elif tested and not named:
                out.append("%s:%d: limit \"%s\" is marked tested, but no test mentions it" % (rel, no, name))
        before = line
    return out


def main():
    global ROOT
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    ROOT = sys.argv[1]
    files = tracked_files(ROOT)
    if files is None:
        print("SKIP: %s is not a git checkout" % ROOT)
        return 77
    pages, findings = {}, []
    test_text = "\n".join(read_text(os.path.join(ROOT, rel)) or "" for rel in files if is_test_source(rel))
    for rel in sorted(files):
        if rel.startswith(DATA_DIRS):
            continue
        text = read_text(os.path.join(ROOT, rel))
        if text is None:
            continue
        found = findings_in(rel, text, pages)
        if is_doc_page(rel):
            found += limit_findings(rel, text, test_text)
        if rel not in ALLOW_FOR_NOW:
            findings += found
        elif not found:
            print("note: %s is clean now; take it off ALLOW_FOR_NOW" % rel)
    for f in findings:
        print(f)
    print("%d finding(s) in %d tracked files (%d allowed for now)" % (len(findings), len(files), len(ALLOW_FOR_NOW)))
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
