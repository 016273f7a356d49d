#!/usr/bin/env bash
# image-test.sh: build ./Containerfile with buildah and smoke-test the
# image (used by `make test`). Daemonless and registry-free: a throwaway
# vfs store under a temporary directory, chroot isolation, FROM scratch.
#
# Checks: the image runs as the non-root uid 65532 with `changeflow serve`
# as its entry point and a health check; the binary starts in it and
# serves; `changeflow healthcheck` (the image's health check) passes
# inside it; a named time zone resolves from the copied zoneinfo; the CA
# bundle is the build host's; the SQLite default lands in the writable
# working directory, owned by the non-root user; nothing is written
# outside it (what running with a read-only root filesystem needs).
#
# Without buildah it skips with a loud line, unless
# CHANGEFLOW_TEST_REQUIRE_SERVICES=1 (CI), where it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v buildah >/dev/null 2>&1; then
  if [ "${CHANGEFLOW_TEST_REQUIRE_SERVICES:-}" = 1 ]; then
    echo "image-test: buildah is required (apt-get install -y buildah)" >&2; exit 1
  fi
  echo "*** SKIPPING the container image test: buildah not installed (apt-get install -y buildah) ***" >&2
  exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/changeflow-image.XXXXXX")
B=(buildah --storage-driver vfs --root "$work/root" --runroot "$work/runroot")
ctr="" serve_pid=""
# kill_container ends what `buildah run` left: buildah itself (its
# command line names the throwaway store) and what it started in the
# container (its environment carries this run's listen address; the
# chroot's root is buildah's own mount, not under $work). Killing the
# backgrounded shell alone left buildah and changeflow serve running in
# the container after the test (seen after a CI run), holding the port.
kill_container() {
  local p
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    if tr '\0' ' ' 2>/dev/null <"$p/cmdline" | grep -qF -- "--root $work/root" ||
       { [ -n "${port:-}" ] && tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "CHANGEFLOW_SERVER_LISTEN=127.0.0.1:$port"; }; then
      kill -9 "${p#/proc/}" 2>/dev/null || true
    fi
  done
}
cleanup() {
  [ -n "$serve_pid" ] && kill "$serve_pid" >/dev/null 2>&1 && wait "$serve_pid" 2>/dev/null || true
  kill_container
  [ -n "$ctr" ] && "${B[@]}" umount "$ctr" >/dev/null 2>&1 || true
  [ -n "$ctr" ] && "${B[@]}" rm "$ctr" >/dev/null 2>&1 || true
  "${B[@]}" rmi --all --force >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT INT TERM
fail() { echo "image-test: FAIL $*" >&2; [ -f "$work/serve.log" ] && tail -20 "$work/serve.log" >&2; exit 1; }

scripts/image-context.sh "$work/ctx"
"${B[@]}" bud --isolation chroot --format docker --quiet -t localhost/changeflow:test "$work/ctx" >/dev/null

img=localhost/changeflow:test
user=$("${B[@]}" inspect --type image --format '{{.Docker.Config.User}}' "$img")
[ "$user" = "65532:65532" ] || fail "image user is '$user', want 65532:65532"
entry=$("${B[@]}" inspect --type image --format '{{.Docker.Config.Entrypoint}}' "$img")
[ "$entry" = "[/usr/local/bin/changeflow serve]" ] || fail "entry point is $entry"
health=$("${B[@]}" inspect --type image --format '{{.Docker.Config.Healthcheck.Test}}' "$img")
[ "$health" = "[CMD /usr/local/bin/changeflow healthcheck]" ] || fail "health check is '$health'"
size=$("${B[@]}" images --format '{{.Size}}' "$img" 2>/dev/null | head -1)

ctr=$("${B[@]}" from --quiet "$img")
run() { "${B[@]}" run --isolation chroot "$@"; }
run "$ctr" -- /usr/local/bin/changeflow version | grep -q '^changeflow ' || fail "changeflow version did not run in the image"

# The read-only root filesystem docs/deploy.md runs the image with:
# buildah has no --read-only, so the test proves what it rests on — serve
# writes nothing outside the working directory /data (the volume). A
# marker's time before the start; afterwards no file outside /data is
# newer.
mnt0=$("${B[@]}" mount "$ctr")
touch "$work/marker"
sleep 1
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
run --env CHANGEFLOW_SERVER_LISTEN="127.0.0.1:$port" --env CHANGEFLOW_ACCESS_TIMEZONE=Europe/Berlin \
  "$ctr" -- /usr/local/bin/changeflow serve >"$work/serve.log" 2>&1 &
serve_pid=$!
ok=""
for _ in $(seq 1 120); do
  if run --env CHANGEFLOW_SERVER_LISTEN="127.0.0.1:$port" "$ctr" -- /usr/local/bin/changeflow healthcheck >/dev/null 2>&1; then ok=1; break; fi
  kill -0 "$serve_pid" 2>/dev/null || fail "changeflow serve exited in the image"
  sleep 0.5
done
[ -n "$ok" ] || fail "changeflow healthcheck never passed inside the image"
grep -q '"serving"' "$work/serve.log" || fail "no serving line in the log"
if grep '"config: item fell back"' "$work/serve.log" | grep -q 'access.timezone'; then
  fail "access.timezone Europe/Berlin fell back: the image's zoneinfo is missing or unreadable"
fi

mnt=$("${B[@]}" mount "$ctr")
[ "$mnt" = "$mnt0" ] || fail "the container's root moved between mounts"
written=$(cd "$mnt" && find . -xdev -newer "$work/marker" ! -path './data' ! -path './data/*' ! -type d 2>/dev/null | head -5)
[ -z "$written" ] || fail "serve wrote outside /data, so a read-only root would break it: $written"
cmp -s "$mnt/etc/ssl/certs/ca-certificates.crt" /etc/ssl/certs/ca-certificates.crt || fail "CA bundle differs from the build host's"
owner=$(stat -c %u "$mnt/data/var/changeflow.db" 2>/dev/null || echo missing)
[ "$owner" = 65532 ] || fail "the SQLite database in /data/var is owned by '$owner', want the non-root uid 65532"

kill "$serve_pid" 2>/dev/null || true
wait "$serve_pid" 2>/dev/null || true
serve_pid=""
kill_container
sleep 0.5
left=$(for p in /proc/[0-9]*; do tr '\0' '\n' 2>/dev/null <"$p/environ" | grep -qxF "CHANGEFLOW_SERVER_LISTEN=127.0.0.1:$port" && echo "${p#/proc/}"; done || true)
[ -z "$left" ] || fail "processes still running in the container after the test: $left"
echo "image-test: ok — FROM scratch image ($size) runs changeflow serve as 65532, health check passes, zoneinfo and CA bundle present, nothing written outside /data"
