"""cronwrap completion (issue 25 §2): the script bash sources, run as bash runs it on a few
partial lines, completing commands, options, fixed choices and job names from the ledger."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.conftest import CW


def complete(cw: CW, line: str, shell: str = "bash") -> list[str]:
    """What bash's completion function offers for ``line`` (the cursor at its end)."""
    script = cw("completion", shell, check_rc=0).stdout.decode()
    program = (script + '\nread -ra COMP_WORDS <<< "$LINE"\n'
               '[[ "$LINE" == *" " ]] && COMP_WORDS+=("")\n'
               'COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n'
               '_cronwrap\nprintf "%s\\n" "${COMPREPLY[@]}"\n')
    env = cw.env({"LINE": line, "PATH": f"{shutil.which('cronwrap').rpartition('/')[0]}:"
                                           f"{cw.env()['PATH']}"})
    done = subprocess.run(["bash", "-c", program], env=env, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return [w for w in done.stdout.decode().splitlines() if w]


@pytest.fixture
def jobs(cw):
    for name in ("settle", "backup.db", "cleanup-tmp"):
        cw("run", "-n", name, "--", "true", check_rc=0)
    cw("run", "-n", "rotate", "--scope", "host", "--host", "web1", "--", "true", check_rc=0)
    return cw


def test_commands_options_and_fixed_choices(cw):
    assert complete(cw, "cronwrap st") == ["status", "step"]
    assert complete(cw, "cronwrap sta") == ["status"]
    assert set(complete(cw, "cronwrap ")) >= {"run", "status", "watch", "pause", "db", "step",
                                              "completion", "--version"}
    assert complete(cw, "cronwrap db ") == ["init", "upgrade"]
    assert complete(cw, "cronwrap status --for") == ["--format"]
    assert complete(cw, "cronwrap status --format ") == ["table", "json", "prometheus"]
    assert complete(cw, "cronwrap run --over") == ["--overlap"]
    assert complete(cw, "cronwrap run --overlap ") == ["skip", "wait", "replace", "allow"]
    assert complete(cw, "cronwrap run --scope h") == ["host"]
    assert complete(cw, "cronwrap completion ") == ["bash", "zsh", "fish"]
    assert complete(cw, "cronwrap run -n x -- ech") == []  # the command's words: files


def test_job_names_come_from_the_ledger(jobs):
    assert complete(jobs, "cronwrap history ")[:4] == ["backup.db", "cleanup-tmp", "rotate",
                                                        "settle"]
    assert complete(jobs, "cronwrap logs cl") == ["cleanup-tmp"]
    assert complete(jobs, "cronwrap pause se") == ["settle"]
    assert complete(jobs, "cronwrap why se") == ["settle"]
    assert complete(jobs, "cronwrap why settle --a") == ["--at"]
    assert complete(jobs, "cronwrap run -n b") == ["backup.db"]
    assert "rotate" in complete(jobs, "cronwrap status r")  # a host job, by its name


def test_an_unreadable_ledger_completes_no_job_names_and_says_nothing(cw, tmp_path):
    assert complete(cw, f"cronwrap history --db sqlite:///{tmp_path}/none.db ") == \
        ["--limit", "--json", "--host", "--db", "--help"]


def test_zsh_and_fish_scripts(cw):
    assert "bashcompinit" in cw("completion", "zsh", check_rc=0).stdout.decode()
    fish = cw("completion", "fish", check_rc=0).stdout.decode()
    assert "complete -c cronwrap" in fish and "commandline -opc" in fish
    bad = cw("completion", "tcsh")
    assert bad.returncode == 125 and bad.stderr.count(b"\n") == 1


def test_help_is_h_everywhere_lists_the_version_and_errors_name_the_command_s_help(cw):
    top = cw("-h", check_rc=0).stdout.decode()
    assert "-V, --version" in top and "-h, --help" in top
    listing = top.split("Commands:", 1)[1]
    assert listing.count("(") == listing.count(")")  # no summary cut inside a parenthesis
    for command in (["status"], ["watch"], ["db", "init"], ["run"]):
        assert b"sage: cronwrap " + " ".join(command).encode() in \
            cw(*command, "-h", check_rc=0).stdout, command
    assert cw("-V", check_rc=0).stdout.startswith(b"cronwrap ")
    bad = cw("status", "--nope")
    assert bad.returncode == 125 and bad.stderr.endswith(b"(see cronwrap status --help)\n")


def test_help_shows_no_python_types_nor_64_bit_bounds(cw):
    for command in (["status"], ["logs"], ["history"], ["explain"], ["prune"], ["completion"]):
        text = cw(*command, "--help", check_rc=0).stdout.decode()
        assert "<str>" not in text and "<list[" not in text and "<int" not in text, command
        assert "<=x<=" not in text and "4611686018427387904" not in text, command
    assert "[1 or more]" in cw("logs", "--help", check_rc=0).stdout.decode()
    assert "1 to 100000" in cw("history", "--help", check_rc=0).stdout.decode()
