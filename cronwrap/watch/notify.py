"""Where ``cronwrap watch`` sends an alert: a shell command (``--notify``), a webhook
(``--notify-webhook``: JSON, with the ``text`` field Slack- and Mattermost-compatible incoming
webhooks show) and mail through the local ``sendmail`` (``--notify-mail``, as cron's own mail
goes). ``send`` returns None when the alert was delivered, else why not, in one line; it never
raises. Every notifier has an ``id`` that names it the same way on every watcher (its kind and a
hash of where it sends, never the URL itself, which may hold a token): the ledger keeps each
alert's sends by it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from email.message import EmailMessage
from email.policy import SMTP

from cronwrap import __version__
from cronwrap.model import iso, job_host
from cronwrap.record import TYPE_CHECKING, Record
from cronwrap.redact.redactor import url as redact_url
from cronwrap.run.hooks import credentials, one_line, run_hook
from cronwrap.run.jobenv import exec_values

if TYPE_CHECKING:
    from datetime import datetime

    from cronwrap.model import Alert
    from cronwrap.redact.redactor import Redactor

SEND_TIMEOUT = 30.0  # seconds a command, a webhook or sendmail may take
SENDMAIL = "/usr/sbin/sendmail"  # cron's own mail goes through it; found on PATH first


NOTIFY_VARIABLES = {
    "CRONWRAP_ALERT": "`late`, `failing`, `stuck`, `warning`, or `recovered` when the breach "
                      "it told of is over",
    "CRONWRAP_JOB": "the job name",
    "CRONWRAP_HOST": "the host of a host job's alert (`--scope host`); empty for a fleet job",
    "CRONWRAP_ALERT_TEXT": "one line for a person: what is wrong, and since when",
    "CRONWRAP_ALERT_DETAIL": "more lines, or nothing: a failure's output tail, redacted",
    "CRONWRAP_ALERT_KEY": "the breach's name, the same on every watcher and in its `recovered` "
                          "(kind, job, slot or run)",
    "CRONWRAP_SCHEDULED_AT": "the slot it is about, ISO 8601 in UTC, or empty",
    "CRONWRAP_RUN_ID": "the run it is about, or empty",
}


class Notifier(Record):
    """``kind``: notify, webhook or mail; ``target``: the command, URL or address."""

    kind: str
    target: str

    @property
    def id(self) -> str:
        digest = hashlib.sha256(f"{self.kind}\0{self.target}".encode()).hexdigest()[:16]
        return f"{self.kind}:{digest}"

    @property
    def shown(self) -> str:
        """How logs name it: a webhook by its scheme and host only, since incoming-webhook URLs
        carry their token in the path (Slack's /services/T…/B…/SECRET)."""
        if self.kind == "notify":  # its program, not its arguments: a token may be one
            return f"notify {self.target.split()[0]} …"
        if self.kind == "mail":
            return f"mail {self.target}"
        scheme, _, rest = redact_url(self.target).partition("://")
        return f"webhook {scheme}://{rest.split('/', 1)[0].rpartition('@')[2]}/…"

    def send(self, alert: Alert, now: datetime, redactor: Redactor) -> str | None:
        body = message(alert, now, redactor)
        try:
            if self.kind == "notify":
                return _command(self.target, body)
            if self.kind == "webhook":
                return _webhook(self.target, body)
            return _mail(self.target, body)
        except Exception as exc:  # a notifier's bug must never stop the watcher
            return f"{type(exc).__name__}: {one_line(exc)}"


def message(alert: Alert, now: datetime, redactor: Redactor) -> dict[str, object]:
    """The alert as every notifier sends it (the webhook's JSON body, documented in the README),
    each text redacted: what the run side kept was redacted with the job's own secrets, and
    the watcher's builtin patterns and its own secrets apply once more."""
    name, host = job_host(alert.job)
    text = redactor.text(alert.text)
    detail = redactor.text(alert.detail) if alert.detail else ""
    return {"text": f"[cronwrap] {text}" + (f"\n{detail}" if detail else ""),
            "kind": alert.kind, "job": name, "host": host,
            "scope": "fleet" if host is None else "host", "summary": text, "detail": detail,
            "slot": iso(alert.slot), "run_id": alert.run_id, "alert": alert.key, "at": iso(now)}


def _command(command: str, body: dict[str, object]) -> str | None:
    values = (body["kind"], body["job"], body["host"], body["summary"], body["detail"],
              body["alert"], body["slot"], body["run_id"])
    env = {**os.environ, **exec_values({name: "" if value is None else str(value)
                                        for name, value in zip(NOTIFY_VARIABLES, values)})}
    result = run_hook(command, env, SEND_TIMEOUT)
    if result.exit_code == 0:
        return None
    why = "timed out" if result.timed_out else f"exited {result.exit_code}"
    tail = one_line(result.output_tail) if result.output_tail.strip() else ""
    return f"{why}" + (f": {tail}" if tail else "")


def _webhook(url: str, body: dict[str, object]) -> str | None:
    plain, headers = credentials(url)
    headers.update({"Content-Type": "application/json", "User-Agent": f"cronwrap/{__version__}"})
    request = urllib.request.Request(plain, data=json.dumps(body).encode(), headers=headers,
                                     method="POST")
    opener = urllib.request.build_opener(urllib.request.HTTPRedirectHandler())
    try:
        with opener.open(request, timeout=SEND_TIMEOUT) as response:
            response.read(1024)
            return None
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code} {one_line(exc.reason)}"
    except urllib.error.URLError as exc:
        return one_line(exc.reason)
    except (OSError, ValueError) as exc:
        return one_line(exc)


def _mail(address: str, body: dict[str, object]) -> str | None:
    mail = EmailMessage(policy=SMTP)
    mail["To"] = address
    mail["Subject"] = f"[cronwrap] {body['kind']}: {body['job']}" + (
        f"@{body['host']}" if body["host"] else "")
    mail["Auto-Submitted"] = "auto-generated"
    mail.set_content(str(body["text"]).removeprefix("[cronwrap] ") + "\n")
    sendmail = _sendmail()
    if sendmail is None:
        return f"no sendmail (looked on PATH and at {SENDMAIL}): install a mail transfer agent"
    try:
        done = subprocess.run([sendmail, "-oi", "-t"], input=mail.as_bytes(),
                              capture_output=True, timeout=SEND_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return "sendmail timed out"
    if done.returncode != 0:
        return f"sendmail exited {done.returncode}: {one_line(done.stderr.decode(errors='replace'))}"
    return None


def _sendmail() -> str | None:
    found = shutil.which("sendmail")
    return found or (SENDMAIL if os.access(SENDMAIL, os.X_OK) else None)
