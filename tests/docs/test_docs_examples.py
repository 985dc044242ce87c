"""The commands the docs present as runnable are run, and the output they show is compared with
what the commands print today.

A page marks a fenced block for this test with a comment line right above it:

- `<!-- azdl:check -->`: the block's commands run, in page order, with bash (`set -euo
  pipefail`) from the repository root, offline. In a `console` block, `$ ` lines (with their
  `\\` continuations) are the commands and every other line is the output they print.
- `<!-- azdl:check expect="TEXT" -->`: the same, and each TEXT must be a line of the output.
- `<!-- azdl:check exit="N" -->` on a `console` block: each `$ ` command must end with exit code
  N (bad input the page shows being refused), its output compared as above.
- `<!-- azdl:output -->`: the output of the page's previous checked block.

Shown output is compared line by line, in order (other lines may come between): `…` stands for
any text. Every page's blocks share one scratch folder, which stands in for `/tmp/` in the
commands and the output; the README's stack `mine` is created as a fresh stack file and
removed; Azurite gets a free port instead of 10000.
"""

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "docs" / "hooks"))
from docs_hooks import missing_lines  # noqa: E402  (one rule for `…`, the docs build's)

PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^( *)<!-- azdl:(check|output)((?: (?:expect|exit)=\"[^\"]*\")*) -->$")
# Pages and how many checked blocks each must keep: a marker lost in an edit fails here.
CHECKED = {"README.md": 2, "docs/configuration.md": 1, "docs/data.md": 3, "docs/jobs.md": 1,
           "docs/review.md": 1,
           "docs/own-code.md": 3, "docs/torchrun.md": 2, "docs/troubleshooting.md": 1}  # fmt: skip


@dataclass
class Example:
    page: str
    line: int
    lang: str
    commands: str
    expected: list[str] = field(default_factory=list)
    exit: int = 0  # each command's exit code, when not 0 (console blocks)
    each: list[str] = field(default_factory=list)  # a console block's commands, one by one


def _fence(lines: list[str], start: int, indent: str) -> tuple[str, list[str], int]:
    """The fenced block opening at lines[start]: (language, dedented body, index after it)."""
    opening = lines[start]
    if not opening.startswith(indent + "```"):
        raise ValueError(f"line {start + 1}: a check marker must be right above a ``` block")
    end = start + 1
    while not lines[end].startswith(indent + "```"):
        end += 1
    body = textwrap.dedent("\n".join(lines[start + 1 : end])).splitlines()
    return opening.strip()[3:], body, end + 1


def _console(body: list[str]) -> tuple[str, list[str]]:
    commands, output = _console_commands(body)
    return "\n".join(commands), output


def _console_commands(body: list[str]) -> tuple[list[str], list[str]]:
    """(each command with its continuation lines, the output lines)."""
    commands, output, continued = [], [], False
    for line in body:
        if continued:
            commands[-1] += "\n" + line
        elif line.startswith("$ "):
            commands.append(line[2:])
        else:
            output.append(line)
        continued = (line.startswith("$ ") or continued) and line.endswith("\\")
    return commands, output


def examples(page: str, text: str) -> list[Example]:
    found: list[Example] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = MARKER.match(lines[i])
        if not match:
            i += 1
            continue
        indent, kind, attrs = match.groups()
        lang, body, after = _fence(lines, i + 1, indent)
        if kind == "output":
            if not found:
                raise ValueError(f"{page}:{i + 1}: an output block before any checked block")
            found[-1].expected += body
        elif lang == "console":
            each, output = _console_commands(body)
            found.append(Example(page, i + 1, lang, "\n".join(each), output, each=each))
        else:
            found.append(Example(page, i + 1, lang, "\n".join(body)))
        if kind == "check":
            found[-1].expected += re.findall(r'expect="([^"]*)"', attrs)
            if code := re.search(r'exit="(\d+)"', attrs):
                if lang != "console":
                    raise ValueError(f"{page}:{i + 1}: exit= goes on a console block")
                found[-1].exit = int(code[1])
        i = after
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Scratch:
    """What a page's examples share: a folder for /tmp/, a stack name, an Azurite port."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.stack = f"docscheck{uuid.uuid4().hex[:8]}"
        self.port = _free_port()
        self.groups: list[int] = []

    def localise(self, text: str) -> str:
        from azdl.azurite import Azurite

        text = text.replace("/tmp/", f"{self.folder}/")
        text = re.sub(r"\bmine\b", self.stack, text)
        text = text.replace("UseDevelopmentStorage=true", Azurite(self.port).connection_string())
        return text.replace(
            "azurite-blob ", f"azurite-blob --blobHost 127.0.0.1 --blobPort {self.port} "
        )

    def run(self, example: Example) -> str:
        if not example.exit:
            return self.run_script(example, "set -euo pipefail\n" + example.commands, 0)
        return "".join(self.run_script(example, command, example.exit) for command in example.each)

    def run_script(self, example: Example, script: str, expected: int) -> str:
        env = os.environ | {
            "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ['PATH']}",
            "PYTHONPATH": str(ROOT),
            "EDITOR": "true",
            "COLUMNS": "100",
        }
        for name in ("AZURE_STORAGE_CONNECTION_STRING", "AZDL_PRICES"):
            env.pop(name, None)
        # Output to a file, not a pipe: a process the block leaves running in the background
        # (Azurite) keeps a pipe open, and reading it would wait for that process.
        log = self.folder / f".example-{len(self.groups)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen(
                ["bash", "-c", self.localise(script)],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            self.groups.append(proc.pid)
            code = proc.wait(timeout=600)
        output = log.read_text()
        assert code == expected, (
            f"{example.page}:{example.line}: exit {code}, not {expected}\n{output[-4000:]}"
        )
        return output

    def close(self) -> None:
        for group in self.groups:  # background processes a block started (Azurite)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGTERM)
        (ROOT / "stacks" / f"Pulumi.{self.stack}.yaml").unlink(missing_ok=True)


def check_page(page: str, text: str, folder: Path) -> int:
    scratch = Scratch(folder)
    try:
        found = examples(page, text)
        for example in found:
            output = scratch.run(example)
            expected = [scratch.localise(line) for line in example.expected]
            missing = missing_lines(expected, output)
            assert not missing, (
                f"{example.page}:{example.line}: the docs show lines the command does not "
                f"print: {missing}\n--- it printed:\n{output[-4000:]}"
            )
        return len(found)
    finally:
        scratch.close()


@pytest.mark.slow  # the commands take seconds (rendering, converting, Azurite)
@pytest.mark.parametrize("page", sorted(CHECKED))
def test_the_commands_a_page_shows_run_and_print_what_it_shows(page, tmp_path):
    checked = check_page(page, (ROOT / page).read_text(), tmp_path)
    assert checked >= CHECKED[page], f"{page}: {checked} checked blocks, expected {CHECKED[page]}"


def test_only_the_listed_pages_have_checked_blocks():
    for page in PAGES:
        if page not in CHECKED:
            assert examples(page, (ROOT / page).read_text()) == [], page


@pytest.mark.slow  # the commands take seconds (rendering, converting, Azurite)
def test_a_wrong_output_in_a_page_fails(tmp_path):
    """A planted wrong line in a real page's checked output block must fail the check."""
    text = (ROOT / "docs" / "own-code.md").read_text()
    right = "  azdl.script: train_segmentation.py"
    assert right in text
    with pytest.raises(AssertionError, match=r"does not print.*azdl\.script: train_wrong\.py"):
        check_page("own-code.md", text.replace(right, "  azdl.script: train_wrong.py"), tmp_path)


def test_a_failing_command_fails(tmp_path):
    text = "<!-- azdl:check -->\n```bash\n.venv/bin/azdl data prepare --input /tmp/none\n```\n"
    with pytest.raises(AssertionError, match="exit 2"):
        check_page("x.md", text, tmp_path)


def test_a_refusal_the_page_shows_must_be_one(tmp_path):
    """exit="2": a command that succeeds, or fails otherwise, fails the check."""
    shown = '<!-- azdl:check exit="2" -->\n```console\n$ {}\n```\n'
    check_page("x.md", shown.format(".venv/bin/azdl plan nosuch"), tmp_path)
    with pytest.raises(AssertionError, match="exit 0, not 2"):
        check_page("x.md", shown.format(".venv/bin/azdl --version"), tmp_path)


def test_comparison_rules():
    actual = "a\nwrote 6 shards (0.6 MB) in 3.1 s\nz\n"
    assert missing_lines(["wrote … shards (0.6 MB) in … s", "z"], actual) == []
    assert missing_lines(["z", "a"], actual) == ["a"]  # order counts
    assert missing_lines(["wrote 7 shards …"], actual) == ["wrote 7 shards …"]
    assert _console(["$ azdl x \\", "    --y 1", "out 1"]) == ("azdl x \\\n    --y 1", ["out 1"])
    assert _console_commands(["$ a \\", "  b", "out", "$ c"]) == (["a \\\n  b", "c"], ["out"])
