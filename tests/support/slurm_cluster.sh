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

# alive PID: the process exists and is not a zombie waiting for its reaper.
alive() { kill -0 "$1" 2>/dev/null && [ "$(ps -o stat= -p "$1" 2>/dev/null | cut -c1)" != Z ]; }

# stop_pids PIDFILE...: SIGTERM them all, wait up to 10 s, then SIGKILL whatever is left.
stop_pids() {
	pids=
	for pf in "$@"; do
		[ -s "$pf" ] && pid=$(cat "$pf" 2>/dev/null) && kill -TERM "$pid" 2>/dev/null && pids="$pids $pid"
		rm -f "$pf"
	done
	i=0
	while [ $i -lt 100 ]; do
		left=
		for pid in $pids; do alive "$pid" && left="$left $pid"; done
		[ -z "$left" ] && return 0
		sleep 0.1
		i=$((i + 1))
	done
	log "killing$left (still alive 10 s after SIGTERM)"
	for pid in $left; do kill -KILL "$pid" 2>/dev/null || true; done
}

# Pids of the slurmstepd processes of this cluster: slurmd leaves them in DIR/log with DIR's files open
# (their environment is overwritten by the process title, so SLURM_CONF cannot be matched).
our_stepds() {
	for p in $(pgrep -x slurmstepd 2>/dev/null || true); do
		for f in "/proc/$p/cwd" "/proc/$p"/fd/*; do
			case "$(readlink "$f" 2>/dev/null || true)" in "$DIR"/*) echo "$p"; break ;; esac
		done
	done
}

# kill_tree SIG PID: signal PID and all its descendants.
kill_tree() {
	for c in $(pgrep -P "$2" 2>/dev/null || true); do kill_tree "$1" "$c"; done
	kill "-$1" "$2" 2>/dev/null || true
}

do_stop() {
	if [ -s "$DIR/etc/slurmctld.pid" ] && alive "$(cat "$DIR/etc/slurmctld.pid")"; then
		# Cancel whatever is still queued or running so slurmd tears the job steps down cleanly.
		jobs=$(SLURM_CONF=$CONF squeue -h -o %A 2>/dev/null || true)
		if [ -n "$jobs" ]; then
			# shellcheck disable=SC2086
			SLURM_CONF=$CONF scancel $jobs 2>/dev/null || true
			i=0
			while [ -n "$(our_stepds)" ] && [ $i -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
		fi
	fi
	stop_pids "$DIR"/spool/*/slurmd.pid "$DIR/etc/slurmctld.pid"
	# linuxproc jobs survive their slurmd: kill any leftover step and its whole process tree.
	for p in $(our_stepds); do kill_tree KILL "$p"; done
	stop_pids "$DIR/munge/munged.pid"
}

fail() {
	log "$*"
	for f in "$DIR"/log/*; do
		[ -s "$f" ] || continue
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
	case "$NODES" in '' | *[!0-9]* | 0) usage ;; esac
	if [ -s "$DIR/etc/slurmctld.pid" ] && alive "$(cat "$DIR/etc/slurmctld.pid")"; then
		log "a cluster is already running in $DIR; stop it first"
		exit 1
	fi
	for b in munged slurmctld slurmd sinfo squeue scancel python3; do
		command -v "$b" >/dev/null 2>&1 || { log "missing $b"; exit 1; }
	done
	umask 022
	rm -rf "$DIR/spool" # a fresh cluster every time: slurmctld refuses state saved under another ClusterName
	mkdir -p "$DIR/munge" "$DIR/etc" "$DIR/spool/ctld" "$DIR/log"
	# munged refuses key, socket, log and seed dirs that group/other could write to.
	chmod 0755 "$DIR" "$DIR/etc" "$DIR/spool" "$DIR/log" "$DIR/munge"
	chmod 0700 "$DIR/spool/ctld"
	key=$DIR/munge/munge.key
	[ -s "$key" ] || dd if=/dev/urandom of="$key" bs=1 count=1024 2>/dev/null
	chmod 0400 "$key"
	SOCK=$DIR/munge/munge.socket.2
	# Daemons get their own stdout/stderr so a caller reading ours (popen, $(...)) sees EOF.
	munged --force --key-file="$key" --socket="$SOCK" --pid-file="$DIR/munge/munged.pid" \
		--log-file="$DIR/log/munged.log" --seed-file="$DIR/munge/munged.seed" \
		>>"$DIR/log/munged.out" 2>&1 || fail "munged failed to start"

	host=$(hostname -s 2>/dev/null || hostname)
	# shellcheck disable=SC2046
	set -- $(free_ports $((NODES + 1)))
	ctld_port=$1
	shift
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
			echo "NodeName=n$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$port CPUs=$(nproc) RealMemory=1000 State=UNKNOWN"
			n=$((n + 1))
		done
		echo "PartitionName=test Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP"
	} >"$CONF"
	: >"$DIR/etc/plugstack.conf" # no cgroup.conf: proctrack/linuxproc + task/none never read one

	export SLURM_CONF="$CONF"
	slurmctld -f "$CONF" >>"$DIR/log/slurmctld.out" 2>&1 || fail "slurmctld failed to start"
	n=1
	while [ $n -le "$NODES" ]; do
		# -N with a per-node Port: Debian's slurmd is built with MULTIPLE_SLURMD (scontrol show config).
		mkdir -p "$DIR/spool/n$n"
		slurmd -f "$CONF" -N "n$n" >>"$DIR/log/slurmd-n$n.out" 2>&1 || fail "slurmd n$n failed to start"
		n=$((n + 1))
	done

	i=0
	while :; do
		states=$(sinfo -h -N -o '%N %t' 2>/dev/null || true)
		[ "$(printf '%s\n' "$states" | grep -c ' idle$' || true)" -eq "$NODES" ] && break
		i=$((i + 1))
		[ $i -ge 150 ] && fail "nodes not idle after 30 s: $(echo "$states" | tr '\n' ' ')"
		sleep 0.2
	done
	echo "export SLURM_CONF=$CONF"
}

[ $# -ge 2 ] || usage
CMD=$1
[ "$CMD" = stop ] && [ ! -d "$2" ] && exit 0
mkdir -p "$2"
DIR=$(cd "$2" && pwd -P)
CONF=$DIR/etc/slurm.conf
NODES=${3:-1}
case "$CMD" in
	start) do_start ;;
	stop) do_stop ;;
	*) usage ;;
esac
