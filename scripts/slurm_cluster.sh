#!/usr/bin/env bash
# A real two-node SLURM cluster on this machine, for the tests and for trying launcher: slurm.
#
#   sudo scripts/slurm_cluster.sh start    # installs slurm-wlm and munge from Debian when absent
#   export SLURM_CONF=/tmp/clipmag-slurm/slurm.conf
#   sinfo; srun -N 2 hostname
#   sudo scripts/slurm_cluster.sh stop
#
# Two slurmd daemons (node1, node2: NodeAddr 127.0.0.1, ports 17001 and 17002, one CPU each) and
# one slurmctld, all configured under $CLIPMAG_SLURM_DIR (default /tmp/clipmag-slurm); node1 and
# node2 resolve to 127.0.0.1 (/etc/hosts), as a job's master address names a node. No accounting
# database: job states come from the controller, which keeps ended jobs for an hour (MinJobAge).
# Exits 3 with one line when the cluster cannot start here (no root, no package, no daemon).
set -euo pipefail

DIR="${CLIPMAG_SLURM_DIR:-/tmp/clipmag-slurm}"
CONF="$DIR/slurm.conf"
NODES=(node1 node2)
PORTS=(17001 17002)

cannot() { echo "slurm_cluster: cannot start a cluster here: $*" >&2; exit 3; }

install_packages() {
    command -v slurmctld >/dev/null && command -v munged >/dev/null && return
    [ "$(id -u)" = 0 ] || cannot "slurm-wlm and munge are not installed and this is not root"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null \
        || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null; } \
        || cannot "apt-get could not install slurm-wlm and munge"
}

start_munge() {
    pgrep -x munged >/dev/null && return
    [ -s /etc/munge/munge.key ] || { mkdir -p /etc/munge; dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null; }
    mkdir -p /run/munge /var/log/munge /var/lib/munge
    if id munge >/dev/null 2>&1; then
        chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
        chmod 400 /etc/munge/munge.key
        runuser -u munge -- /usr/sbin/munged || cannot "munged did not start"
    else
        /usr/sbin/munged --force || cannot "munged did not start"
    fi
}

write_conf() {
    mkdir -p "$DIR/state" "$DIR/log"
    local host cpus
    host="$(hostname -s)"
    cat >"$CONF" <<EOF
ClusterName=clipmag-local
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=16817
AuthType=auth/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool-%n
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd-%n.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MinJobAge=3600
KillWait=30
JobRequeue=1
NodeName=${NODES[0]} NodeHostname=$host NodeAddr=127.0.0.1 Port=${PORTS[0]} CPUs=1 State=UNKNOWN
NodeName=${NODES[1]} NodeHostname=$host NodeAddr=127.0.0.1 Port=${PORTS[1]} CPUs=1 State=UNKNOWN
PartitionName=local Nodes=${NODES[0]},${NODES[1]} Default=YES MaxTime=INFINITE State=UP
EOF
    grep -qw node1 /etc/hosts || echo "127.0.0.1 ${NODES[*]}" >>/etc/hosts
}

start() {
    [ "$(id -u)" = 0 ] || cannot "the daemons need root"
    install_packages
    start_munge
    write_conf
    export SLURM_CONF="$CONF"
    pgrep -f "slurmctld -f $CONF" >/dev/null || slurmctld -f "$CONF" || cannot "slurmctld did not start ($DIR/log)"
    for node in "${NODES[@]}"; do
        pgrep -f "slurmd -f $CONF -N $node" >/dev/null || slurmd -f "$CONF" -N "$node" || cannot "slurmd $node did not start"
    done
    for _ in $(seq 60); do
        if [ "$(sinfo -h -o '%t' 2>/dev/null | sort -u | tr -d '\n')" = "idle" ]; then
            echo "slurm_cluster: two nodes idle; export SLURM_CONF=$CONF"
            return
        fi
        sleep 1
    done
    cannot "the nodes did not come up idle: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')"
}

stop() {
    SLURM_CONF="$CONF" scontrol shutdown >/dev/null 2>&1 || true
    pkill -f "slurmd -f $CONF" || true
    pkill -f "slurmctld -f $CONF" || true
    echo "slurm_cluster: stopped"
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
