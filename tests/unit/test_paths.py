import os
from pathlib import Path

import pytest

from cronwrap.errors import PathError
from cronwrap.paths import check_existing, open_private, resolve_dirs


def test_a_user_locks_where_cron_does_whatever_the_login_session_sets():
    """cron sets no XDG_RUNTIME_DIR; a shell does. Both must lock in one directory, or a job
    run by hand would not exclude the firing cron makes of it."""
    from_cron = resolve_dirs({"HOME": "/h"}, euid=1000)
    from_shell = resolve_dirs({"HOME": "/h", "XDG_RUNTIME_DIR": "/run/user/1000"}, euid=1000)
    assert from_cron == from_shell
    assert from_cron.locks == "/h/.local/state/cronwrap/locks"


# -- the one-name rule for every file cronwrap writes (issue 20 §6) --------------------------

@pytest.mark.parametrize("flags", [os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                                   os.O_WRONLY | os.O_CREAT | os.O_APPEND, os.O_RDWR])
def test_a_file_opened_for_writing_must_have_one_name(tmp_path, flags):
    other = tmp_path / "other"
    other.write_bytes(b"kept\n")
    os.link(other, tmp_path / "mine")
    with pytest.raises(PathError, match="has 2 hard links"):
        open_private(tmp_path / "mine", flags)
    assert other.read_bytes() == b"kept\n"  # never truncated, never appended to


def test_a_file_opened_only_to_read_may_have_other_names(tmp_path):
    other = tmp_path / "other"
    other.write_bytes(b"kept\n")
    os.link(other, tmp_path / "mine")
    os.close(open_private(tmp_path / "mine", os.O_RDONLY))


def test_a_file_another_opener_writes_is_checked_by_its_name(tmp_path):
    other = tmp_path / "other"
    other.write_bytes(b"kept\n")
    check_existing(tmp_path / "missing")  # its opener creates it
    os.link(other, tmp_path / "linked")
    with pytest.raises(PathError, match="has 2 hard links"):
        check_existing(tmp_path / "linked")
    os.symlink(other, tmp_path / "symlink")
    with pytest.raises(PathError, match="symlink"):
        check_existing(tmp_path / "symlink")


def test_an_outbox_entry_is_never_written_through_another_name(tmp_path):
    from cronwrap.model import Finish, Run
    from cronwrap.run import outbox

    run = Run(run_id=7, job="j", run_key="k", scheduled_at=None, trigger="schedule",
              status="running", fence=3, host="h", pid=1, pid_start=2)
    result = Finish(status="succeeded", duration_ms=5, exit_code=0, signal=None, timed_out=False,
                    error_tail=None, log_path=None)
    other = tmp_path / "other"
    other.write_bytes(b"kept\n")
    box = tmp_path / "state" / "outbox"
    box.mkdir(parents=True, mode=0o700)
    os.link(other, box / f"{outbox.ledger_id(None)}-7-3.tmp")  # where spool writes first
    with pytest.raises(PathError, match="hard links"):
        outbox.spool(tmp_path / "state", None, run, result)
    assert other.read_bytes() == b"kept\n"
