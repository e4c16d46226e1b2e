"""A real Prometheus (Debian's prometheus, its own process, config, port and storage) scrapes
``cronwrap serve``'s ``/metrics`` with the token from a file, as the README says to, and the
series are asked for through its HTTP API with the labels an operator's rules use. tests/run.sh
installs Prometheus when it is missing; under CI=true a missing Prometheus fails the test
instead of skipping it."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest

from tests.acceptance.dashboard import Server, fetch
from tests.needs import missing

TOKEN = "prometheus-scrapes-with-this-t0ken"
SCRAPE_WAIT = 90.0  # seconds for Prometheus to start and take its first scrapes (1 s apart)


@pytest.fixture(scope="module")
def prometheus_bin() -> str:
    found = shutil.which("prometheus") or shutil.which("prometheus", path="/usr/sbin:/usr/bin")
    if found is None:
        missing("no prometheus (Debian's prometheus package; tests/run.sh installs it)",
                "Prometheus tests")
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """A prometheus process scraping ``target`` (HOST:PORT) every second with the bearer
    token of ``token_file``; ``query`` asks its HTTP API."""

    def __init__(self, binary: str, tmp_path: Path, target: str, token_file: Path) -> None:
        config = tmp_path / "prometheus.yml"
        config.write_text(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
            "scrape_configs:\n"
            "  - job_name: cronwrap\n"
            "    authorization:\n"
            f"      credentials_file: {token_file}\n"
            "    static_configs:\n"
            f"      - targets: ['{target}']\n")
        self.url = f"http://127.0.0.1:{free_port()}"
        self.log = tmp_path / "prometheus.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address={self.url.removeprefix('http://')}"],
                stdout=log, stderr=subprocess.STDOUT, cwd=tmp_path)

    def query(self, promql: str) -> list[dict]:
        """The instant vector ``promql`` selects now; [] while Prometheus is not up yet."""
        try:
            reply = fetch(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}",
                          timeout=10)
        except OSError:  # not listening yet
            return []
        assert reply.status == 200, reply.text
        answer = json.loads(reply.body)
        assert answer["status"] == "success", answer
        return answer["data"]["result"]

    def wait(self, promql: str) -> list[dict]:
        """``query`` polled until it selects something: the first scrape is there."""
        deadline = time.monotonic() + SCRAPE_WAIT
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            found = self.query(promql)
            if found:
                return found
            time.sleep(0.2)
        raise AssertionError(f"Prometheus never had {promql} within {SCRAPE_WAIT} s; "
                             f"targets: {self.targets()}; log: {self.log.read_text()[-2000:]}")

    def targets(self) -> object:
        try:
            return json.loads(fetch(f"{self.url}/api/v1/targets", timeout=10).body)
        except OSError as exc:
            return exc

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def scraped(cw, tmp_path, prometheus_bin):
    """A ledger with a job that succeeds, one that fails and one that warns, ``serve`` over it
    with a token file, and a Prometheus scraping it."""
    cw("run", "-n", "settle", "--", "true", check_rc=0)
    cw("run", "-n", "settle", "--force", "--", "true", check_rc=0)  # its slot again, or the next
    cw("run", "-n", "backup", "--", "sh", "-c", "sleep 0.2; exit 3", check_rc=3)
    cw("run", "-n", "grep", "--warning-exit", "1", "--", "sh", "-c", "exit 1", check_rc=1)
    token_file = tmp_path / "serve.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    server = Server(cw, "--token-file", str(token_file), token=TOKEN)
    prometheus = Prometheus(prometheus_bin, tmp_path,
                            urllib.parse.urlsplit(server.url).netloc, token_file)
    try:
        yield prometheus
    finally:
        prometheus.stop()
        server.stop()


def values(result: list[dict]) -> dict[str, float]:
    return {s["metric"]["cronjob"]: float(s["value"][1]) for s in result}


def test_prometheus_scrapes_serve_and_finds_each_job_by_its_cronjob_label(scraped):
    (backup,) = scraped.wait('cronwrap_health{cronjob="backup"}')
    assert float(backup["value"][1]) == 2
    labels = backup["metric"]
    assert labels["job"] == "cronwrap" and "exported_job" not in labels  # the scrape's own job
    assert values(scraped.query("cronwrap_health")) == {"settle": 0, "backup": 2, "grep": 1}
    assert values(scraped.query('cronwrap_last_run_exit_code{cronjob="backup"}')) == \
        {"backup": 3}
    assert scraped.query('up{job="cronwrap"}')[0]["value"][1] == "1"  # the token was taken
    assert scraped.query("count(cronwrap_health > 1)")[0]["value"][1] == "1"  # README's alert


def test_prometheus_reads_the_counters_and_the_duration_histogram(scraped):
    """The counters count every end (a forced run of a slot rewrites its row, and counts
    again): both settle runs succeeded, backup failed once; each run that ran is in the
    histogram's +Inf bucket."""
    scraped.wait('cronwrap_runs_total{cronjob="settle",status="succeeded"}')
    succeeded = scraped.query('cronwrap_runs_total{status="succeeded"}')
    assert values(succeeded) == {"settle": 2, "backup": 0, "grep": 0}
    assert values(scraped.query('cronwrap_runs_total{status="failed"}'))["backup"] == 1
    counted = values(scraped.query('cronwrap_run_duration_seconds_count'))
    assert counted == {"settle": 2, "backup": 1, "grep": 1}
    slow = scraped.query('cronwrap_run_duration_seconds_bucket{cronjob="backup",le="1.0"}')
    assert [float(s["value"][1]) for s in slow] in ([0.0], [1.0])  # slept 0.2 s, by the clock
    assert scraped.query('histogram_quantile(0.5, cronwrap_run_duration_seconds_bucket'
                         '{cronjob="settle"})')  # a histogram Prometheus can take apart
