#!/usr/bin/env bash
# Print the Debian archive URL this machine's apt is configured with (deb822 or one-line format),
# so lab images come from the same mirror without writing a host name into the repository.
set -euo pipefail
shopt -s nullglob
for f in /etc/apt/sources.list.d/*.sources; do
  url=$(awk '/^URIs:/ {print $2; exit}' "$f")
  if [[ -n "$url" && "$url" != *security* ]]; then echo "${url%/}"; exit 0; fi
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [[ -f "$f" ]] || continue
  url=$(awk '$1 == "deb" && $0 !~ /security/ {for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) {print $i; exit}}' "$f")
  if [[ -n "$url" ]]; then echo "${url%/}"; exit 0; fi
done
echo "no Debian mirror found in /etc/apt; set LAB_DEBIAN_MIRROR" >&2
exit 1
