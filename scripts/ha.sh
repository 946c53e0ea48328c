#!/usr/bin/env bash
# ha.sh: the local HA form of the stack's engines (`make up-ha`): every engine
# as a cluster that survives the loss of one of its servers. It never touches
# the machine's own RabbitMQ, PostgreSQL or MinIO.
#
#   scripts/ha.sh up [--async]   start what is missing, write .devstack/ha.env
#   scripts/ha.sh down           stop everything ha.sh started, remove its data
#   scripts/ha.sh status         who is the primary, which servers answer
#   scripts/ha.sh env            print .devstack/ha.env
#   scripts/ha.sh kill-primary   SIGKILL the primary's Patroni and PostgreSQL
#                                (a lost machine): Patroni promotes the standby
#   scripts/ha.sh start-pg N     start node N's Patroni again (it rejoins as
#                                the standby, pg_rewind when it diverged)
#   scripts/ha.sh kill-minio N   SIGKILL MinIO process N (1..4)
#   scripts/ha.sh start-minio N  start it again (it rejoins the set and heals)
#
# What runs (data and logs under .devstack/ha/):
#   RabbitMQ  3 nodes as one cluster (scripts/cluster.sh), AMQP 5781-5783,
#             quorum queues with a member on each node
#   Postgres  2 servers managed by Patroni (Debian's patroni, a private etcd
#             on 2479): a primary and a synchronous standby (--async: an
#             asynchronous one), ports 5441-5442, Patroni's REST API
#             8441-8442; clients use the multi-host URL
#             postgres://…@127.0.0.1:5441,127.0.0.1:5442/dubflow?target_session_attrs=read-write
#   MinIO     4 processes, one drive each, one erasure set (2 data + 2
#             parity shards; writes need 3 drives, reads 2), ports 9101-9104,
#             behind HAProxy on 9100 (health-checked; S3_ENDPOINT)
#
# `make up-ha` runs `ha.sh up`, then scripts/stack.sh up with .devstack/ha.env:
# stack.sh finds every engine answering and starts the workers against them.
# Patroni's timing: the leader key lives 10 s, each member looks every 1 s:
# a lost primary is replaced in about 10-12 s. Needs root (or the postgres,
# rabbitmq users' rights) and Debian's patroni, etcd-server, haproxy,
# rabbitmq-server, PostgreSQL; `up` installs what is missing.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$ROOT/.devstack
HA=$DEV/ha
PG_PORTS=(5441 5442)
PG_REST=(8441 8442)
ETCD_CLIENT=2479
ETCD_PEER=2480
MINIO_PORTS=(9101 9102 9103 9104)
MINIO_LB=9100
SCOPE=dubflow-ha
PACKAGES=(patroni etcd-server haproxy rabbitmq-server postgresql)

log() { printf 'ha: %s\n' "$*" >&2; }
die() {
	log "$*"
	exit 1
}

# answers PORT: something accepts TCP connections on 127.0.0.1:PORT.
answers() {
	# shellcheck disable=SC2016 # $0 expands in the inner shell.
	timeout 3 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$0"' "$1" 2>/dev/null
}

# wait_for NAME SECONDS COMMAND...: run COMMAND until it succeeds.
wait_for() {
	local name=$1 secs=$2 start=$SECONDS
	shift 2
	until "$@"; do
		((SECONDS - start < secs)) || die "$name: not ready within ${secs}s (logs in .devstack/ha/)"
		sleep 0.5
	done
}

ensure_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	log "installing ${missing[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
}

pid_alive() { [[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null; }
pidfile() { echo "$HA/pids/$1.pid"; }
running() { pid_alive "$(cat "$(pidfile "$1")" 2>/dev/null || true)"; }

# daemon NAME USER COMMAND...: start COMMAND as USER in its own session, its
# output in .devstack/ha/NAME.log, its pid in .devstack/ha/pids/NAME.pid.
daemon() {
	local name=$1 user=$2
	shift 2
	running "$name" && return 0
	if [[ $user != "$(id -un)" ]]; then
		setsid setpriv --reuid="$user" --regid="$user" --init-groups -- "$@" >>"$HA/$name.log" 2>&1 </dev/null &
	else
		setsid "$@" >>"$HA/$name.log" 2>&1 </dev/null &
	fi
	echo $! >"$(pidfile "$name")"
}

# ---------------------------------------------------------------- etcd, Patroni

etcd_up() {
	mkdir -p "$HA/etcd"
	daemon etcd "$(id -un)" etcd --name etcd --data-dir "$HA/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_CLIENT" --advertise-client-urls "http://127.0.0.1:$ETCD_CLIENT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER" \
		--initial-cluster "etcd=http://127.0.0.1:$ETCD_PEER" --log-level warn --logger zap
	wait_for etcd 60 curl -fs -o /dev/null "http://127.0.0.1:$ETCD_CLIENT/health"
}

# patroni_config N SYNC: node N's Patroni configuration (as pkg/localstack's).
patroni_config() {
	local n=$1 sync=$2 i=$(($1 - 1)) dir=$HA/pg$1 bin
	bin=$(find /usr/lib/postgresql -maxdepth 2 -name bin -type d | sort -V | tail -n1)
	cat <<EOF
scope: $SCOPE
name: pg$n
log:
  level: WARNING
restapi:
  listen: 127.0.0.1:${PG_REST[$i]}
  connect_address: 127.0.0.1:${PG_REST[$i]}
etcd3:
  hosts: 127.0.0.1:$ETCD_CLIENT
bootstrap:
  dcs:
    ttl: 10
    loop_wait: 1
    retry_timeout: 4
    maximum_lag_on_failover: 16777216
    synchronous_mode: $sync
    postgresql:
      use_pg_rewind: true
      parameters:
        max_connections: 300
        wal_log_hints: 'on'
        max_wal_senders: 10
        max_replication_slots: 10
        wal_keep_size: 256MB
  initdb:
    - encoding: UTF8
    - no-locale
    - auth: trust
  pg_hba:
    - local all all trust
    - host all all 127.0.0.1/32 trust
    - host replication all 127.0.0.1/32 trust
postgresql:
  listen: 127.0.0.1:${PG_PORTS[$i]}
  connect_address: 127.0.0.1:${PG_PORTS[$i]}
  data_dir: $dir/data
  bin_dir: $bin
  pgpass: $dir/pgpass
  authentication:
    superuser: {username: postgres}
    replication: {username: postgres}
    rewind: {username: postgres}
  parameters:
    unix_socket_directories: $dir
EOF
}

pg_start() {
	local n=$1 dir=$HA/pg$1
	HOME=$dir daemon "pg$n" postgres patroni "$dir/patroni.yml"
}

# role N PATH: node N's Patroni answers PATH (/primary, /replica, /sync) with 200.
role() { curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:${PG_REST[$1 - 1]}$2" 2>/dev/null; }
primary() {
	local n
	for n in 1 2; do
		role "$n" /primary && { echo "$n"; return 0; }
	done
	return 1
}

pg_up() {
	local sync=$1 n
	for n in 1 2; do
		if [[ ! -f $HA/pg$n/patroni.yml ]]; then
			mkdir -p "$HA/pg$n"
			patroni_config "$n" "$sync" >"$HA/pg$n/patroni.yml"
			chmod 700 "$HA/pg$n"
			chown -R postgres: "$HA/pg$n"
		fi
	done
	pg_start 1
	wait_for "postgres primary" 180 primary
	pg_start 2
	local want=/replica
	[[ $sync == true ]] && want=/sync
	wait_for "postgres standby" 180 role 2 "$want"
	psql "$(pg_url postgres)" -XtAc "SELECT 1 FROM pg_database WHERE datname = 'dubflow'" | grep -q 1 ||
		psql "$(pg_url postgres)" -Xq -c 'CREATE DATABASE dubflow'
}

pg_url() { echo "postgres://postgres@127.0.0.1:${PG_PORTS[0]},127.0.0.1:${PG_PORTS[1]}/$1?sslmode=disable&target_session_attrs=read-write&connect_timeout=5"; }

# ---------------------------------------------------------------- MinIO, HAProxy

minio_start() {
	local n=$1 i=$(($1 - 1)) drives=() k
	for k in 1 2 3 4; do
		drives+=("http://127.0.0.1:${MINIO_PORTS[$k - 1]}$HA/minio/drive$k")
	done
	# MINIO_CI_CD: the drives share the root file system, which a production
	# MinIO refuses; _MINIO_SERVER_LOCAL: in a container MinIO waits for an
	# address other than the loopback's.
	MINIO_ROOT_USER=${S3_ACCESS_KEY:-minioadmin} MINIO_ROOT_PASSWORD=${S3_SECRET_KEY:-minioadmin} MINIO_BROWSER=off \
		MINIO_CI_CD=1 _MINIO_SERVER_LOCAL=127.0.0.1:${MINIO_PORTS[$i]} \
		daemon "minio$n" "$(id -un)" "$ROOT/.tools/minio" server --quiet --address "127.0.0.1:${MINIO_PORTS[$i]}" "${drives[@]}"
}

minio_up() {
	[[ -x $ROOT/.tools/minio ]] || die "minio: .tools/minio missing (scripts/stack.sh up builds it)"
	local n
	for n in 1 2 3 4; do
		mkdir -p "$HA/minio/drive$n"
		minio_start "$n"
	done
	cat >"$HA/haproxy.cfg" <<EOF
global
  maxconn 2000
defaults
  mode http
  timeout connect 3s
  timeout client 10m
  timeout server 10m
  retries 2
  option redispatch
frontend s3
  bind 127.0.0.1:$MINIO_LB
  default_backend minio
backend minio
  balance leastconn
  option httpchk GET /minio/health/live
  http-check expect status 200
  default-server inter 1s fall 2 rise 2
$(for n in 1 2 3 4; do echo "  server minio$n 127.0.0.1:${MINIO_PORTS[$n - 1]} check"; done)
EOF
	daemon haproxy "$(id -un)" haproxy -db -f "$HA/haproxy.cfg"
	wait_for "minio set" 120 curl -fs -o /dev/null "http://127.0.0.1:$MINIO_LB/minio/health/cluster"
}

# ---------------------------------------------------------------- commands

write_env() {
	{
		echo "# Written by scripts/ha.sh: the HA engines; make up-ha starts the stack on them."
		echo "export AMQP_URL='$(CLUSTER_DIR=$HA/rabbit "$ROOT/scripts/cluster.sh" urls)'"
		echo "export DATABASE_URL='$(pg_url dubflow)'"
		echo "export S3_ENDPOINT='127.0.0.1:$MINIO_LB'"
	} >"$DEV/ha.env"
}

cmd_up() {
	local sync=true
	case ${1:-} in
	--async) sync=false ;;
	"") ;;
	*) die "usage: ha.sh up [--async]" ;;
	esac
	if [[ -f $HA/pg1/patroni.yml ]] && ! grep -q "synchronous_mode: $sync" "$HA/pg1/patroni.yml"; then
		die "postgres: .devstack/ha was made with the other replication mode; scripts/ha.sh down first"
	fi
	ensure_packages
	mkdir -p "$HA/pids"
	chmod 755 "$DEV" "$HA"
	answers 5781 || CLUSTER_DIR=$HA/rabbit "$ROOT/scripts/cluster.sh" up >/dev/null
	etcd_up
	pg_up "$sync"
	minio_up
	write_env
	log "ready: postgres primary node $(primary), $([[ $sync == true ]] && echo synchronous || echo asynchronous) standby; source .devstack/ha.env"
}

cmd_down() {
	local name
	for name in haproxy minio1 minio2 minio3 minio4 pg1 pg2; do
		if running "$name"; then kill "$(cat "$(pidfile "$name")")" 2>/dev/null || true; fi
	done
	for name in pg1 pg2; do
		local pm=$HA/$name/data/postmaster.pid
		wait_for "$name stopped" 60 bash -c "! kill -0 \$(head -n1 '$pm' 2>/dev/null) 2>/dev/null"
	done
	if running etcd; then kill "$(cat "$(pidfile etcd)")" || true; fi
	CLUSTER_DIR=$HA/rabbit "$ROOT/scripts/cluster.sh" down >/dev/null 2>&1 || true
	rm -rf "$HA" "$DEV/ha.env"
	log "stopped; .devstack/ha removed"
}

cmd_status() {
	local n
	for n in 1 2; do
		local r=down
		role "$n" /primary && r=primary
		role "$n" /sync && r="synchronous standby"
		[[ $r == down ]] && role "$n" /replica && r=standby
		echo "postgres node $n (127.0.0.1:${PG_PORTS[$n - 1]}): $r"
	done
	for n in 1 2 3 4; do
		local s=down
		curl -fsS -o /dev/null --max-time 2 "http://127.0.0.1:${MINIO_PORTS[$n - 1]}/minio/health/live" 2>/dev/null && s=live
		echo "minio $n (127.0.0.1:${MINIO_PORTS[$n - 1]}): $s"
	done
	for n in 5781 5782 5783; do
		echo "rabbitmq 127.0.0.1:$n: $(answers "$n" && echo up || echo down)"
	done
}

cmd_kill_primary() {
	local p pm
	p=$(primary) || die "no primary"
	pm=$(head -n1 "$HA/pg$p/data/postmaster.pid")
	kill -9 -- "-$(cat "$(pidfile "pg$p")")" 2>/dev/null || true
	kill -9 "$pm" 2>/dev/null || true
	log "postgres node $p lost (Patroni and PostgreSQL SIGKILLed); scripts/ha.sh start-pg $p brings it back"
}

case ${1:-} in
up) shift && cmd_up "$@" ;;
down) cmd_down ;;
status) cmd_status ;;
env) cat "$DEV/ha.env" ;;
kill-primary) cmd_kill_primary ;;
start-pg) pg_start "${2:?node 1 or 2}" ;;
kill-minio) kill -9 "$(cat "$(pidfile "minio${2:?process 1..4}")")" ;;
start-minio) minio_start "${2:?process 1..4}" ;;
*) sed -n '2,16p' "$0" >&2 && exit 2 ;;
esac
