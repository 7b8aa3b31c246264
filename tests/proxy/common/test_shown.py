"""What the bridge shows of a text it did not write (proxy/common/shown.py, issue 40 defects 8 and
9): a URI without its userinfo, query and fragment, whatever its scheme; a text cut to a bound that
says it was cut; a principal and an id by their first 12 hex digits."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from config.settings import IdentitySettings
from proxy.auth.principal import LOCAL_PRINCIPAL, principal_of
from proxy.common.shown import bounded, shown_id, shown_principal, shown_uri


@pytest.mark.parametrize(
    ("uri", "shown"),
    [
        ("secret://alice:hunter2@vault", "secret://vault"),
        ("secret://alice:hunter2@vault/db?token=x#top", "secret://vault/db"),
        ("http://user:pw@127.0.0.1:8931/mcp?token=x", "http://127.0.0.1:8931/mcp"),
        ("https://u:p@[::1]:8443/sse", "https://[::1]:8443/sse"),
        ("postgres://app:s3cr3t@db.internal:5432/orders", "postgres://db.internal:5432/orders"),
        ("s3://AKIA:key@bucket/a/b", "s3://bucket/a/b"),
        ("ftp://anonymous@ftp.example/pub", "ftp://ftp.example/pub"),
        ("redis://:only-a-password@cache:6379/0", "redis://cache:6379/0"),
        ("x://a@b@c/d", "x://c/d"),  # the host is after the last "@"
        ("//alice:pw@host/p", "//host/p"),  # a network-path reference
        ("db://t?q=1#x", "db://t"),
        ("http://host?x=a@b", "http://host"),  # an "@" in the query is not a userinfo
        ("file:///etc/hosts", "file:///etc/hosts"),
        ("mailto:alice@example.com", "mailto:alice@example.com"),  # no authority, no userinfo
        ("urn:isbn:0451450523", "urn:isbn:0451450523"),
        ("http://[::1", "http://[::1"),  # not a valid URL: still shown without failing
        ("tool-name", "tool-name"),
        ("", ""),
    ],
)
def test_a_uri_loses_its_userinfo_query_and_fragment(uri: str, shown: str) -> None:
    assert shown_uri(uri) == shown


_SCHEMES = st.from_regex(r"[a-z][a-z0-9+.\-]{0,10}", fullmatch=True)
_NOT_DELIMITERS = st.text(alphabet=st.characters(blacklist_characters="/?#@"), min_size=1)


@given(_SCHEMES, _NOT_DELIMITERS, _NOT_DELIMITERS, st.text())
def test_no_userinfo_survives_whatever_the_uri(
    scheme: str, userinfo: str, host: str, rest: str
) -> None:
    """Any scheme, userinfo and host, anything after them: the userinfo is gone, and the query and
    fragment with it."""
    path = re.split("[?#]", rest)[0]
    assert shown_uri(f"{scheme}://{userinfo}@{host}/{rest}") == f"{scheme}://{host}/{path}"


def test_a_text_within_its_bound_is_kept_and_a_longer_one_says_it_was_cut() -> None:
    assert bounded("a" * 200, 200) == "a" * 200
    assert bounded("a" * 201, 200) == "a" * 200 + "...[cut, 201 characters]"
    assert bounded("a" * 10, 5, length=900_000) == "aaaaa...[cut, 900000 characters]"


def test_a_cut_never_splits_a_character_or_an_escape() -> None:
    """Characters of 2 and 4 UTF-8 bytes (the latter a surrogate pair in JSON), and characters
    that JSON escapes: the cut head is whole characters, and its JSON decodes to it."""
    for text in ("é" * 300, "😀" * 300, '\n"\\\x00' * 100, "a😀é\u2028" * 100):
        cut = bounded(text, 201)
        assert cut == text[:201] + f"...[cut, {len(text)} characters]"
        assert cut.encode("utf-8").decode("utf-8") == cut
        assert json.loads(json.dumps(cut)) == cut == json.loads(json.dumps(cut, ensure_ascii=False))


def test_a_principal_and_an_id_are_shown_by_12_hex_digits() -> None:
    """The log, the access line and the status page show a caller's digest (32 hex digits) and a
    held call's or a task's id (16 bytes) by their first 12 hex digits; `local` stays whole."""
    digest = principal_of({"authorization": "Bearer t"}, IdentitySettings())
    assert (len(digest), shown_principal(digest)) == (32, digest[:12])
    assert shown_principal(LOCAL_PRINCIPAL) == "local"
    assert shown_id(bytes(range(16))) == "000102030405"
