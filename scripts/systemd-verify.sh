#!/usr/bin/env bash
# systemd-verify.sh: check deploy/changeflow.service with systemd-analyze
# (used by `make test`): `verify` must print nothing (a unit systemd
# would reject or warn about fails), and `security` must rate the unit's
# exposure "OK" (at most 2.0 of 10) so the hardening cannot quietly erode,
# and MemoryMax, TasksMax and LimitNOFILE must be set.
# The binary path is pointed at bin/changeflow, since verify checks that
# ExecStart is executable. Without systemd-analyze it skips loudly, unless
# CHANGEFLOW_TEST_REQUIRE_SERVICES=1, where it fails.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v systemd-analyze >/dev/null 2>&1; then
  if [ "${CHANGEFLOW_TEST_REQUIRE_SERVICES:-}" = 1 ]; then
    echo "systemd-verify: systemd-analyze is required (apt-get install -y systemd)" >&2; exit 1
  fi
  echo "*** SKIPPING the systemd unit check: systemd-analyze not installed ***" >&2
  exit 0
fi
# The resource limits must stay set (a unit without them lets a leak or a
# flood take the host): each directive present with a value.
for d in MemoryMax TasksMax LimitNOFILE; do
  grep -Eq "^$d=[0-9]+[KMGT]?$" deploy/changeflow.service || { echo "systemd-verify: FAIL: deploy/changeflow.service sets no $d" >&2; exit 1; }
done
[ -x bin/changeflow ] || { echo "systemd-verify: bin/changeflow missing: run make build" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/changeflow-unit.XXXXXX")
trap 'rm -rf "$work"' EXIT
sed "s|/usr/local/bin/changeflow|$PWD/bin/changeflow|g" deploy/changeflow.service >"$work/changeflow.service"
out=$(systemd-analyze verify "$work/changeflow.service" 2>&1) || { echo "systemd-verify: FAIL"; echo "$out"; exit 1; }
[ -z "$out" ] || { echo "systemd-verify: FAIL, warnings:"; echo "$out"; exit 1; }
score=$(systemd-analyze security --offline=true "$work/changeflow.service" 2>/dev/null | sed -n 's/.*Overall exposure level for changeflow.service: \([0-9.]*\).*/\1/p')
[ -n "$score" ] || { echo "systemd-verify: FAIL: no exposure score from systemd-analyze security"; exit 1; }
awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || { echo "systemd-verify: FAIL: exposure $score > 2.0"; exit 1; }
echo "systemd-verify: ok — deploy/changeflow.service verifies cleanly, exposure $score (systemd-analyze security), MemoryMax/TasksMax/LimitNOFILE set"
