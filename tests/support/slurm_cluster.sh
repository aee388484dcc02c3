#!/bin/sh
# Start/stop a private single-host Slurm cluster (munged + slurmctld + slurmd) rooted in DIR, for tests.
# Never touches /etc/slurm, /etc/munge or the system munge socket, and uses free loopback ports, so it can run anywhere.
set -eu

usage() {
	echo "usage: $0 start DIR [NODES]   (prints 'export SLURM_CONF=...')" >&2
	echo "       $0 stop DIR" >&2
	exit 2
}

log() { echo "slurm_cluster: $*" >&2; }

# stop_pid NAME PIDFILE: SIGTERM, wait up to 10 s, then SIGKILL.
stop_pid() {
	[ -s "$2" ] || return 0
	pid=$(cat "$2")
	if kill -0 "$pid" 2>/dev/null; then
		kill -TERM "$pid" 2>/dev/null || true
		i=0
		while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		if kill -0 "$pid" 2>/dev/null; then
			log "$1 ($pid) ignored SIGTERM, killing"
			kill -KILL "$pid" 2>/dev/null || true
		fi
	fi
	rm -f "$2"
}

# Pids of slurmstepd processes launched by this cluster's slurmd (they inherit its SLURM_CONF).
our_stepds() {
	for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
		if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qxF "SLURM_CONF=$CONF"; then echo "$p"; fi
	done
}

# kill_tree SIG PID: signal PID and all its descendants.
kill_tree() {
	for c in $(pgrep -P "$2" 2>/dev/null || true); do kill_tree "$1" "$c"; done
	kill "-$1" "$2" 2>/dev/null || true
}

do_stop() {
	if [ -s "$DIR/etc/slurmctld.pid" ] && kill -0 "$(cat "$DIR/etc/slurmctld.pid" 2>/dev/null)" 2>/dev/null; then
		# Cancel whatever is still queued or running so slurmd tears the job steps down cleanly.
		jobs=$(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null || true)
		if [ -n "$jobs" ]; then
			# shellcheck disable=SC2086
			SLURM_CONF=$CONF scancel $jobs 2>/dev/null || true
			i=0
			while [ -n "$(our_stepds)" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
		fi
	fi
	for pf in "$DIR"/spool/*/slurmd.pid; do [ -e "$pf" ] && stop_pid slurmd "$pf"; done
	stop_pid slurmctld "$DIR/etc/slurmctld.pid"
	# linuxproc jobs survive their slurmd: kill any leftover step and its whole process tree.
	for p in $(our_stepds); do kill_tree KILL "$p"; done
	stop_pid munged "$DIR/munge/munged.pid"
}

fail() {
	log "$*"
	for f in "$DIR"/log/*; do
		[ -f "$f" ] || continue
		echo "----- tail $f -----" >&2
		tail -n 25 "$f" >&2
	done
	do_stop
	exit 1
}

# free_ports N: N distinct currently-free TCP ports on 127.0.0.1.
free_ports() {
	python3 - "$1" <<'EOF'
import socket, sys
socks = []
for _ in range(int(sys.argv[1])):
    s = socket.socket(); s.bind(("127.0.0.1", 0)); socks.append(s)
print(" ".join(str(s.getsockname()[1]) for s in socks))
EOF
}

do_start() {
	case "$NODES" in ''|*[!0-9]*|0) usage ;; esac
	if [ -s "$DIR/etc/slurmctld.pid" ] && kill -0 "$(cat "$DIR/etc/slurmctld.pid")" 2>/dev/null; then
		log "a cluster is already running in $DIR; stop it first"; exit 1
	fi
	for b in munged slurmctld slurmd sinfo python3; do
		command -v "$b" >/dev/null 2>&1 || { log "missing $b"; exit 1; }
	done
	umask 022
	rm -rf "$DIR/spool" # a fresh cluster every time: slurmctld refuses state saved under another ClusterName
	mkdir -p "$DIR/munge" "$DIR/etc" "$DIR/spool/ctld" "$DIR/log"
	# munged insists on root-owned paths with no group/other write access.
	chmod 0755 "$DIR" "$DIR/etc" "$DIR/spool" "$DIR/log"
	chmod 0755 "$DIR/munge" # clients of any user need the socket; the key itself is 0400
	chmod 0700 "$DIR/spool/ctld"
	key=$DIR/munge/munge.key
	if [ ! -s "$key" ]; then
		dd if=/dev/urandom of="$key" bs=1 count=1024 2>/dev/null
	fi
	chmod 0400 "$key"
	SOCK=$DIR/munge/munge.socket.2
	munged --force --key-file="$key" --socket="$SOCK" --pid-file="$DIR/munge/munged.pid" \
		--log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
		|| fail "munged failed to start"

	host=$(hostname -s 2>/dev/null || hostname)
	# shellcheck disable=SC2046
	set -- $(free_ports $((NODES + 1)))
	ctld_port=$1; shift
	cpus=$(nproc)
	{
		cat <<EOF
ClusterName=t$(date +%s)x$$
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SOCK
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/spool/ctld
SlurmdSpoolDir=$DIR/spool/%n
SlurmctldPidFile=$DIR/etc/slurmctld.pid
SlurmdPidFile=$DIR/spool/%n/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$DIR/etc/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=1,sched_min_interval=0
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
SlurmctldTimeout=10
SlurmdTimeout=10
InactiveLimit=0
KillWait=2
MinJobAge=300
MaxArraySize=100001
MaxJobCount=200000
EOF
		n=1
		for port in "$@"; do
			echo "NodeName=n$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port CPUs=$cpus RealMemory=1000 State=UNKNOWN"
			n=$((n + 1))
		done
		echo "PartitionName=test Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
	} >"$CONF"
	: >"$DIR/etc/plugstack.conf"
	# cgroup.conf is only read by cgroup plugins; keep one so nothing falls back to /etc/slurm.
	echo "CgroupPlugin=autodetect" >"$DIR/etc/cgroup.conf"

	export SLURM_CONF="$CONF"
	slurmctld -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 || fail "slurmctld failed to start"
	n=1
	while [ $n -le "$NODES" ]; do
		mkdir -p "$DIR/spool/n$n"
		slurmd -f "$CONF" -N "n$n" >>"$DIR/log/slurmd-n$n.out" 2>&1 || fail "slurmd n$n failed to start"
		n=$((n + 1))
	done

	i=0
	while :; do
		states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
		idle=$(printf '%s\n' "$states" | grep -c ' idle$' || true)
		[ "$idle" -eq "$NODES" ] && break
		i=$((i + 1))
		[ $i -ge 150 ] && fail "nodes not idle after 30 s: $(echo "$states" | tr '\n' ' ')"
		sleep 0.2
	done
	echo "export SLURM_CONF=$CONF"
}

[ $# -ge 2 ] || usage
CMD=$1
mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)
CONF=$DIR/etc/slurm.conf
NODES=${3:-1}
case "$CMD" in
	start) do_start ;;
	stop) do_stop ;;
	*) usage ;;
esac
