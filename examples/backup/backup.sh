#!/bin/sh
# Nightly backup under cronwrap: a pg_dump of one database and a tar of some directories,
# into BACKUP_DIR/YYYY-MM-DD/, written aside and renamed into place, then old days pruned.
#
#   BACKUP_DIR        where backups go (required)
#   BACKUP_DATABASE   libpq connection string or database name to pg_dump (empty: no dump);
#                     the password belongs in ~/.pgpass, not here (pg_dump's argv is visible)
#   BACKUP_PATHS      space-separated files or directories to tar (empty: none)
#   BACKUP_KEEP_DAYS  days of backups to keep (default 14)
#
# The day is CRONWRAP_BIZ_DATE (the slot's day), so re-running a night (cronwrap --force, or
# --date with --schedule) replaces that night's backup instead of adding one dated today.
# Under cronwrap --timeout, TERM reaches pg_dump and tar too (the whole process tree); the
# partial directory is removed and the previous backup of the day, if any, stays.
set -eu

: "${BACKUP_DIR:?BACKUP_DIR is not set}"
if [ -z "${BACKUP_DATABASE:-}" ] && [ -z "${BACKUP_PATHS:-}" ]; then
  echo "backup: nothing to back up (set BACKUP_DATABASE and/or BACKUP_PATHS)" >&2
  exit 64
fi
day=${CRONWRAP_BIZ_DATE:-$(date +%F)}
keep=${BACKUP_KEEP_DAYS:-14}
dest="$BACKUP_DIR/$day"
work="$BACKUP_DIR/.$day.partial.$$"

cleanup() { rm -rf "$work"; }
trap cleanup EXIT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 130' INT

mkdir -p "$work"
echo "backup $day: into $dest (run ${CRONWRAP_RUN_ID:-?}, attempt ${CRONWRAP_ATTEMPT:-?})"

if [ -n "${BACKUP_DATABASE:-}" ]; then
  echo "pg_dump…"
  pg_dump --format=custom --no-password --file="$work/database.dump" --dbname="$BACKUP_DATABASE"
  pg_restore --list "$work/database.dump" > /dev/null   # readable, or this run fails
fi

if [ -n "${BACKUP_PATHS:-}" ]; then
  echo "tar $BACKUP_PATHS…"
  # shellcheck disable=SC2086  # the list is split on purpose
  tar -czf "$work/files.tar.gz" $BACKUP_PATHS
  tar -tzf "$work/files.tar.gz" > /dev/null
fi

(cd "$work" && sha256sum -- * > SHA256SUMS)

# Into place: the old backup of the same day goes only once the new one is complete.
if [ -d "$dest" ]; then
  mv "$dest" "$work.old"
fi
mv "$work" "$dest"
rm -rf "$work.old"

# Retention: whole days older than BACKUP_KEEP_DAYS.
find "$BACKUP_DIR" -mindepth 1 -maxdepth 1 -type d -name '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]' \
  -mtime "+$keep" -exec rm -rf {} +

echo "backup $day: done, $(du -sk "$dest" | cut -f1) KiB"
