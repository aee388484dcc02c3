#!/bin/sh
# A private single-node Slurm cluster for tests: munged, slurmctld and slurmd from Debian, everything (key,
# sockets, config, state, logs) in DIR and on free loopback ports, so it never touches /etc or a system cluster.
# Usage: slurm_cluster.sh start DIR   (prints "export SLURM_CONF=DIR/etc/slurm.conf")
#        slurm_cluster.sh stop DIR    (stops what start started; idempotent; DIR is the caller's to remove)
set -eu

usage() { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
action=$1
dir=$2

stop_pidfile() {
  pidfile=$1
  [ -f "$pidfile" ] || return 0
  pid=$(cat "$pidfile" 2>/dev/null || true)
  rm -f "$pidfile"
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  i=0
  while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
  kill -KILL "$pid" 2>/dev/null || true
}

stop_all() {
  stop_pidfile "$dir/run/slurmd.pid"
  stop_pidfile "$dir/run/slurmctld.pid"
  stop_pidfile "$dir/run/munged.pid"
  # Job steps slurmd left (slurmstepd) for this cluster's config.
  pkill -KILL -f "slurmstepd.*$dir/" 2>/dev/null || true
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

logs_tail() {
  for f in "$dir"/log/*.log; do [ -f "$f" ] && { echo "== $f"; tail -n 20 "$f"; }; done >&2
}

case "$action" in
  stop) stop_all; exit 0 ;;
  start) ;;
  *) usage ;;
esac

for program in munged slurmctld slurmd sinfo; do
  command -v "$program" >/dev/null || { echo "$0: $program is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
umask 022
mkdir -p "$dir/etc" "$dir/run" "$dir/log" "$dir/state" "$dir/spool"
# munged refuses a key, socket or log directory that others could write to, on every path component.
mkdir -p "$dir/munge"
chmod 0755 "$dir"
chmod 0700 "$dir/munge"
if [ ! -f "$dir/munge/munge.key" ]; then
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 2>/dev/null
  chmod 0400 "$dir/munge/munge.key"
fi
socket="$dir/munge/munge.socket"
munged --socket="$socket" --key-file="$dir/munge/munge.key" --pid-file="$dir/run/munged.pid" \
  --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" --force \
  || { logs_tail; stop_all; exit 1; }

host=$(hostname -s)
ctld_port=$(free_port)
slurmd_port=$(free_port)
cpus=$(nproc)
cat > "$dir/etc/slurm.conf" <<EOF
ClusterName=capsule-test-$(basename "$dir" | tr -c 'a-zA-Z0-9\n' '-' | tr 'A-Z' 'a-z' | cut -c1-30)
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
AuthType=auth/munge
AuthInfo=socket=$socket
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
InactiveLimit=0
KillWait=5
MinJobAge=300
MaxArraySize=1001
SchedulerParameters=defer_batch
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF="$dir/etc/slurm.conf"

# -i: ignore any state a previous cluster left in this DIR.
slurmctld -f "$SLURM_CONF" -i || { logs_tail; stop_all; exit 1; }
slurmd -f "$SLURM_CONF" || { logs_tail; stop_all; exit 1; }

i=0
until sinfo --noheader --states=idle --format=%N 2>/dev/null | grep -q .; do
  i=$((i + 1))
  if [ $i -gt 300 ]; then
    echo "$0: the node did not become idle within 30 s" >&2
    sinfo >&2 || true
    logs_tail
    stop_all
    exit 1
  fi
  sleep 0.1
done
echo "export SLURM_CONF=$SLURM_CONF"
