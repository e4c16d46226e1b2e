"""redact.py: secrets out of a job's output, by the stream (issue 16 §1)."""

from __future__ import annotations

import pytest

from cronwrap import redact
from cronwrap.redact import (CARRY, MAX_PEM, Redactor, compile_pattern, redact_window,
                             secret_values)

SECRETS = {
    "url": (b"connecting to postgresql://app:hunter2-url@db.internal/x failed",
            b"hunter2-url", b"postgresql://app:***@db.internal/x failed"),
    "libpq": (b"dsn host=db user=app password=pw-libpq-9 dbname=x",
              b"pw-libpq-9", b"password=*** dbname=x"),
    "odbc": (b"Server=db;Uid=app;Pwd=odbc-pw-77;Database=x", b"odbc-pw-77", b"Pwd=***;Database=x"),
    "json": (b'{"user": "bob", "password": "json-pw-3"}', b"json-pw-3", b'"password": "***"}'),
    "header": (b"> Authorization: Bearer hdr.token.value-1\n", b"hdr.token.value-1",
               b"Authorization: Bearer ***\n"),
    "bearer": (b"curl: 401 for bearer abcdefghij0123", b"abcdefghij0123", b"for bearer ***"),
    "basic": (b"authorization=Basic dXNlcjpwYXNzd29yZA==", b"dXNlcjpwYXNzd29yZA==",
              b"authorization=Basic ***"),
    "aws": (b"key AKIAIOSFODNN7EXAMPLE denied", b"AKIAIOSFODNN7EXAMPLE", b"key *** denied"),
    "aws-secret": (b"aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                   b"wJalrXUtnFEMI", b"aws_secret_access_key = ***"),
    "github": (b"push with ghp_" + b"a1B2" * 9 + b" refused", b"ghp_a1B2", b"push with *** refused"),
    "github-pat": (b"github_pat_11ABCDEFG0123456789_abcdefghijklmnop ok", b"github_pat_",
                   b"*** ok"),
    "gitlab": (b"token glpat-xxxxxxxxxxxxxxxxxxxx1 ok", b"glpat-", b"token *** ok"),
    "slack": (b"SLACK xoxb-1234567890-0987654321-abcdefghij ok", b"xoxb-", b"SLACK *** ok"),
    "jwt": (b"jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_1 end", b"eyJhbGci",
            b"jwt *** end"),
    "pem": (b"key:\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\nAAAA\n"
            b"-----END OPENSSH PRIVATE KEY-----\ndone\n", b"b3BlbnNzaC1rZXk",
            b"-----BEGIN OPENSSH PRIVATE KEY-----\n***\n-----END OPENSSH PRIVATE KEY-----\ndone"),
}


@pytest.mark.parametrize("name", SECRETS)
def test_each_known_shape_is_hidden_and_the_text_around_it_kept(name):
    text, secret, kept = SECRETS[name]
    out = Redactor().whole(text)
    assert secret not in out and kept in out, out


def test_environment_secrets_and_redact_patterns():
    env = {"DB_PASSWORD": "Tr0ub4dor&3", "GITHUB_TOKEN": "tok-123456", "MY_API_KEY": "k-abcdef",
           "PWD": "/home/app", "SHORT_SECRET": "abc", "HOME": "/home/app-secret"}
    assert set(secret_values(env)) == {"Tr0ub4dor&3", "tok-123456", "k-abcdef"}
    r = Redactor(secret_values(env), [compile_pattern(r"ACME-[0-9]{6}", "--redact")])
    assert r.text("pw Tr0ub4dor&3 tok-123456 order ACME-123456 in /home/app") == \
        "pw *** *** order *** in /home/app"
    with pytest.raises(ValueError, match="--redact: '\\(' is not a regular expression"):
        compile_pattern("(", "--redact")


def test_ordinary_text_is_left_alone():
    text = (b"2026-12-03 01:30:00 INFO copied 1523 rows in 0.8s; password policy unchanged; "
            b"see https://example.com/a:b/c and the token bucket\n")
    assert Redactor().whole(text) == text


@pytest.mark.parametrize("name", ["url", "libpq", "json", "header", "aws", "jwt", "pem"])
def test_a_secret_split_between_two_reads_is_caught_wherever_it_is_split(name):
    """Both places a read can fall: inside the secret as the job wrote it, and inside it where
    the stream stops holding back (CARRY bytes before the end of what it has)."""
    text, secret, kept = SECRETS[name]
    at = 2 * CARRY
    padded = b"x" * (at - 1) + b" " + text + b" " + b"y" * (CARRY + 40)
    cuts = [*range(at - 5, at + len(text) + 5), *range(at + CARRY - 5, at + CARRY + len(text) + 5)]
    for cut in cuts:
        stream = Redactor().stream()
        out = stream.feed(padded[:cut]) + stream.feed(padded[cut:]) + stream.flush()
        assert secret not in out and kept in out, (cut, out[at - 20:at + 200])


def test_a_stream_holds_back_only_its_carry():
    stream = Redactor().stream()
    assert stream.feed(b"a" * 100) == b""
    out = stream.feed(b"b" * (2 * CARRY))
    assert len(out) == 100 + CARRY and stream.flush() == b"b" * CARRY


def test_a_private_key_longer_than_the_wait_is_hidden_to_its_end():
    stream = Redactor().stream()
    body = b"Q" * (MAX_PEM + 10)
    out = stream.feed(b"-----BEGIN PRIVATE KEY-----\n" + body[:5000])
    out += stream.feed(body[5000:]) + stream.feed(b"QQQ\n-----END PRIVATE KEY-----\nafter\n")
    out += stream.flush()
    assert b"QQ" not in out and out.endswith(b"-----END PRIVATE KEY-----\nafter\n")
    unended = Redactor().stream()
    out = unended.feed(b"-----BEGIN PRIVATE KEY-----\n" + body) + unended.flush()
    assert b"QQ" not in out


def test_a_stream_finished_at_a_cut_sees_past_it():
    stream = Redactor().stream()
    assert stream.feed(b"line one\nconnecting to postgresql://app:hunt") == b"line one\n"
    assert stream.finish(b"er2@db/x\nmore") == b"connecting to postgresql://app:***"
    plain = Redactor().stream()
    plain.feed(b"binary \x00\xff without a newline")
    assert plain.finish(b"and more") == b"binary \x00\xff without a newline"


def test_a_window_is_redacted_across_both_of_its_cuts_and_is_exact_without_secrets():
    r = Redactor()
    assert redact_window(r, b"start postgresql://a:pw-hun", b"ter2@h/x ok\nAKIAIOSF",
                         b"ODNN7EXAMPLE") == b"***@h/x ok\n***"
    assert redact_window(r, b"x" * 10, b"plain\x00bytes", b"y" * 10) == b"plain\x00bytes"
    orphan = b"AAAABBBB\nCCCC\n-----END RSA PRIVATE KEY-----\nok\n"
    assert redact_window(r, b"", orphan, b"") == b"***\n-----END RSA PRIVATE KEY-----\nok\n"
    body = b"-----BEGIN PRIVATE KEY-----\nQQQQ\n"
    assert redact_window(r, b"", b"head\n" + body, b"QQQQ\n-----END PRIVATE KEY-----\n") == \
        b"head\n-----BEGIN PRIVATE KEY-----\n***\n"


def test_patterns_are_compiled_once_per_process():
    redact._builtin()
    first = redact._compiled[0][1]
    Redactor().whole(b"postgresql://a:b@c")
    assert redact._compiled[0][1] is first


def test_a_long_window_is_redacted_in_slices_as_a_whole_would_be():
    r = Redactor()
    lines = b"".join(b"line %d token=sek%06d url postgresql://u:pw%d@h/x\n" % (i, i, i)
                     for i in range(3 * redact.SLICE // 40))
    out = redact_window(r, b"", lines, b"")
    assert out == r.whole(lines) and b"sek0" not in out and b":pw" not in out
    key = b"-----BEGIN PRIVATE KEY-----\n" + b"Q" * (redact.SLICE + 100) + \
        b"\n-----END PRIVATE KEY-----\n"
    assert b"QQ" not in redact_window(r, b"", b"a\n" * 1000 + key + b"b\n" * 1000, b"")
    noise = bytes(range(256)).replace(b"\n", b"") * (2 * redact.SLICE // 255)
    assert redact_window(r, b"\n", noise, b"\n") == noise
