#!/usr/bin/env bash
# Smoke test of the web app's cache and fallback rules (docs/webapp.md)
# against a running server: every header and status code a release
# depends on. Usage: scripts/smoke-static.sh [BASE_URL]
# (default http://127.0.0.1:8080, the local run). Exits non-zero on the
# first mismatch. The browser tests run it against their server.
set -euo pipefail
BASE="${1:-http://127.0.0.1:8080}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
HTML='text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8'
fails=0

# fetch PATH ACCEPT [ACCEPT_ENCODING]: status in $status, headers in $tmp/h, body in $tmp/b
fetch() {
  status=$(curl -s -o "$tmp/b" -D "$tmp/h" -w '%{http_code}' -H "Accept: $2" ${3:+-H "Accept-Encoding: $3"} "$BASE$1")
}
header() { grep -i "^$1:" "$tmp/h" | head -1 | cut -d' ' -f2- | tr -d '\r'; }
check() { # name got want
  if [ "$2" = "$3" ]; then echo "ok   $1"; else echo "FAIL $1: got '$2', want '$3'"; fails=$((fails + 1)); fi
}

fetch / "$HTML"
check "/ status" "$status" 200
check "/ Cache-Control" "$(header Cache-Control)" "no-store"
check "/ Content-Type" "$(header Content-Type)" "text/html; charset=utf-8"
asset=$(grep -o '/assets/[^"]*\.js' "$tmp/b" | head -1)
css=$(grep -o '/assets/[^"]*\.css' "$tmp/b" | head -1)
[ -n "$asset" ] || { echo "FAIL the entry page names no script"; exit 1; }

fetch "$asset" '*/*'
check "script status" "$status" 200
check "script Cache-Control" "$(header Cache-Control)" "public, max-age=31536000, immutable"
check "script Content-Type" "$(header Content-Type)" "text/javascript; charset=utf-8"
fetch "$asset" '*/*' 'gzip, br'
check "script Content-Encoding with gzip accepted" "$(header Content-Encoding)" "gzip"
if [ -n "$css" ]; then
  fetch "$css" 'text/css,*/*;q=0.1'
  check "stylesheet Content-Type" "$(header Content-Type)" "text/css; charset=utf-8"
  check "stylesheet Cache-Control" "$(header Cache-Control)" "public, max-age=31536000, immutable"
fi

fetch /assets/missing-abc123.js '*/*'
check "missing asset status" "$status" 404
check "missing asset Cache-Control" "$(header Cache-Control)" "no-store"
check "missing asset Content-Type" "$(header Content-Type)" "application/json; charset=utf-8"
check "missing asset code" "$(grep -o '"code":"[A-Z_]*"' "$tmp/b")" '"code":"NOT_FOUND"'

fetch /requests/some-operation "$HTML"
check "client route status" "$status" 200
check "client route Cache-Control" "$(header Cache-Control)" "no-store"
check "client route Content-Type" "$(header Content-Type)" "text/html; charset=utf-8"

fetch /assets/some-directory "$HTML"
check "navigation to a missing asset path gets the fallback page" "$status" 200
check "fallback page Cache-Control" "$(header Cache-Control)" "no-store"

fetch /requests/some-operation 'application/json'
check "non-navigation to a page path status" "$status" 404
check "non-navigation Cache-Control" "$(header Cache-Control)" "no-store"

fetch /api/no-such-endpoint "$HTML"
check "unknown API path stays the API's 404" "$status" 404
check "unknown API path code" "$(grep -o '"code":"[A-Z_]*"' "$tmp/b")" '"code":"NOT_FOUND"'

if [ "$fails" -gt 0 ]; then echo "$fails check(s) failed against $BASE"; exit 1; fi
echo "all static-asset checks passed against $BASE"
