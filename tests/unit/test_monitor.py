"""Monitoring output from JobReports built by hand: Nagios check, Prometheus, textfile, picture."""

from __future__ import annotations

import math
import os
import re
import stat
from datetime import datetime, timedelta, timezone

import pytest
from prometheus_client.parser import text_string_to_metric_families

from cronwrap.errors import PathError
from cronwrap.model import DURATION_BUCKETS, JobSummary, Run, RunTally
from cronwrap.read import monitoring as monitor
from cronwrap.read.monitoring import check, prometheus, write_textfile
from cronwrap.read.picture import history_picture, sparkline
from cronwrap.read.report import CRITICAL, OK, WARNING, JobReport

UTC = timezone.utc
NOW = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
PERF = re.compile(r"^'[^']+'=-?[0-9.]+(s|%|B|KB|MB|TB|c)?;[0-9.]*;[0-9.]*;[0-9.]*;[0-9.]*$")


def run(job="settle", status="succeeded", *, ago=HOUR, duration=12.3, exit_code=0, run_id=1,
        lease=None, **kw) -> Run:
    slot = NOW - ago
    return Run(run_id=run_id, job=job, run_key=slot.isoformat(), scheduled_at=slot,
               trigger="schedule", status=status, started_at=slot,
               duration_ms=None if duration is None else int(duration * 1000),
               exit_code=exit_code, locked_until=None if lease is None else NOW + lease, **kw)


def summary(job="settle", **fields) -> JobSummary:
    """Every field of JobSummary, whatever it holds today: None unless given."""
    values = dict.fromkeys(JobSummary._fields)
    values.update(job=job, schedule="0 * * * *", tz="UTC", first_seen=NOW - 30 * HOUR,
                  last_seen=NOW - HOUR, running=[], counts={}, last_success_at=NOW - HOUR)
    values.update(fields)
    return JobSummary(**values)


def report(job="settle", last=None, health=OK, why="", missed=0, next_due_at=None, late=0,
           **fields) -> JobReport:
    last = run(job) if last is None else last
    fields.setdefault("last_run", last)
    if last.status == "running":
        fields.setdefault("running", [last])
    return JobReport(summary=summary(job, **fields), health=health, why=why, now=NOW,
                     missed=missed, late=late, next_due_at=next_due_at)


def perf_items(text: str) -> list[str]:
    return text.split(" | ", 1)[1].split(" ")


# -- check -------------------------------------------------------------------------------------

def test_all_ok():
    result = check([report("a"), report("b")], NOW)
    assert result.exit_code == 0
    assert result.text.startswith("CRONWRAP OK - 2 ok | ")


def test_no_jobs_is_unknown():
    result = check([], NOW)
    assert result.exit_code == 3 and result.text.startswith("CRONWRAP UNKNOWN - no jobs match")


@pytest.mark.parametrize("last, words", [
    (run(status="failed", exit_code=3), "settle failed (exit 3)"),
    (run(status="timeout", exit_code=None), "settle timeout"),
    (run(status="killed", exit_code=None, skip_reason="lease_lost"), "settle killed (lease_lost)"),
    (run(status="missed", duration=None, exit_code=None), "settle missed"),
])
def test_a_bad_last_run_is_critical(last, words):
    result = check([report(last=last), report("ok")], NOW)
    assert result.exit_code == 2
    assert result.text.startswith(f"CRONWRAP CRITICAL - 1 critical, 1 ok: {words} | ")


def test_late_slots_are_critical():
    result = check([report(missed=2, late=2)], NOW)
    assert result.exit_code == 2 and "settle late 2 slots" in result.text


def test_slots_missed_before_a_good_run_are_counted_not_critical():
    """Health describes the present (issue 22 §5): one missed minute must not page for the
    whole --since window once the job ran well again; the count stays in the perfdata."""
    result = check([report(missed=2)], NOW)
    assert result.exit_code == 0 and result.text.startswith("CRONWRAP OK - 1 ok | ")
    assert "'settle_missed'=2;;;0;" in perf_items(result.text)


def test_no_success_within_max_age_is_critical():
    rep = report(last_success_at=NOW - 26 * HOUR)
    assert check([rep], NOW, max_age=86400).exit_code == 2
    assert "settle no success for 1d2h (max age 1d0h)" in check([rep], NOW, max_age=86400).text
    assert check([rep], NOW, max_age=30 * 3600).exit_code == 0
    assert check([rep], NOW).exit_code == 0  # no --max-age, no such rule


def test_a_job_that_never_succeeded_gets_max_age_of_grace():
    young = report(last=run(status="running", duration=None, lease=HOUR), last_success_at=None,
                   first_seen=NOW - HOUR)
    old = report(last=run(status="running", duration=None, lease=HOUR), last_success_at=None,
                 first_seen=NOW - 48 * HOUR)
    assert check([young], NOW, max_age=86400).exit_code == 0
    result = check([old], NOW, max_age=86400)
    assert result.exit_code == 2 and "no success recorded" in result.text


def test_a_long_running_run_is_a_warning():
    rep = report(last=run(status="running", ago=2 * HOUR, duration=None, lease=HOUR))
    result = check([rep], NOW, warn_duration=3600)
    assert result.exit_code == 1
    assert "settle running for 2h00m (warn at 1h00m)" in result.text
    assert check([rep], NOW, warn_duration=3 * 3600).exit_code == 0


def test_a_run_past_its_usual_p95_is_a_warning():
    rep = report(last=run(status="running", ago=timedelta(minutes=40), duration=None, lease=HOUR))
    result = check([rep], NOW, usual_p95={"settle": 12 * 60})
    assert result.exit_code == 1
    assert "settle running for 40m00s, past its usual p95 of 12m00s" in result.text
    assert check([rep], NOW, usual_p95={"settle": 3600}).exit_code == 0
    assert check([rep], NOW, usual_p95={"other": 60}).exit_code == 0


def test_a_run_whose_lease_expired_is_not_live():
    rep = report(last=run(status="running", ago=5 * HOUR, duration=None, lease=-HOUR))
    assert check([rep], NOW, warn_duration=60).exit_code == 0


def test_what_assess_calls_a_warning_or_critical_is_kept():
    warn = report("w", health=WARNING, why="host h fired 120s after the slot: check its clock")
    crit = report("c", health=CRITICAL, why="late: 2 slots passed without a run")
    result = check([warn, crit], NOW)
    assert result.exit_code == 2
    assert ("CRONWRAP CRITICAL - 1 critical, 1 warning: c late: 2 slots passed without a run; "
            "w host h fired 120s after the slot: check its clock | ") in result.text


def test_a_pipe_in_a_reason_cannot_start_the_perfdata_early():
    text = check([report(health=WARNING, why="a | b")], NOW).text
    assert text.count("|") == 1 and "settle a / b |" in text


def test_the_summary_counts_states_and_names_the_worst_first():
    reports = [report("ok1"), report("slow", last=run("slow", "running", ago=2 * HOUR,
                                                      duration=None, lease=HOUR)),
               report("bad", last=run("bad", "failed", exit_code=3)),
               report("backup", last=run("backup", "timeout", exit_code=None))]
    result = check(reports, NOW, warn_duration=600)
    assert result.text.startswith("CRONWRAP CRITICAL - 2 critical, 1 warning, 1 ok: bad failed "
                                  "(exit 3); backup timeout; slow running for 2h00m")


def test_several_reasons_of_one_job_are_listed_together():
    result = check([report(last=run(status="failed", exit_code=1), missed=1, late=1)], NOW)
    assert "settle failed (exit 1), late 1 slot |" in result.text


def test_many_failures_are_counted_not_listed():
    reports = [report(f"j{i}", last=run(f"j{i}", "failed", exit_code=1)) for i in range(9)]
    result = check(reports, NOW)
    assert "j4 failed (exit 1); and 4 more |" in result.text and "j5 failed" not in result.text


def test_perfdata_syntax_and_thresholds():
    reports = [report("a"), report("b", missed=1, last_success_at=NOW - 2 * HOUR)]
    items = perf_items(check(reports, NOW, max_age=3600, warn_duration=60).text)
    assert all(PERF.match(item) for item in items), items
    assert "'a_duration'=12.3s;60;;0;" in items
    assert "'b_missed'=1;;;0;" in items
    assert "'b_since_success'=7200s;;3600;0;" in items


def test_perfdata_of_a_live_run_is_its_elapsed_time():
    rep = report(last=run(status="running", ago=timedelta(seconds=90), duration=None, lease=HOUR))
    assert "'settle_duration'=90s;;;0;" in perf_items(check([rep], NOW).text)


def test_perfdata_labels_are_quoted_and_escaped():
    assert monitor._perf("it's", 1.0, "s", None, None) == "'it''s'=1s;;;0;"


# -- prometheus --------------------------------------------------------------------------------

def parse(text: str) -> dict[str, object]:
    return {family.name: family for family in text_string_to_metric_families(text)}


def value(families, name, **labels) -> float:
    matches = [s.value for s in families[name].samples if s.labels == labels]
    assert len(matches) == 1, (name, labels, families[name].samples)
    return matches[0]


def test_prometheus_text_parses_back_with_every_report_family_a_gauge():
    live = run("etl", "running", ago=timedelta(minutes=5), duration=None, exit_code=None,
               lease=HOUR)
    reports = [
        report("settle", counts={"succeeded": 20, "failed": 2}),
        report("backup", last=run("backup", "failed", exit_code=3, duration=4.5, cpu_user_ms=1250,
                                  cpu_system_ms=250, max_rss_kb=2048), health=CRITICAL,
               missed=1, counts={"failed": 1, "weird": 4}, last_success_at=None),
        report("etl", last=live, next_due_at=NOW + HOUR),
    ]
    families = parse(prometheus(reports, NOW))
    for name, kind, _ in monitor.FAMILIES:
        if kind == monitor.GAUGE:
            assert families[name].type == "gauge" and families[name].documentation
    assert value(families, "cronwrap_last_run_timestamp_seconds", cronjob="settle") == \
        (NOW - HOUR).timestamp()
    assert value(families, "cronwrap_last_success_timestamp_seconds", cronjob="settle") == \
        (NOW - HOUR).timestamp()
    assert value(families, "cronwrap_last_run_duration_seconds", cronjob="backup") == 4.5
    assert value(families, "cronwrap_last_run_exit_code", cronjob="backup") == 3
    assert value(families, "cronwrap_last_run_cpu_seconds", cronjob="backup", mode="user") == 1.25
    assert value(families, "cronwrap_last_run_cpu_seconds", cronjob="backup", mode="system") == 0.25
    assert value(families, "cronwrap_last_run_max_rss_bytes", cronjob="backup") == 2 * 1024 * 1024
    assert "cronwrap_last_run_max_rss_bytes" not in [  # no figure: no series
        s.labels.get("cronjob") for s in families["cronwrap_last_run_max_rss_bytes"].samples
        if s.labels.get("cronjob") == "settle"]
    assert value(families, "cronwrap_runs_in_window", cronjob="settle", status="succeeded") == 20
    assert value(families, "cronwrap_runs_in_window", cronjob="settle", status="timeout") == 0
    assert value(families, "cronwrap_runs_in_window", cronjob="backup", status="weird") == 4
    assert value(families, "cronwrap_missed_slots", cronjob="backup") == 1
    assert value(families, "cronwrap_running", cronjob="etl") == 1
    assert value(families, "cronwrap_running", cronjob="settle") == 0
    assert value(families, "cronwrap_health", cronjob="backup") == 2
    assert value(families, "cronwrap_health", cronjob="settle") == 0
    assert value(families, "cronwrap_last_run_status", cronjob="backup", status="failed") == 1
    assert value(families, "cronwrap_next_due_timestamp_seconds", cronjob="etl") == \
        (NOW + HOUR).timestamp()


def test_unknown_values_are_left_out_not_invented():
    families = parse(prometheus([report("new", last_success_at=None,
                                        last=run("new", "running", duration=None,
                                                 exit_code=None, lease=HOUR))], NOW))
    names_with_new = {name for name, f in families.items()
                      if any(s.labels.get("cronjob") == "new" for s in f.samples)}
    assert "cronwrap_last_success_timestamp_seconds" not in names_with_new
    assert "cronwrap_last_run_duration_seconds" not in names_with_new
    assert "cronwrap_last_run_exit_code" not in names_with_new
    assert "cronwrap_last_run_timestamp_seconds" in names_with_new


def test_label_values_are_escaped():
    nasty = 'a"b\\c\nd'
    families = parse(prometheus([report(nasty, last=run(nasty))], NOW))
    assert value(families, "cronwrap_running", cronjob=nasty) == 0
    assert '\\"' in prometheus([report(nasty, last=run(nasty))], NOW)


def test_the_health_gauge_follows_the_report():
    families = parse(prometheus([report("w", health=WARNING)], NOW))
    assert value(families, "cronwrap_health", cronjob="w") == 1


def test_no_reports_is_an_empty_exposition():
    assert prometheus([], NOW) == ""
    assert list(text_string_to_metric_families("")) == []


def test_timestamps_keep_their_milliseconds():
    rep = report(last_success_at=NOW - timedelta(milliseconds=1500))
    families = parse(prometheus([rep], NOW))
    got = value(families, "cronwrap_last_success_timestamp_seconds", cronjob="settle")
    assert math.isclose(got, NOW.timestamp() - 1.5)


# -- write_textfile ----------------------------------------------------------------------------

def test_textfile_is_written_0644_whatever_the_umask(tmp_path):
    target = tmp_path / "cronwrap.prom"
    old = os.umask(0o077)
    try:
        write_textfile(target, "a 1\n")
    finally:
        os.umask(old)
    assert target.read_text() == "a 1\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert os.listdir(tmp_path) == ["cronwrap.prom"]


def test_textfile_replaces_by_rename(tmp_path):
    target = tmp_path / "cronwrap.prom"
    target.write_text("old\n")
    before = target.stat().st_ino
    write_textfile(target, "new 1\n")
    assert target.read_text() == "new 1\n" and target.stat().st_ino != before
    assert sorted(os.listdir(tmp_path)) == ["cronwrap.prom"]


def test_textfile_refuses_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep\n")
    link = tmp_path / "cronwrap.prom"
    link.symlink_to(victim)
    with pytest.raises(PathError, match="is a symlink"):
        write_textfile(link, "x 1\n")
    assert victim.read_text() == "keep\n" and link.is_symlink()


def test_textfile_in_a_missing_directory_is_a_path_error(tmp_path):
    with pytest.raises(PathError, match="cannot create a file in"):
        write_textfile(tmp_path / "nope" / "x.prom", "x 1\n")


def test_textfile_refuses_a_directory(tmp_path):
    with pytest.raises(PathError, match="not a regular file"):
        write_textfile(tmp_path, "x 1\n")


# -- history picture ---------------------------------------------------------------------------

def history() -> list[Run]:
    """Newest first, as Ledger.runs returns them."""
    statuses = [("succeeded", 10.0, 0), ("failed", 20.0, 3), ("timeout", 40.0, 124),
                ("skipped", None, None), ("missed", None, None), ("succeeded", 5.0, 0),
                ("killed", 1.0, 143)]
    runs = [run(status=s, duration=d, exit_code=c, ago=(len(statuses) - i) * HOUR, run_id=i + 1)
            for i, (s, d, c) in enumerate(statuses)]
    return runs[::-1]


def test_marks_run_oldest_to_newest_with_a_sparkline_under_them():
    picture = history_picture(history(), 60, NOW)
    marks, spark, legend = picture.lines
    assert marks == "✓✗T·○✓K"
    assert spark == "▃▅█  ▂▁"
    assert len(marks) == len(spark)
    assert legend.startswith("7 slots, oldest first  ✓ 2 ok  ✗ 1 failed (exit 3)  "
                             "T 1 timeout (exit 124)  K 1 killed (exit 143)")
    assert legend.endswith("█ = 40s")


def test_width_keeps_the_newest_slots():
    assert history_picture(history(), 3, NOW).lines[0] == "○✓K"


def test_styles_cover_every_mark_and_bar():
    picture = history_picture(history(), 60, NOW)
    for line in (0, 1):
        covered = sorted(i for l, a, b, _ in picture.spans if l == line for i in range(a, b))
        assert covered == list(range(7))
    styles = {(l, a): style for l, a, b, style in picture.spans}
    assert styles[(0, 0)] == "green" and styles[(0, 1)] == "red" and styles[(0, 3)] == "dim"


def test_a_running_row_without_a_live_lease_is_drawn_abandoned():
    runs = [run(status="running", duration=None, lease=-HOUR)]
    assert history_picture(runs, 10, NOW).lines[0] == "?"
    assert history_picture(runs, 10).lines[0] == "▶"


def test_no_runs():
    picture = history_picture([], 60, NOW)
    assert picture.lines == ["", "", "no runs in this window"]


def test_sparkline_scales_from_zero():
    assert sparkline([1.0, 2.0, 4.0, 8.0]) == "▂▃▅█"
    assert sparkline([0.0, 0.0]) == "▁▁"
    assert sparkline([None, 3.0]) == " █"
    assert sparkline([]) == ""


def test_the_picture_styles_its_marks():
    picture = history_picture(history(), 60, NOW)
    marks = picture.lines[0]
    styles = {marks[start]: style for line, start, end, style in picture.spans if line == 0}
    assert styles["✓"] == "green" and styles["✗"] == "red"


def test_no_series_has_a_job_label_which_prometheus_would_rename():
    families = parse(prometheus([report("settle", last=run("settle"))], NOW))
    labels = {key for f in families.values() for s in f.samples for key in s.labels}
    assert "job" not in labels and "cronjob" in labels


def test_counters_and_the_duration_histogram_come_from_the_ledger_s_tallies():
    tally = RunTally("settle", {"succeeded": 3, "failed": 1, "weird": 2}, timed=5,
                     duration_ms=90_061_500, buckets={1000: 1, 60_000: 2, 86_400_000: 1})
    text = prometheus([report("settle"), report("new")], NOW, {"settle": tally})
    assert "# TYPE cronwrap_runs_total counter" in text
    assert "# TYPE cronwrap_run_duration_seconds histogram" in text
    families = parse(text)
    runs = families["cronwrap_runs"]  # the parser names a counter's family without _total
    assert runs.type == "counter"
    totals = {(s.labels["cronjob"], s.labels["status"]): s.value for s in runs.samples
              if s.name == "cronwrap_runs_total"}
    assert totals[("settle", "succeeded")] == 3 and totals[("settle", "failed")] == 1
    assert totals[("settle", "weird")] == 2 and totals[("settle", "timeout")] == 0
    assert {status for job, status in totals if job == "new"} == set(monitor.FINAL_STATUSES)
    assert all(v == 0 for (job, _), v in totals.items() if job == "new")  # 0 before the first
    histogram = families["cronwrap_run_duration_seconds"]
    assert histogram.type == "histogram"
    buckets = {s.labels["le"]: s.value for s in histogram.samples
               if s.name.endswith("_bucket") and s.labels["cronjob"] == "settle"}
    assert list(buckets) == [*(repr(b) for b in DURATION_BUCKETS), "+Inf"]
    assert buckets["1.0"] == 1 and buckets["30.0"] == 1 and buckets["60.0"] == 3
    assert buckets["43200.0"] == 3 and buckets["86400.0"] == 4 and buckets["+Inf"] == 5
    sums = {s.name: s.value for s in histogram.samples if s.labels == {"cronjob": "settle"}}
    assert sums == {"cronwrap_run_duration_seconds_sum": 90_061.5,
                    "cronwrap_run_duration_seconds_count": 5}


def test_the_duration_buckets_grow_from_a_second_to_a_day():
    assert list(DURATION_BUCKETS) == sorted(set(DURATION_BUCKETS))
    assert DURATION_BUCKETS[0] == 1 and DURATION_BUCKETS[-1] == 86400


def test_a_paused_job_is_ok_whatever_its_last_run_and_says_until_when():
    from cronwrap.model import Pause
    from cronwrap.read.report import assess

    failed = run("settle", "failed", exit_code=3)
    pause = Pause("settle", NOW + HOUR, "bank holiday", "ops1", NOW - HOUR)
    health, why = assess(summary("settle", last_run=failed), NOW, missed=4, late=4,
                         pause=pause)
    assert (health, why) == (OK, "paused until 2026-03-02T13:00:00+00:00 (bank holiday)")
    paused = report("settle", last=failed, health=health, why=why,
                    last_success_at=NOW - 30 * HOUR).replace(pause=pause)
    result = check([paused, report("other")], NOW, max_age=2 * 3600.0)
    assert result.exit_code == 0
    assert f"settle {pause.describe()}" in result.text.split(" | ")[0]
    assert monitor.verdict(report("settle", last=failed, health=CRITICAL), NOW, None, None,
                           None).state == 2  # the same report unpaused is critical
    families = parse(prometheus([paused, report("other")], NOW))
    assert value(families, "cronwrap_paused", cronjob="settle") == 1
    assert value(families, "cronwrap_paused", cronjob="other") == 0
