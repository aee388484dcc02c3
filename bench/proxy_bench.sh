#!/bin/sh
# Package proxy benchmark: wrk against the proxy's warm filtered index page and a cached file, with nginx serving
# the same bytes statically as the baseline (same run, same machine), then a cold resolve by N concurrent pip
# clients through a fresh proxy, counting the requests that reached the upstream.
# Usage: bench/proxy_bench.sh [BUILD_DIR] [N_PIP]   (BUILD_DIR holds bin/capsule; default build-bench, N_PIP 16)
set -eu
cd "$(dirname "$0")/.."
build="${1:-build-bench}"
clients="${2:-16}"
capsule="$build/bin/capsule"
[ -x "$capsule" ] || { echo "proxy_bench: $capsule is not built (cmake --build $build --target capsule)" >&2; exit 1; }
export PATH="$PATH:/usr/sbin"
for tool in wrk nginx curl; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "proxy_bench: installing wrk, nginx-light and curl" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends wrk nginx-light curl >/dev/null
    # The package starts its own server on port 80; this benchmark runs its own on loopback only.
    service nginx stop >/dev/null 2>&1 || true
  fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/capsule-proxy-bench.XXXXXX")"
chmod 0755 "$work"  # nginx's workers (www-data) read the static copies
pids=""
cleanup() {
  for pid in $pids; do kill "$pid" 2>/dev/null || true; done
  [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null || true
  sleep 0.2
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

python3 tests/proxy/fixtures/package_upstream.py "$work/fixture" >/dev/null
mirror="$work/fixture/pypi"
file=alpha-1.1-py3-none-any.whl

"$capsule" proxy serve --listen 127.0.0.1:0 --pypi-mirror "$mirror" --cache-dir "$work/cache" >"$work/proxy.out" 2>"$work/proxy.err" &
pids="$pids $!"
until grep -q listening "$work/proxy.out" 2>/dev/null; do sleep 0.1; done
proxy="$(sed -n 's/^listening on //p' "$work/proxy.out")"
page="$proxy/pypi/snapshot/2023-01-01/simple/alpha/"
blob="$proxy/pypi/snapshot/2023-01-01/files/alpha/$file"
accept='Accept: application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html; q=0.1, text/html; q=0.01'
curl -sf -H "$accept" "$page" -o "$work/page.json"
curl -sf "$blob" -o "$work/$file"

# The baseline: nginx serving the proxy's own answers as static files.
mkdir -p "$work/static"
cp "$work/page.json" "$work/static/page.json"
cp "$work/$file" "$work/static/$file"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
cat >"$work/nginx.conf" <<CONF
daemon on; pid $work/nginx.pid; worker_processes 2; error_log $work/nginx.err;
events { worker_connections 1024; }
http { access_log off; sendfile on; keepalive_requests 1000000;
  server { listen 127.0.0.1:$port; root $work/static; } }
CONF
nginx -c "$work/nginx.conf" -p "$work"
static="http://127.0.0.1:$port"

measure() {  # label url header variable connections
  if [ -n "$3" ]; then out=$(wrk -t2 -c"$5" -d10s --latency -H "$3" "$2"); else out=$(wrk -t2 -c"$5" -d10s --latency "$2"); fi
  rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
  p50=$(echo "$out" | awk '$1=="50%" {print $2}')
  p99=$(echo "$out" | awk '$1=="99%" {print $2}')
  non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
  printf '%-28s %12s req/s  p50 %9s  p99 %9s  %s\n' "$1" "$rps" "$p50" "$p99" "${non2xx:+non-2xx $non2xx}"
  eval "rps_$4=$rps"
}
for connections in 32 4; do
  echo "wrk -t2 -c$connections -d10s, loopback, $(nproc) CPUs"
  measure "proxy: filtered page (warm)" "$page" "$accept" page "$connections"
  measure "nginx: same page, static" "$static/page.json" "" static_page "$connections"
  measure "proxy: cached wheel" "$blob" "" blob "$connections"
  measure "nginx: same wheel, static" "$static/$file" "" static_blob "$connections"
  awk -v a="$rps_page" -v b="$rps_static_page" -v c="$rps_blob" -v d="$rps_static_blob" \
    'BEGIN { printf "ratio proxy/nginx req/s: page %.2f, wheel %.2f\n", a / b, c / d }'
done

# Cold resolve: a fresh proxy over the HTTP fixture upstream (50 ms per request, like a distant index).
python3 tests/proxy/fixtures/package_upstream.py "$work/upstream" --serve >"$work/upstream.out" &
pids="$pids $!"
until [ -s "$work/upstream.out" ]; do sleep 0.1; done
upstream_port=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$work/upstream.out")
curl -sf -X POST -d '{"delay_ms": 50}' "http://127.0.0.1:$upstream_port/_control" >/dev/null
"$capsule" proxy serve --listen 127.0.0.1:0 --pypi-index-url "http://127.0.0.1:$upstream_port/simple/" \
  --cache-dir "$work/cold-cache" >"$work/cold.out" 2>"$work/cold.err" &
pids="$pids $!"
until grep -q listening "$work/cold.out" 2>/dev/null; do sleep 0.1; done
cold="$(sed -n 's/^listening on //p' "$work/cold.out")"
start=$(date +%s%N)
i=0
pip_pids=""
while [ "$i" -lt "$clients" ]; do
  env -i PATH=/usr/bin:/bin HOME="$work" PIP_CONFIG_FILE=/dev/null python3 -m pip download -q --no-cache-dir \
    -i "$cold/pypi/snapshot/2023-01-01/simple/" -d "$work/pip-$i" alpha beta >"$work/pip-$i.log" 2>&1 &
  pip_pids="$pip_pids $!"
  i=$((i + 1))
done
wait_failed=0
for pid in $pip_pids; do wait "$pid" || wait_failed=$((wait_failed + 1)); done
elapsed=$(( ($(date +%s%N) - start) / 1000000 ))
requests=$(curl -sf "http://127.0.0.1:$upstream_port/_stats" | python3 -c \
  'import json,sys; s=json.load(sys.stdin); print(sum(v for k,v in s.items() if not k.endswith("/_control")), len(s))')
echo "cold resolve: $clients concurrent pip clients (alpha, beta as of 2023-01-01) in $elapsed ms;" \
  "upstream requests (total, distinct paths): $requests; pip failures: $wait_failed"
