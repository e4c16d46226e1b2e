"""redact.py: secrets out of a job's output, by the stream (issue 16 §1)."""

from __future__ import annotations

import pytest

from cronwrap.redact import redactor as redact
from cronwrap.redact.redactor import (CARRY, MAX_PEM, Redactor, compile_pattern, redact_window,
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
    for cut, out in split_everywhere(text):
        assert secret not in out and kept in out, (cut, out[2 * CARRY - 20:2 * CARRY + 200])


def split_everywhere(text: bytes):
    """``text`` in a stream, split into two reads at each place a read can cut it."""
    at = 2 * CARRY
    padded = b"x" * (at - 1) + b" " + text + b" " + b"y" * (CARRY + 40)
    cuts = [*range(at - 5, at + len(text) + 5), *range(at + CARRY - 5, at + CARRY + len(text) + 5)]
    for cut in cuts:
        stream = Redactor().stream()
        yield cut, stream.feed(padded[:cut]) + stream.feed(padded[cut:]) + stream.flush()


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


# -- issue 20 §5: what the documentation promises to hide, whole ----------------------------

SHAPES = {  # the job prints: (text, what must not be left of the secret, what is kept)
    "url-slash": (b"postgresql://app:pa/ss99word@db/x", (b"pa/ss", b"ss99word"),
                  b"postgresql://app:***@db/x"),
    "url-at": (b"postgresql://app:pa@ss88word@db/x", (b"ss88word",), b"postgresql://app:***@db/x"),
    "url-user-at": (b"https://me@example.com:pw-in-url1@host/x", (b"pw-in-url1",),
                    b"https://me@example.com:***@host/x"),
    "json": (b'{"password": "correct horse battery"}', (b"correct", b"horse", b"battery"),
             b'{"password": "***"}'),
    "yaml": (b'password: "two words"', (b"two", b"words"), b'password: "***"'),
    "escaped": (b'{"secret": "a\\"quoted\\" one", "n": 1}', (b"quoted", b"one"),
                b'{"secret": "***", "n": 1}'),
    "single": (b"api_key = 'k e y'", (b"k e y",), b"api_key = '***'"),
    "perl": (b"password => 'hunter3xyz'", (b"hunter3xyz",), b"password => '***'"),
    "go": (b"token := abc-tok-1", (b"abc-tok-1",), b"token := ***"),
    "mysql-long": (b"mysql --password hunter2xyz", (b"hunter2xyz",), b"mysql --password ***"),
    "long-equals": (b"psql --password=hunter4xyz -h db", (b"hunter4xyz",),
                    b"--password=*** -h db"),
    "pass-option": (b"redis-cli --pass hunter7xyz ping", (b"hunter7xyz",),
                    b"redis-cli --pass *** ping"),
    "mysql-p": (b"mysql -phunter5xyz", (b"hunter5xyz",), b"mysql -p***"),
    "mysqldump-p": (b"+ /usr/bin/mysqldump -h db -u root '-pse;cret9' app > x.sql",
                    (b"se;cret9",), b"mysqldump -h db -u root '-p***' app > x.sql"),
    "mysql-p-quoted": (b"mariadb -u app -p'two words' db", (b"two words",),
                       b"mariadb -u app -p'***' db"),
    "curl-u": (b"curl -u admin:hunter6xyz https://x", (b"hunter6xyz",),
               b"curl -u admin:*** https://x"),
    "curl-user": (b"curl -sS --user-agent 'a b' --user=admin:hunter8xyz https://x",
                  (b"hunter8xyz",), b"--user=admin:*** https://x"),
    "curl-attached": (b"curl -fsS https://x -uadmin:hunter9xyz", (b"hunter9xyz",),
                      b"-uadmin:***"),
}


@pytest.mark.parametrize("name", SHAPES)
def test_each_shape_the_docs_promise_to_hide_is_hidden_whole(name):
    text, parts, kept = SHAPES[name]
    out = Redactor().whole(b"before " + text + b" after\n")
    assert not [p for p in parts if p in out] and kept in out, out
    assert out.startswith(b"before ") and out.endswith(b" after\n")


@pytest.mark.parametrize("name", ["url-slash", "json", "mysql-long", "mysqldump-p", "curl-u"])
def test_a_shape_split_between_two_reads_is_still_hidden_whole(name):
    text, parts, kept = SHAPES[name]
    for cut, out in split_everywhere(text):
        assert not [p for p in parts if p in out] and kept in out, (cut, out[2 * CARRY - 20:])


def test_command_line_passwords_are_found_only_on_their_command_lines():
    assert Redactor().whole(b"mysql -u app -phunter5xyz db\n") == b"mysql -u app -p*** db\n"
    alike = (b"mysql -u app -p db\n"  # -p alone: mysql prompts
             b"mysql -P 3306 -h db\n"  # -P is the port
             b"ssh -p 8080 host; find . -name x -print; patch -p1 < fix; gcc -pthread a.c\n"
             b"date -u +%H:%M; sort -u a:b\n"
             b"curl --user-agent 'x:y z' https://example.com/a:b\n"
             b"wget --passive-ftp ftp://example.com/x; cmd --password-file /run/pw\n"
             b"automysqlbackup -pfoo is not mysql; curly -u a:b is not curl\n")
    assert Redactor().whole(alike) == alike


def test_every_built_in_match_is_bounded_and_starts_with_a_literal():
    """The width of every built-in pattern (what ``re`` computes for it) is at most CARRY,
    which a stream holds back; and each compiles to a prefix search."""
    from re import _compiler, _constants, _parser

    patterns = [p for _, p, _ in redact._RULES] + [redact._PEM_BEGIN, redact._PEM_END]
    for pattern in patterns:
        tree = _parser.parse(pattern)
        assert tree.getwidth()[1] <= CARRY, pattern
        code = _compiler._code(tree, 0)
        assert code[0] == _constants.INFO and code[2] & _constants.SRE_INFO_PREFIX, pattern


# -- issue 20 §1: linear time, whatever the output ------------------------------------------

MIB = 1 << 20


def rep(unit: bytes, size: int = MIB) -> bytes:
    return (unit * (size // len(unit) + 1))[:size]


ADVERSARIAL = {  # for each rule, runs of starts that each read far and then fail, 1 MiB each
    "url": rep(b"://a:"), "url-user": b"://" + rep(b"a"), "url-slashes": rep(b"x://a:b/"),
    "url-at": rep(b"://a:b@"), "url-lines": rep(b"s://u:" + b"p" * 300 + b"\n"),
    "keyword": rep(b"password="), "keyword-quote": rep(b'password: "'),
    "keyword-escapes": b'password="' + rep(b'\\"'), "keyword-bare": rep(b"passw"),
    "keyword-spaces": rep(b"password" + b" " * 60), "keywords": rep(b"secret_token_pwd_passw"),
    "authorization": rep(b"authorization: bearer "), "bearer": rep(b"bearer "),
    "bearer-tabs": b"bearer" + rep(b"\t"), "password-option": rep(b"--password "),
    "mysql": rep(b"mysql "), "mysql-words": rep(b"mysql " + b"mysqlx" * 40 + b" "),
    "mysql-p": rep(b"mysql -p "), "mariadb": rep(b"mariadb -u "), "curl": rep(b"curl "),
    "curl-u": rep(b"curl -u "), "curl-user": rep(b"curl --user a"), "aws": rep(b"AKIA"),
    "aws-near": rep(b"AKIA" + b"A" * 15 + b" "), "github": rep(b"ghp_" + b"a" * 35 + b"_"),
    "github-pat": rep(b"github_pat_"), "gitlab": rep(b"glpat-"), "slack": rep(b"xoxb-"),
    "slack-app": rep(b"xapp-"), "jwt": rep(b"eyJ"), "jwt-dots": rep(b"eyJaaaaa."),
    "jwt-pairs": rep(b"eyJaaaaa.eyJaaaaa."), "jwt-long": rep(b".eyJ" + b"a" * 5000),
    "pem-begins": rep(b"-----BEGIN PRIVATE KEY-----\n"),
    "pem-begins-one-line": rep(b"-----BEGIN RSA PRIVATE KEY-----"),
    "pem-near": rep(b"-----BEGIN " + b"PRIVATE KEY " * 3),
    "pem-ends": rep(b"-----END PRIVATE KEY-----"),
    "dashes": rep(b"-"), "newlines": rep(b"\n"), "long-line": rep(b"a"),
    "many-matches": rep(b"password=x AKIAIOSFODNN7EXAMPLE "),
    "many-overlaps": rep(b"token=eyJhbGciOi.eyJzdWIi.sig "),
}
BUDGET = 3.0  # CPU seconds per MiB: linear code takes well under a tenth of it


def within_budget(work) -> bool:
    from cronwrap.redact.deadline import CpuBudget

    return CpuBudget(step=BUDGET, total=BUDGET).run(work)


@pytest.mark.parametrize("name", ADVERSARIAL)
def test_every_built_in_pattern_is_linear_on_adversarial_input(name):
    """Each input through a stream as the capture feeds it (reads of 1 MiB, and of 4 KiB),
    and as a kept tail is redacted (redact_window), each under a CPU deadline it must finish
    far inside: a rule that read its input again from every start (the JWT rule read
    ``eyJeyJeyJ...`` so: minutes per MiB) is stopped by it."""
    data = ADVERSARIAL[name]

    def stream(read: int) -> None:
        s = Redactor(["secret-value-1"]).stream()
        for at in range(0, len(data), read):
            s.feed(data[at:at + read])
        s.flush()

    assert within_budget(lambda: stream(MIB)), "1 MiB reads"
    assert within_budget(lambda: stream(4096)), "4 KiB reads"
    assert within_budget(lambda: redact_window(Redactor(), data[:CARRY], data, data[-CARRY:]))


class Counting(Redactor):
    """Counts the bytes the stream asks to be read."""

    read = 0

    def spans(self, buf, final):
        self.read += len(buf)
        return super().spans(buf, final)


@pytest.mark.parametrize("data", [rep(b"a", 1 << 18), rep(b"a\n", 1 << 18),
                                  b"-----BEGIN PRIVATE KEY-----\n" + rep(b"QUFB\n", 60000)])
def test_a_stream_reads_each_byte_a_bounded_number_of_times_whatever_its_reads(data):
    """A long line, or a private key block's body, written 64 bytes at a time: what is held
    back is read again only when it has grown, not at every read (it was read at every read:
    8 KiB per 64 bytes)."""
    redactor = Counting()
    stream = redactor.stream()
    out = b"".join(stream.feed(data[at:at + 64]) for at in range(0, len(data), 64)) + stream.flush()
    assert redactor.read <= 3 * len(data), redactor.read
    assert b"QUFB" not in out and len(out) > 0


def test_a_key_body_never_shows_whatever_the_reads():
    """Past MAX_PEM the block is hidden to its END line: its later lines never show (they
    did, 64 bytes of each read at a time); a block on a line longer than the carry is kept
    whole too."""
    stream = Redactor().stream()
    out = stream.feed(b"-----BEGIN PRIVATE KEY-----\n" + b"QUFB\n" * (MAX_PEM // 5 + 10))
    out += stream.feed(b"SECRETBODY\n" * 3) + stream.feed(b"SECRET")
    out += stream.feed(b"BODY\n-----END PRIV") + stream.feed(b"ATE KEY-----\nafter\n")
    out += stream.flush()
    assert b"SECRET" not in out and b"BODY" not in out and b"QUFB" not in out, out
    assert out == b"-----BEGIN PRIVATE KEY-----\n***\n-----END PRIVATE KEY-----\nafter\n"
    stream = Redactor().stream()
    out = stream.feed(b"-----BEGIN PRIVATE KEY-----\n" + b"Q" * 20000)
    out += stream.feed(b"-----END PRIVATE KEY-----")
    out += stream.feed(b" tail\n") + stream.flush()
    assert out == b"-----BEGIN PRIVATE KEY-----\n***\n-----END PRIVATE KEY----- tail\n"


# -- issue 20 §1: the operator's patterns get a budget ---------------------------------------

REFUSED = ["(x+x+)+y", "(a*)*", "(a+)+$", "(a|a)*", "(a|aa)+b", r"(\w+\s?)+$", "(.|\\s)*x",
           r"(\s*\w+)+;", "(?:a{2,3})+!", "(a+){2}", "(a|a?)+", "(?i)(A+a+)+"]
ACCEPTED = ["ACME-[0-9]{6}", r"(\d+,)*\d+", r"([a-z]+\.)+[a-z]{2,}", r"(\d{1,3}\.){3}\d{1,3}",
            "(a|ab)*c", "(foo|far)*", r"(\w|\d)+", r"(\s|\S)*", "(a++)+", "(?:a+)++", "(?>a+)+",
            r"([A-Z][a-z]+ ?)+", r"\s*\s*x", r"internal-\w+", "(?:[A-Z0-9]{4}-){3}[A-Z0-9]{4}"]


@pytest.mark.parametrize("text", REFUSED + ACCEPTED)
def test_a_pattern_that_can_take_exponential_time_is_refused_with_one_line(text):
    """Nested repetitions that can split the same text, refused (backtrack.py); the same
    shapes with one way to match each character, accepted."""
    if text in ACCEPTED:
        compile_pattern(text, "--redact")
        return
    with pytest.raises(ValueError) as info:
        compile_pattern(text, "--redact")
    message = str(info.value)
    assert message.startswith(f"--redact: {text!r} could take exponential time") and \
        "possessive" in message and "\n" not in message


class FakeGuard:
    """A guard whose budget is spent after ``runs`` calls of run()."""

    def __init__(self, runs: int) -> None:
        self.mark, self.runs = 0, runs

    @property
    def spent(self) -> bool:
        return self.runs <= 0

    def run(self, work) -> bool:
        self.runs -= 1
        if self.runs < 0:
            return False
        work()
        return True


def test_once_the_budget_is_spent_the_rest_is_hidden_said_once_per_stream():
    r = Redactor((), [compile_pattern("ACME-[0-9]{6}", "--redact")], guard=FakeGuard(1))
    stream = r.stream()
    assert stream.feed(b"one ACME-123456\n") == b"one ***\n"
    assert stream.feed(b"two ACME-654321\n") == redact.SPENT_MARK
    assert stream.feed(b"three, and a password=pw-gone\n") == b"" and stream.flush() == b""
    assert r.text("anything") == redact.SPENT_MARK.decode()
    window = redact_window(r, b"", b"x\n" * redact.SLICE, b"")
    assert window == redact.SPENT_MARK


def test_a_hostile_pattern_is_cut_short_line_by_line_then_in_all():
    """Real CPU deadlines (deadline.CpuBudget): a line a pattern cannot finish within a step
    is hidden from where its scan stood, the other lines are matched as usual, and once the
    run's total is spent the rest is hidden."""
    import re

    from cronwrap.redact.deadline import CpuBudget

    hostile = re.compile(rb"(x+x+)+y")  # as compile_pattern would refuse it
    polynomial = compile_pattern(r"\s*\s*\s*\s*x", "--redact")  # accepted, yet O(n^4)
    budget = CpuBudget(step=0.05, total=0.6)
    r = Redactor((), [hostile, polynomial], guard=budget)
    text = b"kept xxy and x\n" + b"ok xxy " + b"x" * 40 + b"\n" + b" " * 3000 + b"!\nafter x\n"
    over = redact.OVERRUN_MARK
    assert r.whole(text) == b"kept*** and***\nok***" + over + b"\n" + over + b"\nafter***\n"
    assert not budget.spent
    for _ in range(100):  # each hostile line costs a step or two, until the total is spent
        out = r.whole(b"x" * 40 + b"\nplain\n")
        if budget.spent:
            break
        assert out == over + b"\nplain\n"
    assert out.endswith(redact.SPENT_MARK) and b"plain" not in out
    assert r.whole(b"plain\n") == redact.SPENT_MARK and budget.used < 0.6 + 2 * 0.05
