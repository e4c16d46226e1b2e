"""What must never be shown: secrets in what cronwrap prints, logs or stores.

Kept apart and light (no imports), so that the modules that print a URL — the ledger's label
on every PostgreSQL firing, pings — do not pay for each other's imports.
"""

from __future__ import annotations


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
