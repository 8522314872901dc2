#!/usr/bin/env bash
# promtool, from Debian's prometheus package unpacked into .cache/promtool (not installed: no Prometheus server runs
# here). Prometheus 2.42, Debian 12's; any other version is refused.
#
#   tests/lab/promtool.sh <promtool arguments>      e.g. test rules tests/prometheus/gpucluster-fabric.test.yml
set -euo pipefail

wanted=2.42.
root=$(cd "$(dirname "$0")/../.." && pwd)
dir=$root/.cache/promtool
promtool=$dir/usr/bin/promtool
if [[ ! -x "$promtool" ]]; then
  rm -rf "$dir" && mkdir -p "$dir/download"
  (cd "$dir/download" && { apt-get download prometheus >/dev/null 2>&1 || { apt-get update -q >/dev/null &&
    apt-get download prometheus >/dev/null; }; })
  dpkg-deb -x "$dir"/download/prometheus_*.deb "$dir"
  rm -rf "$dir/download"
fi
version=$("$promtool" --version 2>&1 | sed -n 's/^promtool, version \([^ ]*\).*/\1/p')
[[ "$version" == "$wanted"* ]] || { echo "promtool.sh: promtool $version, not $wanted*" >&2; exit 1; }
exec "$promtool" "$@"
