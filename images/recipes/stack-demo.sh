#!/bin/bash
# Image for the stacks end-to-end test (tests/e2e/fixtures/stack_demo): Debian's PostgreSQL 15 with its user
# `postgres` at uid/gid 990, OpenJDK 17 + the PostgreSQL JDBC driver, python3 + pytest (toolchain label
# postgresql; the others' versions as plain labels, so toolchain requests never pick it), and
# /usr/local/bin/stack-demo-db, which starts a throw-away database in /tmp/pgdata.
# usage: stack-demo.sh [--out DIR] [--tar-only] [--if-changed]   (root; see README.md)
# shellcheck disable=SC2034  # RECIPE_NAME and RECIPE_PACKAGES are read by lib.sh
RECIPE_NAME=stack-demo
RECIPE_PACKAGES="postgresql openjdk-17-jdk-headless libpostgresql-jdbc-java python3 python3-pytest"
PG_UID=990   # the stack spec's "user": "990:990" for the db service

# Before the packages: the user and group postgres at a fixed id (postgresql-common's postinst keeps an existing
# system user), and no "main" cluster (stack-demo-db makes its own database in /tmp).
_postgres_user() {
  in_root groupadd --system --gid "$PG_UID" postgres
  in_root useradd --system --uid "$PG_UID" --gid "$PG_UID" --home-dir /var/lib/postgresql --no-create-home \
    --shell /bin/bash --comment "PostgreSQL administrator" postgres
  mkdir -p "$ROOT/etc/postgresql-common/createcluster.d"
  echo "create_main_cluster = false" > "$ROOT/etc/postgresql-common/createcluster.d/capsule.conf"
}

recipe_setup() {
  cat > "$ROOT/usr/local/bin/stack-demo-db" <<'EOF'
#!/bin/sh
# PostgreSQL 15 for a stack's db service: run as the image's postgres user (uid 990, no capabilities, HOME may be
# unset) with a private /tmp; makes a database in /tmp/pgdata (trust auth, superuser postgres) when it is empty,
# then serves it on 127.0.0.1:${PGPORT:-5432} (socket in /tmp), logging to stderr.
set -eu
bin=/usr/lib/postgresql/15/bin
data=/tmp/pgdata
if [ -z "$(ls -A "$data" 2>/dev/null)" ]; then
  "$bin/initdb" -D "$data" --auth=trust -U postgres -E UTF8 --locale=C.UTF-8 >&2
fi
exec "$bin/postgres" -D "$data" -k /tmp -h 127.0.0.1 -p "${PGPORT:-5432}"
EOF
  chmod 0755 "$ROOT/usr/local/bin/stack-demo-db"
}

# Offline, in a throw-away overlay and its own pid namespace (nothing outlives the check): loopback up,
# stack-demo-db as uid 990 without capabilities or HOME, ready for pg_isready, then a JDBC query from Java
# through /usr/share/java/postgresql.jar; the server stops on TERM.
_db_check() {
  cat <<'OUTER'
set -eu
python3 -c 'import fcntl, socket, struct
s = socket.socket()
f = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, struct.pack("16sH14x", b"lo", 0)))[1]  # SIOCGIFFLAGS
fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", b"lo", f | 1))  # SIOCSIFFLAGS |= IFF_UP'
as_pg="setpriv --reuid=990 --regid=990 --clear-groups --inh-caps=-all --bounding-set=-all env -u HOME"
$as_pg stack-demo-db > /tmp/db.log 2>&1 &
pid=$!
trap 'kill $pid 2> /dev/null || true' EXIT
i=0
until $as_pg pg_isready -q -h 127.0.0.1; do
  i=$((i + 1))
  if [ $i -gt 600 ] || ! kill -0 $pid 2> /dev/null; then cat /tmp/db.log; echo "stack-demo-db not ready"; exit 1; fi
  sleep 0.1
done
$as_pg pg_isready -h 127.0.0.1
grep "database system is ready to accept connections" /tmp/db.log
[ "$(stat -c %u:%g /tmp/pgdata)" = 990:990 ] || { echo "/tmp/pgdata not owned by 990:990"; exit 1; }
mkdir /tmp/jdbc && cat > /tmp/jdbc/Check.java <<'EOF'
public class Check {
  public static void main(String[] args) throws Exception {
    try (var c = java.sql.DriverManager.getConnection("jdbc:postgresql://127.0.0.1:5432/postgres", "postgres", "");
         var r = c.createStatement().executeQuery("select current_user, version()")) {
      r.next();
      System.out.println("JDBC: " + r.getString(1) + " on " + r.getString(2));
    }
  }
}
EOF
$as_pg java -cp /usr/share/java/postgresql.jar /tmp/jdbc/Check.java
kill -TERM $pid
wait $pid || { cat /tmp/db.log; echo "postgres did not stop cleanly"; exit 1; }
trap - EXIT
OUTER
}

recipe_verify() {
  local java py pytest pg ids
  ids=$(in_root id postgres)
  [ "$(in_root id -u postgres):$(in_root id -g postgres)" = "$PG_UID:$PG_UID" ] || die "postgres is not $PG_UID:$PG_UID: $ids"
  in_root java -version >&2
  in_root javac -version >&2
  in_root python3 -m pytest --version >&2
  in_root /usr/lib/postgresql/15/bin/postgres --version >&2
  [ -f "$ROOT/usr/share/java/postgresql.jar" ] || die "/usr/share/java/postgresql.jar missing from the image"
  java=$(in_root java -version 2>&1 | sed -n 's/.* version "\([^"]*\)".*/\1/p' | head -n1)
  py=$(in_root python3 -c 'import platform; print(platform.python_version())')
  pytest=$(in_root python3 -c 'import pytest; print(pytest.__version__)')
  pg=$(in_root /usr/lib/postgresql/15/bin/postgres --version | sed -n 's/^postgres (PostgreSQL) \([^ ]*\).*/\1/p')
  if [ -z "$java" ] || [ -z "$pg" ]; then die "could not read the java/postgresql versions"; fi
  in_scratch_offline unshare --pid --fork --kill-child --mount-proc /bin/sh -c "$(_db_check)" >&2
  # Only postgresql as a toolchain: a request for {"java": "17"} or {"python": ...} must not pick this image.
  label postgresql "$pg"
  label_raw org.capsule.stack-demo.java "$java"
  label_raw org.capsule.stack-demo.python "$py"
  label_raw org.capsule.stack-demo.pytest "$pytest"
}

# shellcheck source=lib.sh
. "$(dirname "$0")/lib.sh"

# lib.sh has no pre-install hook: make the postgres user right before its package step.
declare -F _install_packages > /dev/null || die "lib.sh has no _install_packages to run _postgres_user before"
eval "_lib_install_packages() $(declare -f _install_packages | tail -n +2)"
_install_packages() { _postgres_user; _lib_install_packages "$@"; }

recipe_main "$@"
