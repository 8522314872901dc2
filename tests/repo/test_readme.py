"""README.md is the user's page: short, no lab-notebook residue (commit hashes, dates, our machines' paths), every
relative link resolving, every role in the roles table. The lab notebook lives in docs/."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
MAX_LINES = 150

FENCE = re.compile(r"^(```|~~~)")
# A commit-hash-like word: 7-12 lowercase hex characters (or a full 40), at least one digit and one letter, standing
# alone. Not part of a GUID or an address (0x0002c903000a1b2c, fe80::2:c903:a:1b2c), a file name, a version or an
# image tag: no word character, ':', '.', '/' or '-' right before it, and none of word, ':', '-' or '.word' after it.
HEX_WORD = re.compile(
    r"(?<![\w:./-])"  # standing alone on the left
    r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])"  # a digit and a letter
    r"(?:[0-9a-f]{40}|[0-9a-f]{7,12})"
    r"(?![\w:-])(?!\.\w)"  # standing alone on the right (a full stop ending a sentence is fine)
)
ISO_DATE = re.compile(r"20\d\d-\d\d-\d\d")
OWN_PATHS = ("/work/", "/var/tmp/", "/root/")
# Inline links [text](target "title") and reference definitions [label]: target.
INLINE_LINK = re.compile(r"\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)", re.M)


def _lines(text):
    return text.splitlines()


def _prose(text):
    """The README without its fenced code blocks."""
    kept, fenced = [], False
    for line in _lines(text):
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            kept.append(line)
    return "\n".join(kept)


def _relative_links(text):
    prose = _prose(text)
    targets = INLINE_LINK.findall(prose) + REFERENCE_LINK.findall(prose)
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.I) and not t.startswith("#")]


def _roles_table_links(text):
    """The roles/<name>/README.md targets linked from table rows."""
    found = set()
    for line in _lines(_prose(text)):
        if line.lstrip().startswith("|"):
            found.update(re.findall(r"\]\(roles/([^/)]+)/README\.md\)", line))
    return found


def hash_like_words(text):
    return HEX_WORD.findall(_prose(text))


def test_readme_is_short():
    count = len(_lines(README.read_text()))
    assert count <= MAX_LINES, f"README.md has {count} lines; at most {MAX_LINES}: move details to docs/"


def test_no_commit_hashes_outside_code_blocks():
    found = hash_like_words(README.read_text())
    assert not found, f"README.md names commit-hash-like words {found}: commits belong in the changelog or git log"


def test_hash_pattern_spares_guids_and_names():
    # Guards the pattern above: GUIDs, addresses, versions and tags are not commit hashes; bare hashes are.
    spared = "0x0002c903000a1b2c fe80::2:c903:a:1b2c cuda12.4 trixie-3f2a9c1d0e4b sha256 deadbeef cafe.txt 1234567"
    assert hash_like_words(spared) == []
    assert hash_like_words("at commit 897c1ec, (4186bfd) and 6a2ebc2.") == ["897c1ec", "4186bfd", "6a2ebc2"]


def test_no_dates():
    found = ISO_DATE.findall(README.read_text())
    assert not found, f"README.md carries dates {found}: dated measurements belong in docs/"


def test_no_paths_of_our_machines():
    text = README.read_text()
    found = [path for path in OWN_PATHS if path in text]
    assert not found, f"README.md names paths of our own machines: {found}"


def test_relative_links_resolve():
    links = _relative_links(README.read_text())
    assert links, "README.md links nothing relative: the link pattern no longer matches"
    missing = [link for link in links if not (ROOT / link.split("#", 1)[0]).exists()]
    assert not missing, f"README.md links files that do not exist: {missing}"


def test_every_role_in_the_roles_table():
    roles = {path.name for path in (ROOT / "roles").iterdir() if path.is_dir()}
    linked = _roles_table_links(README.read_text())
    assert not roles - linked, f"roles missing from README.md's roles table: {sorted(roles - linked)}"
    assert not linked - roles, f"README.md's roles table links roles that do not exist: {sorted(linked - roles)}"
