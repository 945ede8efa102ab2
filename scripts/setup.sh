#!/usr/bin/env bash
# Installs what the build needs on a fresh Debian machine. Safe to re-run:
# it only touches what is missing. Needs root (or sudo) for apt-get.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

packages=(
  build-essential cmake pkg-config
  librdkafka-dev librocksdb-dev nlohmann-json3-dev libcurl4-openssl-dev
  libgtest-dev libgmock-dev libyaml-cpp-dev libcli11-dev libspdlog-dev
  libcpp-httplib-dev libssl-dev libsodium-dev libbenchmark-dev libjemalloc-dev
  kcat python3-confluent-kafka python3-jwt python3-cryptography python3-pytest black mypy git
  bubblewrap libseccomp-dev clang libclang-rt-14-dev clang-format
  prometheus
  chromium chromium-driver fonts-dejavu-core
)

sudo_cmd=()
if [ "$(id -u)" != 0 ]; then sudo_cmd=(sudo); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

updated=0
apt_update() {
  if [ "$updated" = 0 ]; then
    "${sudo_cmd[@]}" apt-get update -qq
    updated=1
  fi
}

if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing missing packages: ${missing[*]}"
  apt_update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# valijson is header-only, but Debian's libvalijson-dev depends on Qt, Poco and
# more (~70 packages) for adapters we do not use. We unpack its headers into
# .deps/ instead of installing it with its dependencies.
if [ ! -f /usr/include/valijson/validator.hpp ] && [ ! -f "$repo/.deps/valijson/include/valijson/validator.hpp" ]; then
  echo "setup: unpacking valijson headers into .deps/valijson"
  apt_update
  tmp="$(mktemp -d)"
  chmod 777 "$tmp"
  (cd "$tmp" && apt-get download -qq libvalijson-dev 2>/dev/null)
  dpkg-deb -x "$tmp"/libvalijson-dev_*.deb "$tmp/x"
  mkdir -p "$repo/.deps/valijson/include"
  cp -r "$tmp/x/usr/include/valijson" "$repo/.deps/valijson/include/"
  rm -rf "$tmp"
fi
# Node (Debian's) and the npm packages of tests/mcp: the official MCP SDK and
# a reference MCP server, for the MCP tests, `bench mcp` and the example.
# npm ci installs exactly what package-lock.json pins.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "setup: installing nodejs and npm"
  apt_update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends nodejs npm
fi
mcp_dir="$repo/tests/mcp"
if [ ! -f "$mcp_dir/node_modules/.package-lock.json" ] || [ "$mcp_dir/package-lock.json" -nt "$mcp_dir/node_modules/.package-lock.json" ]; then
  echo "setup: installing the npm packages of tests/mcp"
  (cd "$mcp_dir" && npm ci --no-audit --no-fund --loglevel=error)
fi
echo "setup: dependencies ready"
