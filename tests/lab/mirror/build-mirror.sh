#!/usr/bin/env bash
# Build the lab's NVIDIA-style CUDA apt mirror from scratch (nothing prebuilt is committed).
#
#   build-mirror.sh <url>     <url> = where the mirror will be served, e.g. http://10.89.79.1:8642
#
# Prints the cache directory holding the result:
#   <cache>/www/<variant>/compute/cuda/repos/<distro>/<arch>/   one flat apt repository each, like NVIDIA's
#       cuda-keyring_1.1-1_all.deb   keyring + cuda-<distro>-<arch>.list (pointing at this variant) + pin-600
#       libnccl2_<v>-1+cuda<c>_amd64.deb, libnccl-dev_<v>-1+cuda<c>_amd64.deb (NVIDIA's real libnccl.so.2
#       and headers, taken from PyPI's nvidia-nccl-cu12 wheels listed in wheels.txt)
#       Packages, Packages.gz, Release, InRelease, Release.gpg
#   <cache>/mirror.json   url, fingerprints, variants, distros, NCCL builds (read by the Molecule scenarios)
#
# Variants (each served under <url>/<variant>):
#   signed    Release signed by the lab key; the keyring package holds the lab key (the good mirror)
#   unsigned  no InRelease/Release.gpg (bad-input test: unsigned mirror)
#   wrongkey  Release signed by a second key the keyring does not hold (bad-input test: wrong signer)
#
# The result is cached under $LAB_MIRROR_CACHE (default /var/tmp/gpucluster-lab-mirror) by a hash of this
# recipe (this script, wheels.txt, distros.txt) and <url>; an unchanged recipe reuses the cached build.
# Needs: dpkg-deb (dpkg), apt-ftparchive (apt-utils), gpg (gnupg), python3 with pip (PyPI reachable).
set -euo pipefail

url=${1:?usage: build-mirror.sh <url, e.g. http://10.89.79.1:8642>}
url=${url%/}
here=$(cd "$(dirname "$0")" && pwd)
cache_root=${LAB_MIRROR_CACHE:-/var/tmp/gpucluster-lab-mirror}
variants=(signed unsigned wrongkey)

recipe_hash=$( (cat "$here/build-mirror.sh" "$here/wheels.txt" "$here/distros.txt" && echo "$url") | sha256sum | cut -c1-12)
out="$cache_root/$recipe_hash"
if [[ -f "$out/mirror.json" ]]; then
  echo "$out"
  exit 0
fi

# Only a build needs them (a cached mirror is served by any machine with python3: the matrix's trixie controller).
for tool in dpkg-deb apt-ftparchive gpg; do
  command -v "$tool" >/dev/null || {
    echo "build-mirror.sh: $tool not found (Debian packages: dpkg, apt-utils, gnupg)" >&2
    exit 1
  }
done

# pip: the project's venv when there is one, else python3's.
pip_python=${LAB_MIRROR_PYTHON:-}
if [[ -z "$pip_python" ]]; then
  for candidate in "$here/../../../.venv/bin/python" python3; do
    if "$candidate" -m pip --version >/dev/null 2>&1; then
      pip_python=$candidate
      break
    fi
  done
fi
[[ -n "$pip_python" ]] || {
  echo "build-mirror.sh: no python with pip found; set LAB_MIRROR_PYTHON" >&2
  exit 1
}

mkdir -p "$cache_root"
work=$(mktemp -d "$cache_root/build-$recipe_hash.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GNUPGHOME="$work/gnupg"
mkdir -m 0700 "$GNUPGHOME"

log() { echo "build-mirror: $*" >&2; }

# --- wheels (hash-pinned; downloaded once, kept in the cache) -----------------------------------------------
wheels="$cache_root/wheels"
mkdir -p "$wheels"
log "downloading NCCL wheels (hash-checked) with $pip_python"
# One requirement at a time: pip refuses two versions of one project in a single resolve.
grep -v '^\s*#' "$here/wheels.txt" | grep . | while read -r requirement; do
  printf '%s\n' "$requirement" >"$work/requirement.txt"
  "$pip_python" -m pip download --quiet --no-deps --only-binary=:all: --platform manylinux2014_x86_64 \
    --python-version 3.11 --require-hashes -r "$work/requirement.txt" -d "$wheels" >&2
done

# --- keys: the lab key (what cuda-keyring ships) and a stranger key (signs the wrongkey variant) -------------
gen_key() {
  gpg --batch --quiet --passphrase '' --quick-gen-key "$1" rsa3072 sign never 2>/dev/null
  gpg --batch --quiet --with-colons --list-keys "$1" 2>/dev/null | awk -F: '$1 == "fpr" {print $10; exit}'
}
lab_fpr=$(gen_key "gpucluster lab CUDA mirror <lab-mirror@localhost.invalid>")
stranger_fpr=$(gen_key "gpucluster lab stranger key <lab-stranger@localhost.invalid>")
gpg --batch --export "$lab_fpr" >"$work/cuda-archive-keyring.gpg"
log "lab key $lab_fpr, stranger key $stranger_fpr"

# --- libnccl2 / libnccl-dev from each wheel ----------------------------------------------------------------
pool="$work/pool"
mkdir -p "$pool"
builds=()
for whl in "$wheels"/nvidia_nccl_cu12-*.whl; do
  wheel_version=$(basename "$whl" | cut -d- -f2)
  grep -q "^nvidia-nccl-cu12==$wheel_version " "$here/wheels.txt" || continue
  x="$work/x-$wheel_version"
  python3 -m zipfile -e "$whl" "$x"
  lib="$x/nvidia/nccl/lib/libnccl.so.2"
  inc="$x/nvidia/nccl/include"
  major=$(awk '/#define NCCL_MAJOR/ {print $3}' "$inc/nccl.h")
  minor=$(awk '/#define NCCL_MINOR/ {print $3}' "$inc/nccl.h")
  patch=$(awk '/#define NCCL_PATCH/ {print $3}' "$inc/nccl.h")
  nccl="$major.$minor.$patch"
  # The library announces its own build: "NCCL version 2.21.5+cuda12.4".
  cuda=$(grep -a -o -m1 "NCCL version $nccl+cuda[0-9]*\.[0-9]*" "$lib" | head -n1 | sed 's/.*+cuda//')
  [[ -n "$cuda" ]] || {
    echo "build-mirror.sh: cannot read the CUDA build of $whl" >&2
    exit 1
  }
  debver="$nccl-1+cuda$cuda"
  builds+=("$nccl $cuda $debver")
  log "packaging NCCL $debver"

  rt="$work/deb-libnccl2-$debver"
  mkdir -p "$rt/DEBIAN" "$rt/usr/lib/x86_64-linux-gnu" "$rt/usr/share/doc/libnccl2"
  install -m 0644 "$lib" "$rt/usr/lib/x86_64-linux-gnu/libnccl.so.$nccl"
  ln -s "libnccl.so.$nccl" "$rt/usr/lib/x86_64-linux-gnu/libnccl.so.2"
  install -m 0644 "$x"/nvidia_nccl_cu12-*.dist-info/License.txt "$rt/usr/share/doc/libnccl2/copyright"
  cat >"$rt/DEBIAN/control" <<EOF
Package: libnccl2
Source: nccl
Version: $debver
Architecture: amd64
Maintainer: gpucluster lab mirror <lab-mirror@localhost.invalid>
Installed-Size: $(du -sk "$rt/usr" | cut -f1)
Depends: libc6, libstdc++6
Provides: libnccl
Section: libs
Priority: optional
Homepage: https://developer.nvidia.com/nccl
Description: NVIDIA Collective Communication Library (NCCL) Runtime
 Lab test package: NVIDIA's libnccl.so.2 $nccl (CUDA $cuda build) from the
 nvidia-nccl-cu12 $wheel_version wheel, packaged like NVIDIA's libnccl2.
EOF

  dv="$work/deb-libnccl-dev-$debver"
  mkdir -p "$dv/DEBIAN" "$dv/usr/include" "$dv/usr/lib/x86_64-linux-gnu" "$dv/usr/share/doc/libnccl-dev"
  install -m 0644 "$inc/nccl.h" "$inc/nccl_net.h" "$dv/usr/include/"
  ln -s libnccl.so.2 "$dv/usr/lib/x86_64-linux-gnu/libnccl.so"
  install -m 0644 "$x"/nvidia_nccl_cu12-*.dist-info/License.txt "$dv/usr/share/doc/libnccl-dev/copyright"
  cat >"$dv/DEBIAN/control" <<EOF
Package: libnccl-dev
Source: nccl
Version: $debver
Architecture: amd64
Maintainer: gpucluster lab mirror <lab-mirror@localhost.invalid>
Installed-Size: $(du -sk "$dv/usr" | cut -f1)
Depends: libnccl2 (= $debver)
Section: libdevel
Priority: optional
Homepage: https://developer.nvidia.com/nccl
Description: NVIDIA Collective Communication Library (NCCL) Development Files
 Lab test package: NCCL $nccl (CUDA $cuda build) headers, packaged like
 NVIDIA's libnccl-dev.
EOF
  dpkg-deb --root-owner-group -Zgzip --build "$rt" "$pool/libnccl2_${debver}_amd64.deb" >/dev/null
  dpkg-deb --root-owner-group -Zgzip --build "$dv" "$pool/libnccl-dev_${debver}_amd64.deb" >/dev/null
  rm -rf "$x" "$rt" "$dv"
done
[[ ${#builds[@]} -ge 2 ]] || {
  echo "build-mirror.sh: expected at least two NCCL builds, got ${#builds[@]}" >&2
  exit 1
}
(cd "$pool" && apt-ftparchive packages . >"$work/pool.Packages")

# --- cuda-keyring, like NVIDIA's 1.1-1 -----------------------------------------------------------------------
build_keyring() { # <variant> <distro> <arch> <output .deb>
  local variant=$1 distro=$2 arch=$3 deb=$4 kr="$work/deb-keyring"
  rm -rf "$kr"
  mkdir -p "$kr/DEBIAN" "$kr/usr/share/keyrings" "$kr/etc/apt/sources.list.d" "$kr/etc/apt/preferences.d"
  install -m 0644 "$work/cuda-archive-keyring.gpg" "$kr/usr/share/keyrings/cuda-archive-keyring.gpg"
  printf 'deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] %s/%s/compute/cuda/repos/%s/%s/ /\n' \
    "$url" "$variant" "$distro" "$arch" >"$kr/etc/apt/sources.list.d/cuda-$distro-$arch.list"
  cat >"$kr/etc/apt/preferences.d/cuda-repository-pin-600" <<'EOF'
Package: nsight-compute
Pin: origin *ubuntu.com*
Pin-Priority: -1

Package: nsight-systems
Pin: origin *ubuntu.com*
Pin-Priority: -1

Package: *
Pin: release l=NVIDIA CUDA
Pin-Priority: 600
EOF
  printf '/etc/apt/sources.list.d/cuda-%s-%s.list\n/etc/apt/preferences.d/cuda-repository-pin-600\n' \
    "$distro" "$arch" >"$kr/DEBIAN/conffiles"
  cat >"$kr/DEBIAN/control" <<EOF
Package: cuda-keyring
Version: 1.1-1
Architecture: all
Maintainer: gpucluster lab mirror <lab-mirror@localhost.invalid>
Section: misc
Priority: optional
Description: GPG keyring for the CUDA repository (lab test copy)
 Installs the lab mirror's signing key, the apt source for the lab mirror
 ($variant/$distro/$arch) and the CUDA repository pin, like NVIDIA's cuda-keyring.
EOF
  dpkg-deb --root-owner-group -Zgzip --build "$kr" "$deb" >/dev/null
}

# --- one flat repository per variant/distro/arch -----------------------------------------------------------
while read -r distro arch; do
  [[ -z "$distro" || "$distro" == \#* ]] && continue
  for variant in "${variants[@]}"; do
    repo="$work/www/$variant/compute/cuda/repos/$distro/$arch"
    mkdir -p "$repo"
    ln "$pool"/*.deb "$repo/"
    build_keyring "$variant" "$distro" "$arch" "$repo/cuda-keyring_1.1-1_all.deb"
    (
      cd "$repo"
      {
        cat "$work/pool.Packages"
        apt-ftparchive packages ./cuda-keyring_1.1-1_all.deb
      } >Packages
      gzip -9 -n -k Packages
      apt-ftparchive -o APT::FTPArchive::Release::Origin=NVIDIA -o "APT::FTPArchive::Release::Label=NVIDIA CUDA" \
        release . >"$work/Release"
      mv "$work/Release" Release
    )
    case $variant in
    signed) signer=$lab_fpr ;;
    wrongkey) signer=$stranger_fpr ;;
    unsigned) continue ;;
    esac
    gpg --batch --yes --local-user "$signer" --digest-algo SHA512 --clearsign -o "$repo/InRelease" "$repo/Release"
    gpg --batch --yes --local-user "$signer" --digest-algo SHA512 -abs -o "$repo/Release.gpg" "$repo/Release"
  done
done <"$here/distros.txt"

# --- manifest ------------------------------------------------------------------------------------------------
python3 - "$work/mirror.json" "$url" "$lab_fpr" "$stranger_fpr" "$here/distros.txt" "${builds[@]}" <<'EOF'
import json
import sys

path, url, lab, stranger, distros_file, *builds = sys.argv[1:]
distros = [line.split() for line in open(distros_file) if line.strip() and not line.startswith("#")]
manifest = {
    "url": url,
    "fingerprint": lab,
    "stranger_fingerprint": stranger,
    "variants": {v: f"{url}/{v}" for v in ("signed", "unsigned", "wrongkey")},
    "repositories": [{"distro": d, "arch": a} for d, a in distros],
    "nccl": [dict(zip(("version", "cuda", "package_version"), b.split())) for b in builds],
}
with open(path, "w") as f:
    json.dump(manifest, f, indent=2)
    f.write("\n")
EOF
cp "$work/cuda-archive-keyring.gpg" "$work/lab-keyring.gpg"
gpgconf --kill gpg-agent 2>/dev/null || true
rm -rf "$GNUPGHOME" "$pool"
mkdir -p "$out"
mv "$work/www" "$work/mirror.json" "$work/lab-keyring.gpg" "$out/"
# Older builds (other recipe hashes) are dead weight: a mirror is ~400 MB.
find "$cache_root" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended -regex '.*/[0-9a-f]{12}' \
  ! -path "$out" -exec rm -rf {} +
log "mirror built in $out"
echo "$out"
