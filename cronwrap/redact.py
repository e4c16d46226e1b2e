"""What must never be shown: secrets in what cronwrap prints, logs, stores or sends.

Two tools, pure (no I/O, no clock): ``url`` hides a URL's password (the ledger's label,
pings); ``Redactor`` takes secrets out of a job's output before anything of it is stored or
sent — the captured file, the ledger's error tail, hooks' ``CRONWRAP_OUTPUT_TAIL``, pings'
bodies — by the stream, so that a secret split across two reads is still caught. What is
found is replaced by ``***`` and the text around it is kept: ``postgresql://app:***@db/x``.

Found: the values of the job's environment variables whose names say secret (``secret_values``),
passwords in URLs, ``password=``/``pwd=``-style assignments, ``Authorization:`` and bearer
values, well-known token shapes (AWS access key IDs, GitHub, GitLab and Slack tokens, JWTs, PEM
private key blocks), and whatever the operator's ``--redact`` patterns match.

Speed: Python's ``re`` scans a pattern that starts with a literal with a fast search, and
any other pattern one position at a time (measured: 10 to 200 s per GiB for one pattern).
Every pattern here starts with a literal (case-insensitive ones are searched in a lower-cased
copy of the same length), and ``re`` is compiled once per process, on the first output.
The capture redacts only what it keeps (runlog.OutputCapture: the head and the tail).
"""

from __future__ import annotations

from cronwrap.record import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from re import Match, Pattern
    from typing import Callable


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


MARK = b"***"
PEM_MARK = b"\n***\n"  # a private key's body: its BEGIN and END lines are kept
# Variable names that say secret (upper-cased, as a part of the name), and the shortest value
# taken for one: shorter values (``1``, ``true``) would blank out ordinary text.
SECRET_NAME_PARTS = ("PASSWORD", "PASSWD", "PASSPHRASE", "SECRET", "TOKEN", "API_KEY", "APIKEY",
                     "PRIVATE_KEY", "ACCESS_KEY", "CREDENTIAL", "AUTH_KEY", "SESSION_KEY")
MIN_SECRET = 6
CARRY = 8192  # bytes held back between reads: a secret up to this long split by a read is caught
MAX_PEM = 65536  # a private key block longer than this is hidden to its end without waiting
SLICE = 256 * 1024  # redacted at a time: bounds the memory of a read full of matches

# (case-insensitive?, pattern, group to hide: 0 the whole match). Every pattern starts with a
# literal (see the module's docstring); case-insensitive ones are matched in lower case. None
# crosses a line but a private key block's, so a stream can pass on each line once it is whole.
_VALUE = rb"""["']?[ \t]{0,3}[=:][ \t]{0,3}["']?([^\s"',;&<>]+)"""
_RULES: tuple[tuple[bool, bytes, int], ...] = (
    (False, rb"://[^\s:/@'\"<>]*:([^\s@/'\"<>]+)@", 1),  # scheme://user:PASSWORD@host
    *((True, word + rb"[\w.-]{0,30}" + _VALUE, 1)
      for word in (rb"passw", rb"passphrase", rb"pwd", rb"secret", rb"token", rb"api_key",
                   rb"apikey", rb"api-key", rb"access_key", rb"private_key", rb"credential")),
    (True, rb"authorization" + rb"""["']?[ \t]{0,3}[:=][ \t]{0,3}["']?"""
           rb"(?:(?:bearer|basic|token|digest|negotiate)[ \t]+)?([^\s\"',;]+)", 1),
    (True, rb"bearer[ \t]+([a-z0-9._~+/=-]{8,})", 1),
    (False, rb"AKIA[0-9A-Z]{16}", 0),  # AWS access key IDs: long-term and temporary
    (False, rb"ASIA[0-9A-Z]{16}", 0),
    (False, rb"gh[pousr]_[A-Za-z0-9]{36,255}", 0),  # GitHub
    (False, rb"github_pat_[A-Za-z0-9_]{22,255}", 0),
    (False, rb"glpat-[A-Za-z0-9_-]{20,}", 0),  # GitLab
    (False, rb"xox[abposr]-[A-Za-z0-9-]{10,}", 0),  # Slack
    (False, rb"xapp-[A-Za-z0-9-]{10,}", 0),
    (False, rb"eyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*", 0),  # JWT
)
_PEM_BEGIN = rb"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY-----"
_PEM_END = rb"-----END[A-Z0-9 ]{0,30}PRIVATE KEY-----"
_compiled: list[tuple[bool, Pattern[bytes], int]] = []
_pem: list[Pattern[bytes]] = []


def _builtin() -> list[tuple[bool, Pattern[bytes], int]]:
    """The built-in patterns, compiled on first use (a firing without output pays nothing)."""
    if not _compiled:
        import re

        _compiled.extend((lower, re.compile(p), group) for lower, p, group in _RULES)
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
    """An operator's ``--redact`` pattern (Python ``re`` syntax), matched against output bytes;
    ValueError saying why it is not one."""
    import re

    try:
        return re.compile(text.encode("utf-8", "surrogateescape"))
    except re.error as exc:
        raise ValueError(f"{label}: {text!r} is not a regular expression ({exc})") from None


# start, end, replacement; and where the whole match begins (a keyword before the value):
# a read must not cut between the two, or the value would be seen again without its keyword.
Span = tuple[int, int, bytes, int]


class Redactor:
    """The secrets of one run. ``stream()`` gives a ``Stream`` per output stream; ``bytes`` and
    ``text`` redact a whole piece at once."""

    def __init__(self, secrets: Iterable[str] = (), patterns: Iterable[Pattern[bytes]] = ()):
        self.secrets = [s.encode("utf-8", "surrogateescape") for s in secrets if s]
        self.patterns = list(patterns)

    def stream(self) -> Stream:
        return Stream(self)

    def whole(self, data: bytes) -> bytes:
        stream = self.stream()
        return stream.feed(data) + stream.flush()

    def text(self, text: str) -> str:
        return self.whole(text.encode("utf-8", "surrogateescape")).decode("utf-8", "replace")

    def spans(self, buf: bytes, final: bool) -> tuple[list[Span], int | None]:
        """What to replace in ``buf``, without overlaps, and where an unterminated private key
        block begins (None: there is none)."""
        found: list[Span] = []
        lowered = None
        for lower, pattern, group in _builtin():
            if lower and lowered is None:
                lowered = buf.lower()  # ASCII only: the same length, the same offsets
            for m in pattern.finditer(lowered if lower else buf):  # type: ignore[arg-type]
                found.append((m.start(group), m.end(group), MARK, m.start()))
        for secret in self.secrets:
            at = buf.find(secret)
            while at >= 0:
                found.append((at, at + len(secret), MARK, at))
                at = buf.find(secret, at + len(secret))
        for pattern in self.patterns:
            found.extend((m.start(), m.end(), MARK, m.start()) for m in pattern.finditer(buf)
                         if m.end() > m.start())
        open_pem = _pem_blocks(buf, found)
        if open_pem is not None and final:
            body = _pem[0].match(buf, open_pem).end()  # type: ignore[union-attr]
            found.append((body, len(buf), PEM_MARK, open_pem))
            open_pem = None
        return _without_overlaps(found), open_pem


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


def _apply(buf: bytes, spans: list[Span]) -> bytes:
    parts: list[bytes] = []
    at = 0
    for start, end, mark, _ in spans:
        parts += (buf[at:start], mark)
        at = end
    parts.append(buf[at:])
    return b"".join(parts)


class Stream:
    """One output stream's redaction: ``feed`` returns what may be kept or sent now: its whole
    lines, holding back the partial last one (at most CARRY bytes of it, and any match reaching
    into them, or an unended private key block) so that a secret split between two reads is
    whole in the next call; ``flush`` returns the rest at the end of the output, ``finish``
    where the output is cut off (the capture's head is full), looking past the cut."""

    def __init__(self, redactor: Redactor) -> None:
        self.redactor = redactor
        self.carry = b""
        self.in_pem = False  # inside a private key block already hidden: drop until its END

    def feed(self, data: bytes) -> bytes:
        if len(data) > SLICE:  # a 1 MiB read full of matches would hold ~10 MB of spans
            return b"".join(self.feed(data[i:i + SLICE]) for i in range(0, len(data), SLICE))
        buf = self._skip_pem(self.carry + data)
        safe = max(buf.rfind(b"\n") + 1, len(buf) - CARRY)  # whole lines: `logs --follow`
        if safe == 0:
            self.carry = buf
            return b""
        spans, open_pem = self.redactor.spans(buf, final=False)
        if open_pem is not None:
            if len(buf) - open_pem > MAX_PEM:  # too long to wait for: hide it to its END
                self.in_pem, self.carry = True, b""
                body = _pem[0].match(buf, open_pem).end()  # type: ignore[union-attr]
                return _apply(buf[:body], [s for s in spans if s[1] <= open_pem]) + PEM_MARK
            safe = min(safe, open_pem)
        moved = True
        while moved:  # moving the cut back may put it inside an earlier match
            moved = False
            for _, end, _, anchor in spans:
                if anchor < safe < end:
                    safe, moved = anchor, True
        self.carry = buf[safe:]
        return _apply(buf[:safe], [s for s in spans if s[1] <= safe])

    def flush(self) -> bytes:
        buf, self.carry = self.carry, b""
        if self.in_pem:  # the rest of a key block that never ended
            self.in_pem = False
            return b""
        spans, _ = self.redactor.spans(buf, final=True)
        return _apply(buf, spans)

    def finish(self, after: bytes) -> bytes:
        """The rest, where the stream is cut off (the capture's head is full): ``after`` is
        what came next, seen only to find a secret that straddles the cut."""
        buf, self.carry = self.carry, b""
        if self.in_pem:
            self.in_pem = False
            return b""
        return redact_window(self.redactor, b"", buf, after)

    def _skip_pem(self, buf: bytes) -> bytes:
        if not self.in_pem:
            return buf
        _builtin()
        e = _pem[1].search(buf)
        if e is None:
            return buf[-64:]  # an END line split by a read is found next time
        self.in_pem = False
        return buf[e.start():]


def redact_window(redactor: Redactor, before: bytes, data: bytes, after: bytes) -> bytes:
    """``data`` redacted as it stood between ``before`` and ``after``, bytes that are not kept
    (where a bounded capture cuts the output): a secret that straddles either cut is found
    whole, and its part inside ``data`` hidden; a private key body whose BEGIN line was cut off
    is hidden up to its END line. Nothing else changes, so a cut without a secret is exact.
    Redacted SLICE bytes at a time, each piece ending at a line's end where it can, with
    CARRY bytes of its neighbours as context."""
    if len(data) <= SLICE:
        return _window(redactor, before[-CARRY:], data, after[:CARRY])
    out, at = [], 0
    while at < len(data):
        end = len(data) if len(data) - at <= SLICE else \
            (data.rfind(b"\n", at, at + SLICE) + 1 or at + SLICE)
        pre = data[max(0, at - CARRY):at] if at >= CARRY else before[-(CARRY - at):] + data[:at]
        post = data[end:end + CARRY] + (after[:CARRY] if end + CARRY > len(data) else b"")
        out.append(_window(redactor, pre, data[at:end], post))
        at = end
    return b"".join(out)


def _window(redactor: Redactor, before: bytes, data: bytes, after: bytes) -> bytes:
    buf = before + data + after
    spans, _ = redactor.spans(buf, final=True)
    lo, hi = len(before), len(before) + len(data)
    _builtin()
    begin, end = _pem
    e = end.search(buf, lo, hi)
    if e is not None and begin.search(buf, 0, e.start()) is None:  # its BEGIN is gone
        spans = _without_overlaps([*spans, (lo, e.start(), PEM_MARK.lstrip(), lo)])
    inside = [(max(start, lo) - lo, min(end_, hi) - lo, mark, 0)
              for start, end_, mark, _ in spans if start < hi and end_ > lo]
    return _apply(data, inside)
