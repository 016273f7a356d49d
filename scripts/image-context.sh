#!/usr/bin/env bash
# image-context.sh DIR: stage the build context of ./Containerfile in DIR
# from bin/changeflow (make build) and the build host's CA bundle and
# time-zone database, so that `buildah bud DIR` needs no registry.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:?usage: scripts/image-context.sh DIR}
ca=/etc/ssl/certs/ca-certificates.crt
tz=/usr/share/zoneinfo
[ -x bin/changeflow ] || { echo "image-context: bin/changeflow missing: run make build" >&2; exit 1; }
[ -f "$ca" ] || { echo "image-context: $ca missing: apt-get install -y ca-certificates" >&2; exit 1; }
[ -d "$tz" ] || { echo "image-context: $tz missing: apt-get install -y tzdata" >&2; exit 1; }
# A dynamically linked binary would not start in an image without libc.
if command -v file >/dev/null 2>&1 && file bin/changeflow | grep -q 'dynamically linked'; then
  echo "image-context: bin/changeflow is dynamically linked; build it with make build (CGO_ENABLED=0)" >&2; exit 1
fi
mkdir -p "$dir/data"
cp Containerfile "$dir/Containerfile"
cp bin/changeflow "$dir/changeflow"
cp -L "$ca" "$dir/ca-certificates.crt"
# -L: Debian's zoneinfo has symlinks (posix/, right/); copy real files so
# the image does not depend on the host's layout.
cp -rL "$tz" "$dir/zoneinfo"
