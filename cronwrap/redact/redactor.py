"""What must never be shown: secrets in what cronwrap prints, logs, stores or sends.

Two tools, pure (no I/O, no clock, no signals): ``url`` hides a URL's password (the ledger's
label, pings), beside the one reading of a URL's user info and host that sending a ping
(``split_userinfo``) and checking ``--ping`` (``parse_ping_url``) share; ``Redactor`` takes
secrets out of a job's output before anything of it is stored or sent — the captured file, the
ledger's error tail, hooks' ``CRONWRAP_OUTPUT_TAIL``, pings' bodies — by the stream, so that a
secret split across two reads is still caught. What is found is replaced by ``***`` and the
text around it is kept: ``postgresql://app:***@db/x``.

Found: the values of the job's environment variables whose names say secret (``secret_values``),
passwords in URLs, ``password=``/``pwd=``-style assignments (a quoted value to its closing
quote), ``Authorization:`` and bearer values, passwords on command lines (``--password X``,
mysql's ``-pX``, curl's ``-u user:X``), well-known token shapes (AWS access key IDs, GitHub,
GitLab and Slack tokens, JWTs, PEM private key blocks), and whatever the operator's
``--redact`` patterns match.

Speed: Python's ``re`` scans a pattern that starts with a literal with a fast search, and
any other pattern one position at a time (measured: 10 to 200 s per GiB for one pattern).
Every built-in pattern starts with a literal (case-insensitive ones are searched in a
lower-cased copy of the same length), and ``re`` is compiled once per process, on the first
output. The capture redacts only what it keeps (runlog.OutputCapture: the head and the tail).

Linear time, whatever the output (issue 20 §1): a start of a built-in pattern is tried only at
its literal, and from there every repetition is bounded and either possessive (``{0,30}+``:
never given back) or stopped by a byte it cannot take, so a start that fails has read a
bounded number of bytes past its literal — and not the same bytes as many other starts (each
rule's comment says why) — while one that matches is never read again (``finditer`` goes on
after it). Every match is at most ``CARRY`` bytes long (tests/unit/test_redact.py checks each
pattern's width), so a stream holds back enough to see it whole. A stream reads each byte a
bounded number of times, however its reads are cut (``Stream``). The operator's patterns
cannot be proved anything: ``backtrack.catastrophic`` refuses the nested repetitions that
blow up, and a ``Guard`` (deadline.CpuBudget, passed in by whoever runs the redaction) bounds
the CPU they take, line by line and in all.
"""

from __future__ import annotations

from cronwrap.errors import UsageError
from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from re import Match, Pattern
    from typing import Callable, Protocol

    class Guard(Protocol):
        """Bounds the CPU of the operator's patterns (deadline.CpuBudget). ``run(work)`` calls
        ``work``: True when it finished; False when it was cut short, because one step of it
        (``mark`` unchanged) ran too long or because the budget of the whole run is ``spent``
        (then every later ``run`` is False at once)."""

        mark: int

        @property
        def spent(self) -> bool: ...

        def run(self, work: Callable[[], None]) -> bool: ...


def url(text: str) -> str:
    """``text`` with everything from after ``://`` to its last ``@`` hidden: safe to print.

    ``https://ops:pw@host/x`` -> ``https://***@host/x``. The last ``@`` of the whole URL,
    since a password may hold a raw ``/``, ``?`` or ``#``: an ``@`` in a path or query hides
    too much, never too little. The one redaction of URLs: pings and the ledger's label.
    """
    scheme, sep, rest = text.partition("://")
    if not sep or "@" not in rest:
        return text
    return f"{scheme}://***@{rest.rpartition('@')[2]}"


def parse_ping_url(text: str, label: str = "--ping") -> str:
    """An http:// or https:// URL with a host[:port] (spec.py's value-parser shape)."""
    scheme, _userinfo, rest = split_userinfo(text)
    if scheme.lower() in ("http://", "https://") and _host_port(rest[:_authority_end(rest)]) \
            and text.isprintable() and " " not in text:
        return text
    raise UsageError(f"{label}: {url(text)!r} is not an http:// or https:// URL "
                     "(example: https://hc-ping.com/YOUR-UUID)")


def split_userinfo(url: str) -> tuple[str, str | None, str]:
    """``(scheme://, user info or None, the rest)``, for sending a URL.

    RFC 3986 ends the authority at the first ``/``, ``?`` or ``#``, and a user info before it
    at its last ``@``. When that authority is no host[:port] (``ops:pw/x``, a password with a
    raw ``/``), the user info runs to the URL's last ``@`` instead, as ``url`` hides it.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "", None, url
    authority = rest[:_authority_end(rest)]
    if "@" in authority:
        at = authority.rfind("@")
    elif "@" in rest and not _host_port(authority):
        at = rest.rfind("@")
    else:
        return scheme + sep, None, rest
    return scheme + sep, rest[:at], rest[at + 1:]


def _authority_end(rest: str) -> int:
    """Where RFC 3986 ends the authority of ``rest`` (a URL after ``://``)."""
    return min((i for i in map(rest.find, "/?#") if i >= 0), default=len(rest))


def _host_port(authority: str) -> bool:
    """``host``, ``host:port`` or ``[v6]:port``; a port, if any, is a number."""
    if authority.startswith("["):
        host, close, port = authority[1:].partition("]")
        if not close or port[:1] not in ("", ":"):
            return False
        port = port[1:]
    else:
        host, _, port = authority.partition(":")
    return bool(host) and not any(c in host for c in "@[]") and \
        (not port or (port.isascii() and port.isdigit() and int(port) <= 65535))


MARK = b"***"
PEM_MARK = b"\n***\n"  # a private key's body: its BEGIN and END lines are kept
OVERRUN_MARK = b"***[cronwrap: a --redact pattern ran out of time on this line]"
SPENT_MARK = b"[cronwrap: --redact patterns used up their CPU budget; the rest is hidden]\n"
# Variable names that say secret (upper-cased, as a part of the name), and the shortest value
# taken for one: shorter values (``1``, ``true``) would blank out ordinary text.
SECRET_NAME_PARTS = ("PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "TOKEN", "API_KEY", "APIKEY",
                     "PRIVATE_KEY", "ACCESS_KEY", "CREDENTIAL", "AUTH_KEY", "SESSION_KEY")
MIN_SECRET = 6
CARRY = 8192  # the longest match; bytes held back between reads, so a match split by one is caught
MAX_PEM = 65536  # a private key block longer than this is hidden to its end without waiting
SLICE = 256 * 1024  # redacted at a time: bounds the memory of a read full of matches
MAX_VALUE = 2048  # the longest value hidden after a keyword or an option (quoted: its characters)
PEM_LINE = 64  # longer than a BEGIN or END line: what a stream keeps to find one split by a read

# A value after a keyword or an option: in double or single quotes, to the closing quote (a
# backslash escapes one character; to the line's end when it is not closed); else a run of
# ``bare`` bytes. Each alternative begins with a byte the others cannot, is possessive and
# bounded, and cannot fail once it has a first byte: a value is read once.
_QUOTED = (rb'"%s((?:[^"\\\n]|\\.){1,%d}+)|' + rb"'%s((?:[^'\\\n]|\\.){1,%d}+)")


def _value(bare: bytes, lead: bytes = b"") -> bytes:
    return (rb"(?:" + _QUOTED % (lead, MAX_VALUE, lead, MAX_VALUE)
            + rb"|%s(%s{1,%d}+))" % (lead, bare, MAX_VALUE))


_ASSIGNED = rb"[^\s\"',;&<>]"  # password=X;Database=y, <pwd>X</pwd>, ?token=X&...
_ARG = rb"[^\s\"']"  # a word of a command line
_SCHEME = rb"(?:(?:bearer|basic|token|digest|negotiate)[ \t]{1,16}+)?"
# A keyword's tail and its operator: ``password_file: ``, ``"password": ``, ``pwd = ``,
# ``password => ``, ``password := ``. Bounded, and each part stops at a byte the next begins
# with, so a start that fails has read at most 40 bytes past its keyword.
_KEY_OP = rb"""[\w.-]{0,30}+["']?[ \t]{0,3}+(?:=>|:=|[=:])[ \t]{0,3}+"""


def _command(names: tuple[bytes, ...], option: bytes, suffix: bytes = rb"[\w.-]{0,32}+") -> bytes:
    """One of ``names`` as a command (at a word's start: ``mysql``, ``/usr/bin/mysqldump``),
    then up to 12 of its words before ``option``: a start reads at most its 12 words, and is
    tried only where a word begins, so a byte is read by at most 13 starts. (Names that share
    their first letter share one prefix search.)"""
    name = rb"|".join(n + rb"(?<![\w.-]" + n + rb")" for n in names)
    return (rb"(?:" + name + rb")" + suffix
            + rb"(?:[ \t]{1,8}+(?![\"']?" + option + rb")\S{1,200}+){0,12}+"
            + rb"[ \t]{1,8}+[\"']?" + option)


# (case-insensitive?, pattern, hidden up to the last of these bytes in it or None). What is
# hidden is the last group that took part (the whole match when it has none). Every pattern
# starts with a literal (see the module's docstring); case-insensitive ones are matched in
# lower case. None crosses a line but a private key block's, so a stream can pass on each line
# once it is whole.
_RULES: tuple[tuple[bool, bytes, bytes | None], ...] = (
    # scheme://user:PASSWORD@host, the password to the URL's last @ (as ``url`` reads one).
    # A user stops at ``:`` and ``/``, so the failed starts' reads are apart; a match takes the
    # rest of its URL whether it has an @ or not, so no later start inside it reads it again.
    (False, rb"://[^\s:/'\"<>]{0,256}+:([^\s'\"<>]{1,%d}+)" % MAX_VALUE, b"@"),
    *((True, word + _KEY_OP + _value(_ASSIGNED), None)
      for word in (rb"passw", rb"passphrase", rb"pwd", rb"secret", rb"token", rb"api_key",
                   rb"apikey", rb"api-key", rb"access_key", rb"private_key", rb"credential")),
    (True, rb"""authorization["']?[ \t]{0,3}+[:=][ \t]{0,3}+""" + _value(rb"[^\s\"',;]", _SCHEME),
     None),
    (True, rb"bearer[ \t]{1,16}+([a-z0-9._~+/=-]{8,%d}+)" % MAX_VALUE, None),
    # --password X, --passwd=X, --pass X, --passphrase X (not --password-file, --passive)
    (True, rb"--pass(?:word|wd|phrase)?(?:[ \t]{1,8}+|=)" + _value(_ARG), None),
    # mysql -pX (and mysqldump, mysqladmin, mariadb...): only on their command lines, since
    # elsewhere -p is a port, a path or a flag (patch -p1, find -print, gcc -pthread).
    (False, _command((rb"mysql", rb"mariadb"), rb"-p") + _value(_ARG), None),
    # curl -u user:X, -uuser:X, --user user:X, -U/--proxy-user user:X
    (False, _command((rb"curl",), rb"(?:-[uU]|--(?:proxy-)?user[ \t=])", b"")
     + rb"[ \t]{0,8}+[\"']?[^\s:\"']{0,256}+:" + _value(_ARG), None),
    # Token shapes: a start that fails has read fewer bytes than the shape's shortest length.
    (False, rb"A[KS]IA[0-9A-Z]{16}", None),  # AWS access key IDs: long-term and temporary
    (False, rb"gh[pousr]_[A-Za-z0-9]{36,255}+", None),  # GitHub
    (False, rb"github_pat_[A-Za-z0-9_]{22,255}+", None),
    (False, rb"glpat-[A-Za-z0-9_-]{20,255}+", None),  # GitLab
    (False, rb"xox[abposr]-[A-Za-z0-9-]{10,255}+", None),  # Slack
    (False, rb"xapp-[A-Za-z0-9-]{10,255}+", None),
    # JWT: header.payload[.signature], tried only where a token begins (the lookbehind after
    # the literal: ``eyJeyJeyJ...`` is one start, not one per eyJ), so a byte is read by at
    # most three starts (as a header, a payload, a signature). A longer token is hidden for
    # its first 7 KiB, which is enough to make it useless.
    (False, rb"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{5,2048}+\.eyJ[A-Za-z0-9_-]{5,4096}+"
            rb"(?:\.[A-Za-z0-9_-]{0,1024}+)?", None),
)
# A private key block's BEGIN and END lines: the label is read once (possessive) and checked
# from behind, so a start reads at most 46 bytes.
_PEM_BEGIN = rb"-----BEGIN[A-Z0-9 ]{0,41}+-----(?<=PRIVATE KEY-----)"
_PEM_END = rb"-----END[A-Z0-9 ]{0,41}+-----(?<=PRIVATE KEY-----)"
_compiled: list[tuple[bool, Pattern[bytes], bytes | None]] = []
_pem: list[Pattern[bytes]] = []


def _builtin() -> list[tuple[bool, Pattern[bytes], bytes | None]]:
    """The built-in patterns, compiled on first use (a firing without output pays nothing)."""
    if not _compiled:
        import re

        _compiled.extend((lower, re.compile(p), cut) for lower, p, cut in _RULES)
        _pem.extend(re.compile(p) for p in (_PEM_BEGIN, _PEM_END))
    return _compiled


def secret_values(environ: Mapping[str, str]) -> list[str]:
    """Values of at least MIN_SECRET characters of variables whose names say secret
    (``DB_PASSWORD``, ``GITHUB_TOKEN``, ``AWS_SECRET_ACCESS_KEY``...)."""
    return sorted({value for name, value in environ.items()
                   if len(value) >= MIN_SECRET and any(part in name.upper()
                                                       for part in SECRET_NAME_PARTS)},
                  key=len, reverse=True)


def compile_pattern(text: str, label: str) -> Pattern[bytes]:
    """An operator's ``--redact`` pattern (Python ``re`` syntax), matched against each line of
    output's bytes; ValueError saying why it is not one, or why it could take exponential time
    (backtrack.py)."""
    import re

    from cronwrap.redact.backtrack import catastrophic

    source = text.encode("utf-8", "surrogateescape")
    try:
        pattern = re.compile(source)
    except re.error as exc:
        raise ValueError(f"{label}: {text!r} is not a regular expression ({exc})") from None
    why = catastrophic(source)
    if why is not None:
        raise ValueError(f"{label}: {text!r} could take exponential time on a line it does not "
                         f"match: {why}")
    return pattern


# start, end, replacement; and where the whole match begins (a keyword before the value):
# a read must not cut between the two, or the value would be seen again without its keyword.
Span = tuple[int, int, bytes, int]


class Redactor:
    """The secrets of one run. ``stream()`` gives a ``Stream`` per output stream; ``whole`` and
    ``text`` redact a whole piece at once. ``guard`` bounds the CPU of the operator's
    ``patterns`` (see ``Guard``); without one they run unbounded."""

    def __init__(self, secrets: Iterable[str] = (), patterns: Iterable[Pattern[bytes]] = (),
                 guard: Guard | None = None):
        self.secrets = [s.encode("utf-8", "surrogateescape") for s in secrets if s]
        self.patterns = list(patterns)
        self.guard = guard
        # how far back a cut may move to keep a match whole: the longest built-in match or secret
        self.reach = max([CARRY, *map(len, self.secrets)])

    def stream(self) -> Stream:
        return Stream(self)

    def whole(self, data: bytes) -> bytes:
        stream = self.stream()
        return stream.feed(data) + stream.flush()

    def text(self, text: str) -> str:
        return self.whole(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")

    def spans(self, buf: bytes, final: bool) -> tuple[list[Span], int | None, bool]:
        """What to replace in ``buf``, without overlaps; where an unterminated private key
        block begins (None: there is none); and whether the operator's patterns ran out of
        budget in it (then the last span hides the rest of ``buf`` with SPENT_MARK)."""
        found: list[Span] = []
        lowered = buf.lower()  # ASCII only: the same length, the same offsets
        for lower, pattern, cut in _builtin():
            for m in pattern.finditer(lowered if lower else buf):
                _found(found, m, cut)
        for secret in self.secrets:
            at = buf.find(secret)
            while at >= 0:
                found.append((at, at + len(secret), MARK, at))
                at = buf.find(secret, at + len(secret))
        spent_at = self._operator_spans(buf, found) if self.patterns else None
        open_pem = _pem_blocks(buf, found)
        if open_pem is not None and final:
            body = _pem[0].match(buf, open_pem).end()  # type: ignore[union-attr]
            found.append((body, len(buf), PEM_MARK, open_pem))
            open_pem = None
        if spent_at is None:
            return _without_overlaps(found), open_pem, False
        kept = [(s, min(e, spent_at), mark, a) for s, e, mark, a in found if s < spent_at]
        return _without_overlaps(kept) + [(spent_at, len(buf), SPENT_MARK, spent_at)], None, True

    def _operator_spans(self, buf: bytes, found: list[Span]) -> int | None:
        """The operator's patterns, matched against each line on its own (without its newline:
        ``^`` and ``$`` are its ends). A line a pattern cannot finish within the guard's step
        is hidden from where that pattern's scan stood. Returns where the guard's budget ran
        out (the start of the line it stopped in), or None."""
        guard = self.guard or _Unguarded()
        scan = _LineScan(buf, self.patterns, found, guard)
        while not scan.done:
            if guard.spent:
                return scan.at[1]
            if not guard.run(scan) and not scan.done and not guard.spent:
                scan.give_up()
        return None


def _found(found: list[Span], m: Match[bytes], cut: bytes | None) -> None:
    group = m.lastindex or 0
    start, end = m.span(group)
    if cut is not None:
        end = m.string.rfind(cut, start, end)
    if end > start:
        found.append((start, end, MARK, m.start()))


class _Unguarded:
    mark = 0
    spent = False

    def run(self, work: Callable[[], None]) -> bool:
        work()
        return True


class _LineScan:
    """The operator's patterns over the lines of ``buf``, resumable after a guard stopped it.
    ``at`` is where it stands, in one attribute so that an interruption never finds it half
    updated: (line, the line's offset in buf, pattern, where that pattern's scan stood)."""

    def __init__(self, buf: bytes, patterns: list[Pattern[bytes]], found: list[Span],
                 guard: Guard | _Unguarded) -> None:
        self.lines = buf.split(b"\n")
        self.patterns, self.found, self.guard = patterns, found, guard
        self.at = (0, 0, 0, 0)

    @property
    def done(self) -> bool:
        return self.at[0] >= len(self.lines)

    def __call__(self) -> None:
        index, start, first, _ = self.at
        found, guard, patterns = self.found, self.guard, self.patterns
        for index in range(index, len(self.lines)):
            line = self.lines[index]
            for p in range(first, len(patterns) if line else 0):
                guard.mark += 1
                for m in patterns[p].finditer(line):
                    if m.end() > m.start():
                        found.append((start + m.start(), start + m.end(), MARK, start + m.start()))
                    self.at = (index, start, p, m.end())
                self.at = (index, start, p + 1, 0)
            start += len(line) + 1
            first = 0
            self.at = (index + 1, start, 0, 0)

    def give_up(self) -> None:
        """The pattern at ``at`` ran out of time: the rest of its line is hidden, and the scan
        goes on with the next pattern."""
        index, start, p, pos = self.at
        if p < len(self.patterns):
            end = start + len(self.lines[index])
            self.found.append((start + pos, end, OVERRUN_MARK, start + pos))
        self.at = (index, start, p + 1, 0)


def _pem_blocks(buf: bytes, found: list[Span]) -> int | None:
    """Private key blocks: the body between the BEGIN and END lines is replaced. Returns where
    the BEGIN line of a block without its END line begins (None when every block is closed)."""
    begin, end = _pem
    at = 0
    while (b := begin.search(buf, at)) is not None:
        e = end.search(buf, b.end())
        if e is None:
            return b.start()
        found.append((b.end(), e.start(), PEM_MARK, b.start()))
        at = e.end()
    return None


def _without_overlaps(spans: list[Span]) -> list[Span]:
    """The earliest (then the longest) of overlapping spans, merged with what it overlaps."""
    out: list[Span] = []
    for start, end, mark, anchor in sorted(spans, key=lambda s: (s[0], -s[1])):
        if out and start < out[-1][1]:
            last = out[-1]
            out[-1] = (last[0], max(end, last[1]), last[2], min(anchor, last[3]))
            continue
        out.append((start, end, mark, anchor))
    return out


def _cut(safe: int, spans: list[Span], reach: int) -> int:
    """``safe`` moved back to the start of any match it would cut (from its anchor to its end,
    so a keyword stays with its value), and of any match that one would then cut, in one pass:
    at most ``reach`` bytes back but for a private key block, kept whole (a longer match, only
    an operator's on a line longer than 2 × CARRY, is hidden up to the cut and its rest seen
    anew: what is held back stays bounded)."""
    lo = hi = -1
    for anchor, end in sorted((s[3], s[1]) for s in spans
                              if s[3] < safe and (safe - reach <= s[3] or s[2] == PEM_MARK)):
        if anchor >= hi:  # the matches that overlap one another, as one stretch (lo, hi)
            if lo < safe < hi:
                break
            lo = anchor
        hi = max(hi, end)
    return lo if lo < safe < hi else safe


def _apply(buf: bytes, spans: list[Span], upto: int | None = None) -> bytes:
    """``buf[:upto]`` with ``spans`` replaced (a span that runs past ``upto`` hidden to it)."""
    upto = len(buf) if upto is None else upto
    parts: list[bytes] = []
    at = 0
    for start, end, mark, _ in spans:
        if start >= upto:
            break
        parts += (buf[at:start], mark)
        at = min(end, upto)
    parts.append(buf[at:upto])
    return b"".join(parts)


class Stream:
    """One output stream's redaction: ``feed`` returns what may be kept or sent now: its whole
    lines, holding back the partial last one (until it ends, or passing on all but its last
    CARRY bytes once it is 2 × CARRY long), any match reaching into it, and an unended private
    key block (up to MAX_PEM), so that a secret split between two reads is whole in the next
    call; ``flush`` returns the rest at the end of the output, ``finish`` where the output is
    cut off (the capture's head is full), looking past the cut.

    Each byte is read a bounded number of times, however the reads are cut: what is held back
    grows by appending and is read again only when a line ends, when it has doubled, or when a
    private key block ends."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.carry = bytearray()
        self.waiting: int | None = None  # where an unended private key block begins in carry
        self.skipping = False  # inside a key block already hidden: dropped until its END line
        self.spent = False  # the operator's patterns ran out of budget: the rest is dropped

    def feed(self, data: bytes) -> bytes:
        if len(data) > SLICE:  # a 1 MiB read full of matches would hold ~10 MB of spans
            return b"".join(self.feed(data[i:i + SLICE]) for i in range(0, len(data), SLICE))
        if self.spent or self.skipping and not (data := self._skip_pem(data)):
            return b""
        held = len(self.carry)
        self.carry += data
        if self.waiting is not None:
            ended = _pem[1].search(self.carry, max(0, held - PEM_LINE)) is not None
            if not ended and len(self.carry) - self.waiting <= MAX_PEM:
                return b""
            self.waiting = None  # it ended, or is too long to wait for: read it all, once
        elif b"\n" not in data and len(self.carry) < 2 * CARRY:
            return b""
        buf = bytes(self.carry)
        safe = buf.rfind(b"\n") + 1  # whole lines: `logs --follow`
        if len(buf) - safe >= 2 * CARRY:
            safe = len(buf) - CARRY
        if safe == 0:
            return b""
        spans, open_pem, spent = self.redactor.spans(buf, final=False)
        if spent:
            self.spent, self.carry = True, bytearray()
            return _apply(buf, spans)
        if open_pem is not None:
            if len(buf) - open_pem > MAX_PEM:  # too long to wait for: hide it to its END
                self.skipping, self.carry = True, bytearray(buf[-PEM_LINE:])
                body = _pem[0].match(buf, open_pem).end()  # type: ignore[union-attr]
                return _apply(buf, spans, body) + PEM_MARK
            safe = min(safe, open_pem)
        safe = _cut(safe, spans, self.redactor.reach)
        self.carry = bytearray(buf[safe:])
        if open_pem is not None:
            self.waiting = open_pem - safe
        return _apply(buf, spans, safe)

    def flush(self) -> bytes:
        buf, self.carry, self.waiting = bytes(self.carry), bytearray(), None
        if self.spent or self.skipping:  # the rest of a key block that never ended
            self.skipping = False
            return b""
        spans, _, self.spent = self.redactor.spans(buf, final=True)
        return _apply(buf, spans)

    def finish(self, after: bytes) -> bytes:
        """The rest, where the stream is cut off (the capture's head is full): ``after`` is
        what came next, seen only to find a secret that straddles the cut."""
        buf, self.carry, self.waiting = bytes(self.carry), bytearray(), None
        if self.spent or self.skipping:
            self.skipping = False
            return b""
        return redact_window(self.redactor, b"", buf, after)

    def _skip_pem(self, data: bytes) -> bytes:
        """What follows the END line of the key block being dropped (b"" while it has not
        come); ``carry`` keeps the last bytes dropped, to find an END line split by a read."""
        _builtin()
        buf = bytes(self.carry) + data
        e = _pem[1].search(buf)
        if e is None:
            self.carry = bytearray(buf[-PEM_LINE:])
            return b""
        self.skipping, self.carry = False, bytearray()
        return buf[e.start():]


def redact_window(redactor: Redactor, before: bytes, data: bytes, after: bytes) -> bytes:
    """``data`` redacted as it stood between ``before`` and ``after``, bytes that are not kept
    (where a bounded capture cuts the output): a secret that straddles either cut is found
    whole, and its part inside ``data`` hidden; a private key body whose BEGIN line was cut off
    is hidden up to its END line. Nothing else changes, so a cut without a secret is exact.
    Redacted SLICE bytes at a time, each piece ending at a line's end where it can, with
    CARRY bytes of its neighbours as context."""
    if len(data) <= SLICE:
        return _window(redactor, before[-CARRY:], data, after[:CARRY])[0]
    out, at = [], 0
    while at < len(data):
        end = len(data) if len(data) - at <= SLICE else \
            (data.rfind(b"\n", at, at + SLICE) + 1 or at + SLICE)
        pre = data[max(0, at - CARRY):at] if at >= CARRY else before[-(CARRY - at):] + data[:at]
        post = data[end:end + CARRY] + (after[:CARRY] if end + CARRY > len(data) else b"")
        piece, spent = _window(redactor, pre, data[at:end], post)
        out.append(piece)
        if spent:  # the rest is hidden, said once
            break
        at = end
    return b"".join(out)


def _window(redactor: Redactor, before: bytes, data: bytes, after: bytes) -> tuple[bytes, bool]:
    buf = before + data + after
    spans, _, spent = redactor.spans(buf, final=True)
    lo, hi = len(before), len(before) + len(data)
    limit = spans[-1][0] if spent else len(buf)  # where the budget ran out: hidden from there
    begin, end = _pem
    e = end.search(buf, lo, hi)
    if e is not None and begin.search(buf, 0, e.start()) is None and lo < limit:  # BEGIN cut off
        spans = _without_overlaps([*spans, (lo, min(e.start(), limit), PEM_MARK.lstrip(), lo)])
    inside = [(max(start, lo) - lo, min(end_, hi) - lo, mark, 0)
              for start, end_, mark, _ in spans if start < hi and end_ > lo]
    return _apply(data, inside), limit < hi
