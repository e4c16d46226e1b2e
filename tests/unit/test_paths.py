from pathlib import Path

from cronwrap.paths import resolve_dirs


def test_a_user_locks_where_cron_does_whatever_the_login_session_sets():
    """cron sets no XDG_RUNTIME_DIR; a shell does. Both must lock in one directory, or a job
    run by hand would not exclude the firing cron makes of it."""
    from_cron = resolve_dirs({"HOME": "/h"}, euid=1000)
    from_shell = resolve_dirs({"HOME": "/h", "XDG_RUNTIME_DIR": "/run/user/1000"}, euid=1000)
    assert from_cron == from_shell
    assert from_cron.locks == Path("/h/.local/state/cronwrap/locks")
