"""The files of a local Docker build context, as Docker decides them from its `.dockerignore`.

`infra/build_context.py` packs and hashes each image's context from exactly the files Docker
would send, so the exclusions live in one place per folder, the `.dockerignore` that Docker
reads, and are applied here with Docker's rules
(moby/patternmatcher): patterns are relative to the context root; `*` and `?` stay within one
path segment and `**` spans any number; a pattern that matches a folder excludes everything
under it; `!` re-includes; the last matching pattern wins. Character classes (`[...]`) are
refused rather than approximated.
"""

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

IGNORE_FILE = ".dockerignore"


@dataclass(frozen=True)
class Pattern:
    text: str
    regex: re.Pattern[str]
    exclusion: bool  # a `!pattern`: re-includes what it matches

    def matches(self, relative: str) -> bool:
        """Whether the path or one of its parent folders matches (Docker's rule)."""
        parts = relative.split("/")
        return any(self.regex.fullmatch("/".join(parts[:i])) for i in range(len(parts), 0, -1))


def _regex(pattern: str, source: Path) -> re.Pattern[str]:
    out, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**", i):
            i += 2
            if pattern.startswith("/", i):
                i += 1
            out += ".*" if i == len(pattern) else "(.*/)?"
            continue
        ch = pattern[i]
        if ch in "[]":
            raise ValueError(
                f"{source}: pattern {pattern!r}: character classes are not supported here; "
                "use *, ?, ** or list the names"
            )
        if ch == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        else:
            out += {"*": "[^/]*", "?": "[^/]"}.get(ch, re.escape(ch))
        i += 1
    return re.compile(out)


def read_patterns(context: Path) -> list[Pattern]:
    """The patterns of `<context>/.dockerignore` (none when it does not exist)."""
    path = Path(context) / IGNORE_FILE
    if not path.is_file():
        return []
    patterns = []
    for line in path.read_text().splitlines():
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        exclusion = text.startswith("!")
        cleaned = str(PurePosixPath(text.removeprefix("!").strip())).lstrip("/") or "."
        patterns.append(Pattern(text, _regex(cleaned, path), exclusion))
    return patterns


def is_ignored(relative: str, patterns: list[Pattern]) -> bool:
    ignored = False
    for pattern in patterns:
        if pattern.matches(relative):
            ignored = not pattern.exclusion
    return ignored


def context_files(context: Path) -> list[Path]:
    """Every file under `context` that Docker would send, sorted by relative path."""
    context = Path(context)
    patterns = read_patterns(context)
    files = [
        path
        for path in context.rglob("*")
        if path.is_file() and not is_ignored(path.relative_to(context).as_posix(), patterns)
    ]
    return sorted(files, key=lambda p: p.relative_to(context).as_posix())
