#!/bin/sh
# Fetch a rates file from an HTTP API into RATES_OUT (atomically), and say with the exit
# status whether a failure is worth retrying — the contract cronwrap --retry-on reads:
#
#   0   fetched and written
#   75  transient (EX_TEMPFAIL): DNS, connection refused or reset, curl timeout, HTTP 429 or
#       5xx — the same request may well work in 30 seconds
#   1   permanent: any other HTTP status (401, 404…), or an empty body — retrying is useless,
#       a person must look
#
#   RATES_URL       what to fetch (required)
#   RATES_OUT       file to write (required); replaced only by a complete, non-empty download
#   RATES_MAX_TIME  curl --max-time in seconds (default 20)
set -u

: "${RATES_URL:?RATES_URL is not set}" "${RATES_OUT:?RATES_OUT is not set}"
tmp="$RATES_OUT.partial.$$"
trap 'rm -f "$tmp"' EXIT
trap 'exit 143' TERM

code=$(curl --silent --show-error --location --max-time "${RATES_MAX_TIME:-20}" \
            --output "$tmp" --write-out '%{http_code}' -- "$RATES_URL")
rc=$?
case $rc in
  0) ;;
  5|6|7|28|35|52|55|56)
     echo "fetch-rates: transient network error (curl exit $rc) for $RATES_URL" >&2
     exit 75 ;;
  *) echo "fetch-rates: curl exit $rc for $RATES_URL" >&2
     exit 1 ;;
esac
case $code in
  2??) ;;
  429|5??)
     echo "fetch-rates: HTTP $code (transient) from $RATES_URL" >&2
     exit 75 ;;
  *) echo "fetch-rates: HTTP $code from $RATES_URL: not retrying" >&2
     exit 1 ;;
esac
if [ ! -s "$tmp" ]; then
  echo "fetch-rates: empty body from $RATES_URL" >&2
  exit 1
fi
mv "$tmp" "$RATES_OUT"
echo "fetch-rates: $(wc -c < "$RATES_OUT") bytes into $RATES_OUT (attempt ${CRONWRAP_ATTEMPT:-?})"
