#!/bin/sh
# Minutely poller under cronwrap: hand every file waiting in POLL_INBOX to POLL_HANDLER, oldest
# first, and move it to POLL_DONE once handled.
#
#   POLL_INBOX    directory to poll (required)
#   POLL_DONE     where handled files go (default: $POLL_INBOX/../done)
#   POLL_HANDLER  command run as `$POLL_HANDLER FILE` (default: cat); non-zero: the file
#                 goes back to the inbox and the poll exits 75 (EX_TEMPFAIL), to be retried
#   POLL_MAX      at most this many files per poll (default 100), so one run stays short
#
# Each file is first renamed into a private work directory: a rename is atomic, so even two
# pollers that somehow ran at once (another host, --overlap allow) never handle one file twice.
set -eu

: "${POLL_INBOX:?POLL_INBOX is not set}"
done_dir=${POLL_DONE:-$POLL_INBOX/../done}
handler=${POLL_HANDLER:-cat}
max=${POLL_MAX:-100}
work="$POLL_INBOX/.work.$$"
mkdir -p "$done_dir" "$work"

# On TERM (cronwrap --timeout) or any exit, files not handled yet go back to the inbox.
give_back() {
  for f in "$work"/* "$work"/.[!.]*; do
    [ -e "$f" ] && mv "$f" "$POLL_INBOX/"
  done
  rmdir "$work" 2>/dev/null || true
}
trap give_back EXIT
trap 'exit 143' TERM
trap 'exit 130' INT

handled=0
# oldest first; names with newlines are not supported by this example
for name in $(ls -tr "$POLL_INBOX"); do
  [ "$handled" -lt "$max" ] || break
  [ -f "$POLL_INBOX/$name" ] || continue
  mv "$POLL_INBOX/$name" "$work/$name" 2>/dev/null || continue   # taken by someone else
  if $handler "$work/$name"; then
    mv "$work/$name" "$done_dir/$name"
    handled=$((handled + 1))
  else
    status=$?
    echo "poll: $handler $name failed ($status); it stays in the inbox" >&2
    exit 75
  fi
done
echo "poll: handled $handled file(s)"
