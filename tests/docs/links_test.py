#!/usr/bin/python3
"""The user-facing Markdown holds together: every relative link in README.md, docs/*.md,
deploy/**/README.md and python/README.md names a file or folder that exists, every #anchor
names a heading of its target as GitHub spells anchors, README.md links every page under
docs/, and README.md stays short (at most 300 lines). Links inside code are not links."""
import glob
import os
import re
import unicodedata
import unittest

SOURCE_DIR = os.path.abspath(os.environ.get(
    "ANISOSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")))
README_MAX_LINES = 300

INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)=\"([^\"]*)\"", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def user_docs():
    """The Markdown files a user reads, relative to SOURCE_DIR."""
    patterns = ["README.md", "docs/*.md", "deploy/**/README.md", "python/README.md"]
    found = set()
    for pattern in patterns:
        for path in glob.glob(os.path.join(SOURCE_DIR, pattern), recursive=True):
            found.add(os.path.relpath(path, SOURCE_DIR))
    return sorted(found)


def prose_lines(text):
    """(line number, line) outside fenced code blocks."""
    fence = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if match:
            marker = match.group(1)
            if fence is None:
                fence = marker
                continue
            if marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
                continue
        if fence is None:
            yield number, line


def github_anchor(heading_text):
    """The id GitHub gives a heading: its rendered text lowercased, every character but
    letters, marks, digits, connector punctuation, spaces and hyphens dropped, spaces
    turned into hyphens."""
    text = CODE_SPAN.sub(lambda m: m.group(2), heading_text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # a link shows its text
    text = re.sub(r"<[^>]+>", "", text)                      # inline HTML shows nothing
    kept = []
    for char in text.lower():
        category = unicodedata.category(char)
        if category[0] in "LMN" or category == "Pc" or char in " -":
            kept.append(char)
    return "".join(kept).replace(" ", "-")


def anchors_of(path):
    """Every anchor a Markdown file defines: headings (repeats get -1, -2, ...) and
    explicit <a id=...> / <a name=...>."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    anchors, seen = set(), {}
    for _, line in prose_lines(text):
        for name in HTML_ANCHOR.findall(line):
            anchors.add(name)
        match = HEADING.match(line)
        if not match:
            continue
        slug = github_anchor(match.group(2))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def links_of(text):
    """(line number, target) of every link outside code."""
    for number, line in prose_lines(text):
        line = CODE_SPAN.sub("", line)
        for target in INLINE_LINK.findall(line) + HTML_LINK.findall(line):
            yield number, target


def is_external(target):
    return re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE) is not None


class LinksTest(unittest.TestCase):
    def test_there_are_documents(self):
        docs = user_docs()
        self.assertIn("README.md", docs)
        self.assertTrue(any(d.startswith("docs/") for d in docs), docs)

    def test_every_relative_link_and_anchor_resolves(self):
        broken = []
        anchor_cache = {}
        for doc in user_docs():
            doc_path = os.path.join(SOURCE_DIR, doc)
            with open(doc_path, encoding="utf-8") as f:
                text = f.read()
            for number, target in links_of(text):
                if not target or is_external(target):
                    continue
                path_part, _, anchor = target.partition("#")
                resolved = (os.path.normpath(os.path.join(os.path.dirname(doc_path), path_part))
                            if path_part else doc_path)
                where = f"{doc}:{number}: ({target})"
                if not resolved.startswith(SOURCE_DIR + os.sep) and resolved != SOURCE_DIR:
                    broken.append(f"{where} leaves the repository")
                    continue
                if not os.path.exists(resolved):
                    broken.append(f"{where} names no file or folder")
                    continue
                if not anchor:
                    continue
                if not resolved.endswith(".md"):
                    broken.append(f"{where} has an anchor into a file that is not Markdown")
                    continue
                if resolved not in anchor_cache:
                    anchor_cache[resolved] = anchors_of(resolved)
                if anchor not in anchor_cache[resolved]:
                    broken.append(f"{where} names no heading of "
                                  f"{os.path.relpath(resolved, SOURCE_DIR)}")
        self.assertEqual(broken, [], "broken links:\n" + "\n".join(broken))

    def test_readme_is_at_most_300_lines(self):
        with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
            lines = f.read().splitlines()
        self.assertLessEqual(len(lines), README_MAX_LINES,
                             f"README.md has {len(lines)} lines; depth belongs in docs/")

    def test_readme_links_every_page_under_docs(self):
        with open(os.path.join(SOURCE_DIR, "README.md"), encoding="utf-8") as f:
            targets = {os.path.normpath(t.partition("#")[0]) for _, t in links_of(f.read())}
        pages = sorted(os.path.relpath(p, SOURCE_DIR)
                       for p in glob.glob(os.path.join(SOURCE_DIR, "docs", "*.md")))
        missing = [p for p in pages if p not in targets]
        self.assertEqual(missing, [], "README.md links none of: " + ", ".join(missing))


class AnchorRulesTest(unittest.TestCase):
    """GitHub's anchor rules on headings this repository has."""

    def test_code_and_punctuation(self):
        self.assertEqual(github_anchor("The CLI: `anisoscope`"), "the-cli-anisoscope")
        self.assertEqual(github_anchor("Workers: `anisoscope-worker`"),
                         "workers-anisoscope-worker")
        self.assertEqual(github_anchor("Limitations (known, on purpose or not yet done)"),
                         "limitations-known-on-purpose-or-not-yet-done")
        self.assertEqual(github_anchor("### `/metrics`".lstrip("# ")), "metrics")
        self.assertEqual(github_anchor("Per block `l` and head `h`"), "per-block-l-and-head-h")

    def test_links_in_code_are_not_links(self):
        text = "see `[x](nowhere.md)`\n```\n[y](nowhere.md)\n```\n[z](here.md)\n"
        self.assertEqual([t for _, t in links_of(text)], ["here.md"])


if __name__ == "__main__":
    unittest.main()
