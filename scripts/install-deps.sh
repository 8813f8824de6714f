#!/usr/bin/env bash
# Installs fp8lab's build and test dependencies from Debian packages, only those missing.
# Idempotent: a second run installs nothing and touches no package list.
set -euo pipefail

pkgs=(cmake make gcc g++ pkg-config libgsl-dev libpng-dev check libsubunit-dev libinih-dev
      libjansson-dev libplplot-dev plplot-driver-cairo)

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
