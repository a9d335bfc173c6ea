"""The runbook (docs/operations.md) against what it describes: every alarm it names is one the
CDK app creates (and every alarm the app creates is in it), every ``walletlake`` command it shows
is a command of the CLI with the flags it has, and a command in a code block parses as typed.

The whole file is read, every section; a name that drifts from the code fails here, not on call.
"""

from __future__ import annotations

import argparse
import datetime as dt
import re
import shlex
from collections.abc import Callable, Iterator
from pathlib import Path
from unittest import mock

import pytest
from support.cdk_synthesis import Synthesis

from walletlake.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "operations.md"
#: The deployments whose alarms the runbook covers: the default (ECS fleet, Iceberg lake) and the
#: low-load front (API Gateway + Lambda), which has alarms of its own.
VARIANTS = ({}, {"api_front": "lambda"})
#: An alarm named in prose: "alarm `X`", "alarms `X`", "`X` alarm", "**`X`**" in a list of alarms.
_ALARM_NEAR = re.compile(r"alarms? \*{0,2}`([A-Z][A-Za-z0-9]+)`|`([A-Z][A-Za-z0-9]+)`\*{0,2} alarm")
_INLINE = re.compile(r"`(walletlake [^`]+)`")
#: What joins commands on one line: ``&&``, ``||``, ``;``, ``|``.
_SHELL_JOIN = re.compile(r"\s*(?:&&|\|\||;|\|)\s*")
_FENCE = re.compile(r"^ *```[a-z]*\n(.*?)^ *```", re.MULTILINE | re.DOTALL)
#: A value that stands for what the operator fills in: D, YYYY-MM-DD, S3_URI, <x>, {x}, …
_PLACEHOLDER = re.compile(r"^(?:[A-Z][A-Z0-9_]*|YYYY-MM-DD|.*[…<>{}].*|\.\.\.)$")


def runbook() -> str:
    return RUNBOOK.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def template_alarms(synthesize: Callable[..., Synthesis]) -> set[str]:
    """Every alarm the app creates in any variant, by its name (the logical id before ``Alarm``)."""
    names: set[str] = set()
    for context in VARIANTS:
        template = synthesize(**context).template()
        names |= {
            logical_id.split("Alarm")[0]
            for logical_id, resource in template["Resources"].items()
            if resource["Type"] == "AWS::CloudWatch::Alarm"
        }
    return names


def named_alarms(text: str) -> set[str]:
    """The alarms the runbook names (:data:`_ALARM_NEAR`).

    Examples
    --------
    >>> sorted(named_alarms("the alarm `Aa`; **`Bb`** or **`Cc`** alarms; `Dd` alarm; metric `Ee`"))
    ['Aa', 'Cc', 'Dd']
    """
    return {first or second for first, second in _ALARM_NEAR.findall(text)}


def alarm_lists(text: str) -> set[str]:
    """Names in the runbook's lists of alarms: every name of a sentence that starts "Alarms:", and
    bold names (``- **`X`**``) in the paragraphs that announce alarms.

    Examples
    --------
    >>> sorted(alarm_lists("Alarms: `Aa` (5xx), `Bb` > 0 for 10 minutes. Metric `Cc`."))
    ['Aa', 'Bb']
    """
    found: set[str] = set()
    for sentence in re.findall(r"\bAlarms: (.*?)\.(?:\s|$)", text, re.DOTALL):
        found |= set(re.findall(r"`([A-Z][A-Za-z0-9]+)`", sentence))
    for block in re.split(r"\n\s*\n", text):
        if "Alarms" in block or "alarms and what to do" in block.lower():
            found |= set(re.findall(r"\*\*`([A-Z][A-Za-z0-9]+)`\*\*", block))
    return found


def test_every_alarm_the_runbook_names_exists_and_every_alarm_is_in_the_runbook(
    template_alarms: set[str],
) -> None:
    # GIVEN the runbook's alarm names and the synthesized alarms
    text = runbook()
    named = named_alarms(text) | alarm_lists(text)
    # THEN each name is an alarm the app creates
    assert sorted(named - template_alarms) == []
    # AND each alarm the app creates is named in the runbook (someone on call looks it up there)
    mentioned = set(re.findall(r"`([A-Z][A-Za-z0-9]+)`", text))
    assert sorted(template_alarms - mentioned) == [], ", ".join(sorted(template_alarms - mentioned))


def commands(text: str) -> Iterator[tuple[str, bool]]:
    """Every ``walletlake …`` the runbook shows: (the command, typed in a code block: parse it whole)."""
    for block in _FENCE.findall(text):
        for typed in block.splitlines():
            for command in _SHELL_JOIN.split(typed.split("  #", 1)[0]):
                if command.strip().startswith("walletlake "):
                    yield command.strip(), True
    for inline in _INLINE.findall(text):
        for command in _SHELL_JOIN.split(inline):
            words = command.split()
            if words[:1] == ["walletlake"] and not any(word.endswith(":") for word in words[:3]):
                yield " ".join(words), False  # (a word ending in ":" is what a command prints)


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices) if actions else {}


def resolve(words: list[str]) -> tuple[argparse.ArgumentParser, list[str], list[str]]:
    """The deepest parser the words name, the words that named it, and the rest."""
    parser, path = build_parser(), ["walletlake"]
    rest = words[1:]
    while rest and rest[0] in subcommands(parser):
        parser = subcommands(parser)[rest[0]]
        path.append(rest.pop(0))
    return parser, path, rest


def sample(action: argparse.Action) -> str:
    """A value the option takes, for a placeholder the operator fills in."""
    if action.choices:
        return str(next(iter(action.choices)))
    kind = getattr(action.type, "__name__", "")
    if kind in ("int", "_positive_int") or action.type is int:
        return "1"
    if kind in ("float", "_positive_float") or action.type is float:
        return "1.0"
    if "day" in kind or "date" in kind:
        return dt.date(2026, 11, 20).isoformat()
    return "s3://bucket/prefix/"


def filled(parser: argparse.ArgumentParser, rest: list[str]) -> list[str]:
    """``rest`` with each placeholder value replaced by a value its option takes."""
    options = {string: action for action in parser._actions for string in action.option_strings}
    out: list[str] = []
    for index, word in enumerate(rest):
        before = options.get(rest[index - 1]) if index else None
        if before is not None and before.nargs != 0 and _PLACEHOLDER.match(word):
            out.append(sample(before))
        else:
            out.append(word)
    return out


def test_every_walletlake_command_in_the_runbook_is_the_clis() -> None:
    problems: list[str] = []
    for command, whole in commands(runbook()):
        words = shlex.split(command.replace("…", "..."))
        parser, path, rest = resolve(words)
        if subcommands(parser):
            problems.append(f"{command}: `{' '.join(path)}` needs one of {sorted(subcommands(parser))}")
            continue
        known = {string for action in parser._actions for string in action.option_strings}
        unknown = [
            word.split("=", 1)[0]
            for word in rest
            if word.startswith("--") and word.split("=", 1)[0] not in known
        ]
        if unknown:
            problems.append(f"{command}: {' '.join(path)} has no {', '.join(unknown)}")
            continue
        if whole:
            try:
                with mock.patch("sys.stderr"):
                    build_parser().parse_args([*path[1:], *filled(parser, rest)])
            except SystemExit:
                problems.append(f"{command}: does not parse")
    assert problems == []


def test_the_runbook_shows_commands_at_all() -> None:
    # a guard on the reader above: the file is the runbook and its commands are found
    shown = list(commands(runbook()))
    assert sum(1 for _, whole in shown if whole) >= 12
    assert any(command.startswith("walletlake lake register") for command, _ in shown)
