"""Secrets in a message's text: detect-secrets' plugins, and the patterns beside them for forms they miss.

The plugins are an explicit set, each under the kind a verdict names it by. Their own
patterns run over the text: a regex plugin's ``denylist`` (each match then passes the
plugin's own checks, ``analyze_string``), a high-entropy plugin's quoted strings (its
entropy limit applied here, as detect-secrets' line scan applies it), the keyword plugin's
at each secret-sounding name. Each pattern's work is bounded, whatever the text: the regexes
run over bounded pieces of it, the keyword patterns anchored at a name and within reach of it
(detect-secrets tries them from every place of a line, which a long line crafted for it turns
into minutes). Never through detect-secrets' global settings, its file scanning or its
verification calls (which would reach the services the secrets belong to). Findings whose
value the library's own heuristics call no secret (templated, ``$``-prefixed, sequential,
indirect references) are dropped.

Beside the plugins, patterns for forms they miss: an unquoted AWS secret access key
(``aws_secret_access_key=…``; the plugin wants quotes), unquoted keyword assignments
(``password=…``, a single token that is not a plain word nor code's name for a value), a whole private-key block
(the plugin finds its first line), a whole JWT (the plugin's match stops before the
signature), GitHub's fine-grained tokens and OpenAI's project keys.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from detect_secrets.filters.heuristic import (
    is_indirect_reference,
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.base import BasePlugin, RegexBasedDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
    HighEntropyStringsPlugin,
)
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import (
    CONFIG_DENYLIST_REGEX_TO_GROUP,
    DENYLIST_REGEX,
    PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX,
    QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP,
    KeywordDetector,
)
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.private_key import PrivateKeyDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

from .secret_kinds import SECRET_KINDS as SECRET_KINDS

_AWS_KEY_ID = re.compile(r"(?:A3T[A-Z0-9]|ABIA|ACCA|AKIA|ASIA)[0-9A-Z]{16}")

_PLUGINS: tuple[tuple[str, BasePlugin], ...] = (
    ("private_key", PrivateKeyDetector()),
    ("aws_access_key", AWSKeyDetector()),  # its quoted secret access keys are told apart below
    ("azure_storage_key", AzureStorageKeyDetector()),
    ("github_token", GitHubTokenDetector()),
    ("gitlab_token", GitLabTokenDetector()),
    ("slack_token", SlackDetector()),
    ("stripe_key", StripeDetector()),
    ("openai_key", OpenAIDetector()),
    ("jwt", JwtTokenDetector()),
    ("discord_token", DiscordBotTokenDetector()),
    ("mailchimp_key", MailchimpDetector()),
    ("npm_token", NpmDetector()),
    ("pypi_token", PypiTokenDetector()),
    ("sendgrid_key", SendGridDetector()),
    ("square_oauth_secret", SquareOAuthDetector()),
    ("telegram_token", TelegramBotTokenDetector()),
    ("twilio_key", TwilioKeyDetector()),
    ("basic_auth", BasicAuthDetector()),
    ("secret_keyword", KeywordDetector()),
    ("high_entropy_string", Base64HighEntropyString()),
    ("high_entropy_string", HexHighEntropyString()),
)
"""The plugins asked, each with the kind its findings get. Left out: IBM Cloud, SoftLayer and Cloudant credentials
(their keyword regexes cost more than all the others together, on every message), Artifactory (its short
capital-letter patterns match ordinary words) and public IP addresses (no secret)."""

_BESIDE: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "private_key",
        re.compile(
            r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----"
            r"(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|[\s\S]*\Z)"
        ),
    ),
    (
        "aws_secret_key",
        re.compile(
            r"aws.{0,20}?(?:key|pwd|pw|password|pass|token).{0,20}?(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])",
            re.IGNORECASE,
        ),
    ),
    ("github_token", re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,255}\b")),
    ("openai_key", re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}")),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{8,}")),
)
"""Patterns for the forms the plugins miss (the span as for the plugins' regexes: see :func:`_span`)."""

_FOUND_KINDS = tuple(
    dict.fromkeys(
        ["private_key", "aws_access_key", "aws_secret_key", *(kind for kind, _ in _PLUGINS), *(k for k, _ in _BESIDE)]
    )
)
if _FOUND_KINDS != SECRET_KINDS:  # the shield checks registrations against SECRET_KINDS without loading this module
    raise TypeError(f"secret_kinds.SECRET_KINDS must list the kinds found here, in this order: {_FOUND_KINDS}")

KEYWORD_STEMS = ("key", "pass", "pwd", "secret", "contrase")
"""One of these is in every word of the keyword plugin's denylist, hence in every text its regexes can match:
a text holding none is not asked (most are not)."""
_KEYWORD_GATE = re.compile(DENYLIST_REGEX, re.IGNORECASE)
"""A denylisted word (with the rest of its word): where the keyword plugin's patterns are tried."""
_COMPARED = PRECEDED_BY_EQUAL_COMPARISON_SIGNS_QUOTES_REQUIRED_REGEX
"""The keyword plugin's one pattern whose value stands before the name (``"hunter2" == password``)."""
_NAMED_THEN_VALUE = tuple(
    (regex, group, table is CONFIG_DENYLIST_REGEX_TO_GROUP)
    for table in (QUOTES_REQUIRED_DENYLIST_REGEX_TO_GROUP, CONFIG_DENYLIST_REGEX_TO_GROUP)
    for regex, group in table.items()
    if regex is not _COMPARED
)
"""The keyword plugin's other patterns (each begins with the name), with their value's group and whether the
value may be unquoted (the plugin's patterns for config files)."""
_COMPARISON_BEFORE = re.compile(r"[!=]{2,3}\s*\Z")
_NAME_MAX = 64
"""The longest run of word characters holding a secret-sounding word that is taken for a name: the keyword
patterns are not tried on a longer one (each try at each word in it would read the rest of the run again)."""
_REACH = 400
"""How far from a name the keyword patterns read (a value after it, or a compared value before it), within its
line; with the name, less than the 1,000 characters detect-secrets' indirect-reference check reads."""
_PIECE = 1024
_OVERLAP = 256
"""The other patterns run over pieces of the text this long, consecutive ones sharing ``_OVERLAP`` characters:
some of the plugins' patterns read the rest of a line from every place they start at, which on a long line
crafted for it (``sk-sk-sk-…``) costs the square of its length; a piece bounds each try."""
_PATH = re.compile(r"[A-Za-z_$][\w$]*(?:(?:\.|->|::)[A-Za-z_$][\w$]*)+")
"""An attribute path (``form.password``, ``settings.SECRET_KEY``): what code assigns, no secret."""
_COMPOUND_NAME = re.compile(r"[A-Za-z_]\w*(?:_[A-Za-z0-9]|[a-z0-9][A-Z])\w*")
"""A variable's name made of words (``confirm_password``, ``newApiKey``): with a secret-sounding word in it,
code's name for a secret (``password == confirm_password``), not one."""
_HEX_40 = re.compile(r"[0-9a-f]{40}")
"""A git commit id or a SHA-1 digest: never an AWS secret access key (base64: ``+``, ``/``, capitals)."""
_UNQUOTED_MIN = 6
_SECRET_GROUP_MIN = 8
"""A regex group this long is the secret itself; a shorter one is a prefix (GitHub's ``ghp``), so the match is."""


@dataclass(frozen=True)
class Finding:
    """A secret's place in the text and its kind."""

    start: int
    end: int
    kind: str


def find_secrets(text: str, kinds: frozenset[str]) -> list[Finding]:
    """Every finding of the wanted ``kinds`` in ``text`` (overlapping ones included: the caller picks).

    The regex plugins' patterns run over the text piece by piece (:func:`bounded_matches`), the
    high-entropy plugins' over the whole text (they read each place once), the keyword plugin's
    at each name (:func:`_keyword_findings`).
    """
    found: list[Finding] = []
    for kind, pattern in _BESIDE:
        if kind in kinds:
            # A private key's block runs to its end line, or the text's: read whole (its pattern reads each once).
            matches = pattern.finditer(text) if kind == "private_key" else bounded_matches(pattern, text)
            found += [Finding(*_span(match), kind) for match in matches if _plausible(kind, text, match)]
    for kind, plugin in _PLUGINS:
        if isinstance(plugin, RegexBasedDetector):
            found += _regex_findings(text, kind, plugin, kinds)
        elif isinstance(plugin, HighEntropyStringsPlugin) and kind in kinds:
            found += _entropy_findings(text, kind, plugin)
    if "secret_keyword" in kinds:
        found += _keyword_findings(text)
    return found


def _pieces(size: int) -> Iterator[tuple[int, int]]:
    """The pieces of a text of ``size`` characters that its patterns run over (see ``_PIECE``)."""
    start = 0
    while True:
        end = min(start + _PIECE, size)
        yield start, end
        if end == size:
            return
        start = end - _OVERLAP


def bounded_matches(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The pattern's matches in ``text`` as ``finditer`` finds them (none overlapping), piece by piece.

    A match that ends where its piece does may be cut short (or exist only because the piece ends
    there): it is tried again from where it starts, in the whole text; if it fails there, the piece
    is searched on from the next place.
    """
    after = 0
    for start, end in _pieces(len(text)):
        at = max(start, after)
        while at <= end and (found := pattern.search(text, at, end)) is not None:
            match: re.Match[str] | None = found
            if end < len(text) and found.end() == end:
                match = pattern.match(text, found.start())
            if match is None:
                at = found.start() + 1
                continue
            yield match
            after = at = match.end() if match.end() > match.start() else match.end() + 1


def _plausible(kind: str, text: str, match: re.Match[str]) -> bool:
    """Whether a match of a pattern beside the plugins may be a secret of its kind."""
    return kind != "aws_secret_key" or not _HEX_40.fullmatch(text, *_span(match))


def _span(match: re.Match[str]) -> tuple[int, int]:
    """Where the secret of a match is: its first group long enough to be one, else the whole match."""
    for group in range(1, (match.lastindex or 0) + 1):
        value = match.group(group)
        if value and len(value) >= _SECRET_GROUP_MIN:
            return match.span(group)
    return match.span()


def _regex_findings(text: str, kind: str, plugin: RegexBasedDetector, kinds: frozenset[str]) -> Iterator[Finding]:
    for regex in plugin.denylist:
        for match in bounded_matches(regex, text):
            # The plugin's own checks (a JWT must decode) run on what its regex matched.
            if not any(plugin.analyze_string(match.group())):
                continue
            start, end = _span(match)
            named = kind
            if isinstance(plugin, AWSKeyDetector) and not _AWS_KEY_ID.fullmatch(text, start, end):
                named = "aws_secret_key"
                if _HEX_40.fullmatch(text, start, end):
                    continue
            if named in kinds:
                yield Finding(start, end, named)


def _entropy_findings(text: str, kind: str, plugin: HighEntropyStringsPlugin) -> Iterator[Finding]:
    # A string's Shannon entropy is at most log2 of its length: shorter ones cannot pass the limit.
    shortest = 2**plugin.entropy_limit
    for match in plugin.regex.finditer(text):
        value = match.group(2)
        if len(value) > shortest and plugin.calculate_shannon_entropy(value) > plugin.entropy_limit:
            if not _not_secret(value):
                yield Finding(match.start(2), match.end(2), kind)


def _keyword_findings(text: str) -> Iterator[Finding]:
    """The values the keyword plugin's patterns give to each secret-sounding name, tried at that name.

    detect-secrets tries each pattern over a whole line, and from every place in it: on a long line
    that is the square of its length (or worse) per pattern. Here each name's patterns are anchored
    at it and read at most ``_REACH`` characters of its line on either side; a name within the
    value another name was given (``password=password=…``) is part of that value, and not tried.
    """
    if not _keyworded(text):
        return
    valued = 0
    for gate in _KEYWORD_GATE.finditer(text):
        if gate.start() < valued:
            continue
        head = gate.start()
        while head > 0 and gate.end() - head <= _NAME_MAX and (text[head - 1].isalnum() or text[head - 1] == "_"):
            head -= 1
        if gate.end() - head > _NAME_MAX:
            continue
        low = max(head - _REACH, text.rfind("\n", max(head - _REACH, 0), head) + 1)
        line_end = text.find("\n", gate.end(), gate.end() + _REACH)
        high = line_end if line_end != -1 else min(gate.end() + _REACH, len(text))
        found, valued = _named_values(text, gate.start(), head, high)
        yield from found
        if _COMPARISON_BEFORE.search(text, max(low, head - _NAME_MAX), head):
            yield from _compared_values(text, low, gate.end())


def _named_values(text: str, at: int, head: int, high: int) -> tuple[list[Finding], int]:
    """The values assigned to the name at ``at`` (its word starts at ``head``), quoted or unquoted, and where
    the furthest value ends (secret or not). Whether a value is an indirect reference (``get_key()``) is
    read from the name to the value's end (what follows is another statement's)."""
    found: list[Finding] = []
    valued = at
    for regex, group, unquoted in _NAMED_THEN_VALUE:
        match = regex.match(text, at, high)
        value = match.group(group) if match is not None else None
        if match is None or not value:
            continue
        start = match.start(group)
        if not unquoted:
            valued = max(valued, start + len(value))
            if not _not_secret(value, text[head : match.end()]):
                found.append(Finding(start, start + len(value), "secret_keyword"))
            continue
        # Unquoted, the value runs to the line's end, and prose reads like an assignment ("Secretary: Jane
        # Smith"): its first token is the secret, if that is no plain word, nor code's name for a value.
        word = value.split(maxsplit=1)[0] if value.strip() else ""
        token = word.rstrip(".,;:!?)")
        start += len(value) - len(value.lstrip())
        valued = max(valued, start + len(word))
        # A call or an index (``os.getenv('KEY')``) may run on past the quote that ends the value.
        reach = high if "(" in word or "[" in word else start + len(word)
        if (
            len(token) >= _UNQUOTED_MIN
            and not token.isalpha()
            and not _PATH.fullmatch(token)
            and not (_COMPOUND_NAME.fullmatch(token) and _KEYWORD_GATE.search(token))
            and not _not_secret(token, text[head:reach])
        ):
            found.append(Finding(start, start + len(token), "secret_keyword"))
    return found, valued


def _compared_values(text: str, low: int, end: int) -> Iterator[Finding]:
    """The quoted values compared with the name that ends at ``end`` (``"hunter2" == password``)."""
    for match in _COMPARED.finditer(text, low, end):
        value = match.group(2)
        if match.end() == end and value and not _not_secret(value, match.group()):
            yield Finding(match.start(2), match.end(2), "secret_keyword")


def _keyworded(text: str) -> bool:
    lowered = text.lower()
    return any(stem in lowered for stem in KEYWORD_STEMS)


def _not_secret(value: str, line: str | None = None) -> bool:
    """Whether detect-secrets' heuristics call the value no secret (a template, a variable, a sequence…)."""
    return (
        is_templated_secret(value)
        or is_prefixed_with_dollar_sign(value)
        or is_sequential_string(value)
        or is_potential_uuid(value)
        or (line is not None and is_indirect_reference(line))
    )
