#!/usr/bin/env bash
# stack.sh: the local dubflow stack (RabbitMQ, Postgres, MinIO and the workers).
#
#   scripts/stack.sh up [--infra-only]   start what is missing, write .devstack/env
#   scripts/stack.sh down                stop the workers, then what `up` started
#   scripts/stack.sh status              what runs where
#   scripts/stack.sh env                 print the export lines of .devstack/env
#   scripts/stack.sh packages            install the media/speech packages and
#                                        what builds the loaded recogniser
#                                        (what is missing; `make packages`)
#
#   scripts/stack.sh with-infra CMD...   `up --infra-only`, run CMD with the
#                                        stack's environment, then stop what
#                                        this call started (`make test`)
#
# Each backing service is found at its configured address (AMQP_URL,
# DATABASE_URL, S3_ENDPOINT). Whatever already answers there is used and never
# stopped; otherwise a private instance is started with its data under
# .devstack/ and recorded in .devstack/started/, so `down` stops only that.
# A server that another checkout's stack started (its data or working folder
# is another checkout's) is never adopted: for MinIO at the default endpoint
# a private server is started on the next free port instead; otherwise
# stack.sh stops with a message naming that checkout.
#
# Settings (environment):
#   AMQP_URL, DATABASE_URL, S3_ENDPOINT, S3_ACCESS_KEY, S3_SECRET_KEY,
#   S3_BUCKET, S3_USE_SSL   the stack (defaults as in the README's configuration table)
#   DISPATCHER_API_TOKEN     kept in .devstack/ when unset (generated once)
#   DUBFLOW_API_TOKEN        the console's token, kept in .devstack/ when unset (generated once)
#   S3_PRESIGN_ACCESS_KEY, S3_PRESIGN_SECRET_KEY
#                            the storage user the console signs uploads and links as (write
#                            uploads/, read outputs/ only; migrate creates it on MinIO):
#                            dubflow-presign and a secret kept in .devstack/ when unset;
#                            S3_PRESIGN_ACCESS_KEY= (empty) for none (the console then signs
#                            with S3_ACCESS_KEY and warns)
#   CONSOLE_HTTP_ADDR        where the console listens (127.0.0.1:8080)
#   STACK_WAIT_SECONDS       how long to wait for a service to be ready (90)
#   DOWN_GRACE_SECONDS       how long a worker gets to exit on SIGTERM (30)
#   STACK_SKIP_PACKAGES=1    do not check or install the media/speech packages
#   STACK_TEST_POSTGRES_PORT with-infra: CMD gets its own PostgreSQL on this port
#                            (max_connections 400, fsync off; `make test` sets it)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
DEV=$ROOT/.devstack
# Which addresses the caller gave (as opposed to the defaults below).
S3_ENDPOINT_GIVEN=${S3_ENDPOINT:+1}
MINIO_VERSION=v0.0.0-20260212201848-7aac2a2c5b7c
MEDIA_PACKAGES=(ffmpeg pocketsphinx pocketsphinx-en-us apertium apertium-eng-spa apertium-eng-cat espeak-ng flite sox)
# TEST_PACKAGES: what only the tests need (the console's browser tests drive
# Debian's chromium; services/chaos's failover test runs a PostgreSQL pair
# under Patroni with etcd); installed by `with-infra`, the way `make test` runs.
TEST_PACKAGES=(chromium patroni etcd-server)
# BUILD_PACKAGES: what builds the asr worker's recogniser with its decoders
# kept loaded in process (scripts/ps-lib.sh; cgo's gcc is assumed).
BUILD_PACKAGES=(libpocketsphinx-dev libsphinxbase-dev pkg-config)
OPS_BASE_PORT=18081

: "${AMQP_URL:=amqp://guest:guest@localhost:5672/}"
: "${DATABASE_URL:=postgres://postgres@localhost:5432/dubflow?sslmode=disable}"
: "${S3_ENDPOINT:=localhost:9000}"
: "${S3_ACCESS_KEY:=minioadmin}"
: "${S3_SECRET_KEY:=minioadmin}"
: "${S3_BUCKET:=dubflow}"
: "${S3_USE_SSL:=false}"
: "${STACK_WAIT_SECONDS:=90}"
: "${DOWN_GRACE_SECONDS:=30}"

log() { printf 'stack: %s\n' "$*" >&2; }
die() {
	printf 'stack: error: %s\n' "$*" >&2
	exit 1
}

# ---------------------------------------------------------------- helpers

# split_hostport URL DEFAULT_PORT: prints "host port" of a URL or host:port.
split_hostport() {
	local rest=${1#*://} host port=""
	rest=${rest%%/*}
	rest=${rest%%\?*}
	rest=${rest##*@}
	# A multi-host URL (an HA stack's postgres://…@h1:p1,h2:p2/db): the first.
	rest=${rest%%,*}
	if [[ $rest == \[*\]* ]]; then
		host=${rest%%]*}
		host=${host#[}
		port=${rest##*]}
		port=${port#:}
	elif [[ $rest == *:* ]]; then
		host=${rest%:*}
		port=${rest##*:}
	else
		host=$rest
	fi
	printf '%s %s\n' "${host:-localhost}" "${port:-$2}"
}

# url_userinfo URL: prints "user password" (password may be empty).
url_userinfo() {
	local rest=${1#*://} user="" pass=""
	rest=${rest%%/*}
	if [[ $rest == *@* ]]; then
		rest=${rest%@*}
		user=${rest%%:*}
		[[ $rest == *:* ]] && pass=${rest#*:}
	fi
	printf '%s %s\n' "$user" "$pass"
}

# url_path URL: the path after host[:port]/, without the query.
url_path() {
	local rest=${1#*://}
	rest=${rest%%\?*}
	if [[ $rest == */* ]]; then
		printf '%s\n' "${rest#*/}"
	fi
}

# answers HOST PORT: something accepts TCP connections there.
answers() {
	# shellcheck disable=SC2016 # $0 and $1 expand in the inner shell.
	timeout 3 bash -c 'exec 3<>"/dev/tcp/$0/$1"' "$1" "$2" 2>/dev/null
}

is_local() {
	case $1 in localhost | 127.* | ::1) return 0 ;; *) return 1 ;; esac
}

# wait_for NAME SECONDS COMMAND...: run COMMAND until it succeeds.
wait_for() {
	local name=$1 secs=$2 start=$SECONDS
	shift 2
	until "$@"; do
		if ((SECONDS - start >= secs)); then
			return 1
		fi
		sleep 0.5
	done
	log "$name ready"
}

# as_root COMMAND...: root runs it, others go through non-interactive sudo.
as_root() {
	if ((EUID == 0)); then
		"$@"
	elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then
		sudo -n "$@"
	else
		die "'$*' needs root (run as root or with password-less sudo)"
	fi
}

APT_UPDATED=0
NEWLY_INSTALLED=0
# ensure_packages PACKAGE...: install the Debian packages not installed yet;
# NEWLY_INSTALLED tells whether this call installed anything.
ensure_packages() {
	local missing=() p
	NEWLY_INSTALLED=0
	for p in "$@"; do
		dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	command -v apt-get >/dev/null || die "missing packages ${missing[*]} and no apt-get to install them"
	if ((!APT_UPDATED)); then
		log "apt-get update"
		as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || die "apt-get update failed"
		APT_UPDATED=1
	fi
	log "installing ${missing[*]}"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null ||
		die "apt-get install ${missing[*]} failed"
	NEWLY_INSTALLED=1
}

# service_starting USER PROCESS: the package just installed started its
# system service (a PROCESS of USER runs), so it may soon answer.
service_starting() {
	command -v pgrep >/dev/null && pgrep -u "$1" -x "$2" >/dev/null
}

# run_as USER COMMAND...: run a command as a service user.
run_as() {
	local u=$1
	shift
	# From /, since the service user may not enter the checkout.
	if [[ $(id -un) == "$u" ]]; then
		(cd / && "$@")
	else
		(cd / && as_root runuser -u "$u" -- "$@")
	fi
}

# data_dir NAME USER: a folder for a private service's data that USER can
# use: .devstack/NAME, or a fixed folder under /var/tmp when the checkout is
# not reachable by USER (a clone under /root, say).
data_dir() {
	local name=$1 u=$2 dir=$DEV/$1
	mkdir -p "$dir"
	as_root chown "$u:" "$dir"
	if ! run_as "$u" test -w "$dir" 2>/dev/null; then
		dir=/var/tmp/dubflow-devstack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)/$name
		as_root mkdir -p "$dir"
		as_root chmod 755 "$(dirname "$dir")"
		as_root chown "$u:" "$dir"
	fi
	printf '%s\n' "$dir"
}

# record NAME KEY=VALUE...: remember what this script started.
record() {
	local name=$1
	shift
	mkdir -p "$DEV/started"
	printf '%s\n' "$@" >"$DEV/started/$name"
}

# forget NAME: drop a record whose process is gone (its data stays).
forget() {
	rm -f "$DEV/started/$1"
}

# recorded NAME KEY: a value from the record, empty when absent.
recorded() {
	[[ -f $DEV/started/$1 ]] || return 0
	sed -n "s/^$2=//p" "$DEV/started/$1"
}

# pid_alive PID: the process runs (and is no zombie).
pid_alive() {
	[[ -n ${1:-} ]] && kill -0 "$1" 2>/dev/null || return 1
	local state
	state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[[ $state != Z ]]
}

# free_port FROM: the first free loopback port from FROM up, skipping the
# ports RabbitMQ's tools use.
free_port() {
	local p=$1
	while answers 127.0.0.1 "$p" || ((p == 4369 || (p >= 35672 && p <= 35682))); do
		p=$((p + 1))
	done
	printf '%s\n' "$p"
}

# listener_pid PORT: the process listening on the local TCP port, if visible.
listener_pid() {
	ss -Hltnp "sport = :$1" 2>/dev/null | grep -o 'pid=[0-9]*' | head -n1 | cut -d= -f2
}

# foreign_owner PORT: when the server listening on PORT belongs to another
# checkout — an argument (its data folder) lies in another checkout's
# .devstack/ or /var/tmp/dubflow-devstack-* folder, or its working folder is
# another checkout — print that folder; otherwise fail.
foreign_owner() {
	local pid arg cwd mine
	pid=$(listener_pid "$1")
	[[ -n $pid && -r /proc/$pid/cmdline ]] || return 1
	mine=/var/tmp/dubflow-devstack-$(printf '%s' "$ROOT" | md5sum | cut -c1-8)
	while IFS= read -r -d '' arg; do
		arg=${arg#--*=} # --config-file=PATH (a server Patroni started)
		case $arg in
		*/.devstack | */.devstack/*)
			arg=${arg%%/.devstack*}
			[[ $arg == "$ROOT" ]] || { printf '%s\n' "$arg"; return 0; }
			;;
		/var/tmp/dubflow-devstack-*)
			[[ $arg == "$mine" || $arg == "$mine"/* ]] || { printf '%s\n' "$arg"; return 0; }
			;;
		esac
	done <"/proc/$pid/cmdline"
	cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) || return 1
	if [[ $cwd != "$ROOT" && -f $cwd/scripts/stack.sh ]]; then
		printf '%s\n' "$cwd"
		return 0
	fi
	return 1
}

# refuse_foreign NAME HOST PORT SETTING: stop when the server at a local
# HOST:PORT belongs to another checkout.
refuse_foreign() {
	local owner
	is_local "$2" || return 0
	owner=$(foreign_owner "$3") || return 0
	die "$1: the server on $2:$3 belongs to the checkout in $owner (pid $(listener_pid "$3")); " \
		"this stack does not adopt it. Stop it there (scripts/stack.sh down in $owner) or set $4 to another address"
}

# ---------------------------------------------------------------- RabbitMQ

rabbit_up() {
	local host port node dir dist user pass vhost
	read -r host port < <(split_hostport "$AMQP_URL" 5672)
	node=$(recorded rabbitmq node)
	if answers "$host" "$port"; then
		if rabbit_mine; then
			log "rabbitmq: private node $node answers at $host:$port"
			RABBIT_NODE=$node
		else
			forget rabbitmq
			refuse_foreign rabbitmq "$host" "$port" AMQP_URL
			log "rabbitmq: using the broker at $host:$port"
		fi
		return
	fi
	is_local "$host" || die "rabbitmq: nothing answers at $host:$port (AMQP_URL), and it is not this machine"
	NEWLY_INSTALLED=0
	command -v rabbitmq-server >/dev/null || ensure_packages rabbitmq-server
	if ((NEWLY_INSTALLED)) && [[ -z $node ]] && service_starting rabbitmq beam.smp &&
		wait_for "rabbitmq (system service)" "$STACK_WAIT_SECONDS" answers "$host" "$port"; then
		log "rabbitmq: using the broker the package started at $host:$port"
		return
	fi
	node=${node:-dubflow-$port@localhost}
	dir=$(data_dir rabbitmq rabbitmq)
	dist=$(recorded rabbitmq dist_port)
	if [[ -z $dist ]] || answers 127.0.0.1 "$dist"; then
		dist=$(free_port $((port + 20000)))
	fi
	mkdir -p "$dir/mnesia" "$dir/log" 2>/dev/null || as_root mkdir -p "$dir/mnesia" "$dir/log"
	as_root sh -c "echo '[].' >'$dir/enabled_plugins' &&
		echo 'listeners.tcp.local = 127.0.0.1:$port' >'$dir/rabbitmq.conf' &&
		echo 'export ERL_FLAGS=\"-kernel inet_dist_use_interface {127,0,0,1}\"' >'$dir/rabbitmq-env.conf' &&
		chown -R rabbitmq: '$dir'"
	log "rabbitmq: starting private node $node on 127.0.0.1:$port (data in $dir)"
	as_root env RABBITMQ_NODENAME="$node" RABBITMQ_DIST_PORT="$dist" \
		RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
		RABBITMQ_MNESIA_BASE="$dir/mnesia" RABBITMQ_LOG_BASE="$dir/log" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" RABBITMQ_PID_FILE="$dir/rabbit.pid" \
		rabbitmq-server -detached 9>&-
	record rabbitmq "node=$node" "dir=$dir" "dist_port=$dist" "pid_file=$dir/rabbit.pid"
	as_root rabbitmqctl -q -n "$node" wait "$dir/rabbit.pid" --timeout "$STACK_WAIT_SECONDS" >/dev/null ||
		die "rabbitmq: node $node did not start; see $dir/log/$node.log"
	wait_for rabbitmq "$STACK_WAIT_SECONDS" answers "$host" "$port" ||
		die "rabbitmq: node $node does not accept connections on $port; see $dir/log/$node.log"
	RABBIT_NODE=$node
	# The URL may name a user or virtual host the fresh node lacks.
	read -r user pass < <(url_userinfo "$AMQP_URL")
	vhost=$(url_path "$AMQP_URL")
	vhost=${vhost:-/}
	if [[ $vhost != / ]]; then
		as_root rabbitmqctl -q -n "$node" add_vhost "$vhost" 2>/dev/null || true
	fi
	if [[ -n $user && $user != guest ]]; then
		as_root rabbitmqctl -q -n "$node" add_user "$user" "$pass" 2>/dev/null || true
		as_root rabbitmqctl -q -n "$node" set_user_tags "$user" administrator
	fi
	as_root rabbitmqctl -q -n "$node" set_permissions -p "$vhost" "${user:-guest}" '.*' '.*' '.*'
}

# rabbit_mine: the broker answering is the private node this script started.
rabbit_mine() {
	local pid_file
	pid_file=$(recorded rabbitmq pid_file)
	[[ -n $pid_file ]] && pid_alive "$(as_root cat "$pid_file" 2>/dev/null)"
}

rabbit_down() {
	local node pid_file
	node=$(recorded rabbitmq node)
	[[ -n $node ]] || return 0
	pid_file=$(recorded rabbitmq pid_file)
	if [[ -f $pid_file ]] && pid_alive "$(cat "$pid_file")"; then
		log "rabbitmq: stopping private node $node"
		as_root rabbitmqctl -q -n "$node" stop "$pid_file" >/dev/null ||
			die "rabbitmq: stop $node failed"
	fi
	rm -f "$DEV/started/rabbitmq"
}

# ---------------------------------------------------------------- Postgres

pg_bin() {
	local d
	d=$(compgen -G '/usr/lib/postgresql/*/bin' | sort -V | tail -n1)
	[[ -n $d ]] || die "postgres: no server binaries under /usr/lib/postgresql"
	printf '%s\n' "$d"
}

postgres_up() {
	local host port dir bin user
	read -r host port < <(split_hostport "$DATABASE_URL" 5432)
	[[ $DATABASE_URL == postgres://* || $DATABASE_URL == postgresql://* ]] ||
		die "postgres: DATABASE_URL must be a postgres:// URL"
	if answers "$host" "$port"; then
		if postgres_mine; then
			log "postgres: private server answers at $host:$port"
		else
			forget postgres
			refuse_foreign postgres "$host" "$port" DATABASE_URL
			log "postgres: using the server at $host:$port"
		fi
		return
	fi
	is_local "$host" || die "postgres: nothing answers at $host:$port (DATABASE_URL), and it is not this machine"
	NEWLY_INSTALLED=0
	compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || ensure_packages postgresql
	if ((NEWLY_INSTALLED)) && [[ -z $(recorded postgres dir) ]] && service_starting postgres postgres &&
		wait_for "postgres (system service)" "$STACK_WAIT_SECONDS" answers "$host" "$port"; then
		log "postgres: using the server the package started at $host:$port"
		return
	fi
	bin=$(pg_bin)
	dir=$(data_dir postgres postgres)
	read -r user _ < <(url_userinfo "$DATABASE_URL")
	if [[ ! -f $dir/data/PG_VERSION ]]; then
		log "postgres: initdb in $dir/data"
		run_as postgres "$bin/initdb" -D "$dir/data" -A trust -U "${user:-postgres}" -E UTF8 --no-locale >"$DEV/initdb.log" 2>&1 ||
			die "postgres: initdb failed; see $DEV/initdb.log"
	fi
	log "postgres: starting private server on $host:$port (data in $dir/data)"
	record postgres "dir=$dir/data" "bin=$bin"
	run_as postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$STACK_WAIT_SECONDS" \
		-o "-p $port -c listen_addresses=localhost -k ''" start >/dev/null 9>&- ||
		die "postgres: pg_ctl start failed; see $dir/postgres.log"
	wait_for postgres "$STACK_WAIT_SECONDS" answers "$host" "$port" ||
		die "postgres: server does not accept connections on $port; see $dir/postgres.log"
}

# postgres_mine: the server answering is the private one this script started.
postgres_mine() { pg_private_mine postgres; }

# pg_private_mine NAME: the private server recorded as NAME runs.
pg_private_mine() {
	local dir
	dir=$(recorded "$1" dir)
	[[ -n $dir ]] && pid_alive "$(as_root head -n1 "$dir/postmaster.pid" 2>/dev/null)"
}

postgres_down() { pg_private_down postgres postgres; }

# pg_private_down NAME LABEL: stops the private server recorded as NAME.
pg_private_down() {
	local dir bin
	dir=$(recorded "$1" dir)
	[[ -n $dir ]] || return 0
	bin=$(recorded "$1" bin)
	if pg_private_mine "$1"; then
		log "$2: stopping private server ($dir)"
		run_as postgres "$bin/pg_ctl" -D "$dir" -m fast -w -t "$STACK_WAIT_SECONDS" stop >/dev/null ||
			die "$2: pg_ctl stop failed"
	fi
	rm -f "$DEV/started/$1"
}

# testpg_up PORT: the tests' own PostgreSQL on PORT (`with-infra` with
# STACK_TEST_POSTGRES_PORT set, as `make test` does). The suite runs several
# packages, each with several stacks of workers, at once; a shared server's
# max_connections (Debian's 100) is not sized for that, and a throw-away
# server need not flush to disk: max_connections 400, fsync off. Its data
# lives under .devstack/testpg; it is stopped by the call that started it.
testpg_up() {
	local port=$1 dir bin
	if answers localhost "$port"; then
		testpg_mine || die "postgres (tests): port $port answers but is not this checkout's test server; set TEST_POSTGRES_PORT"
		log "postgres (tests): private server answers at localhost:$port"
		return
	fi
	forget testpg
	compgen -G '/usr/lib/postgresql/*/bin/pg_ctl' >/dev/null || ensure_packages postgresql
	bin=$(pg_bin)
	dir=$(data_dir testpg postgres)
	if [[ ! -f $dir/data/PG_VERSION ]]; then
		run_as postgres "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --no-locale >"$DEV/testpg-initdb.log" 2>&1 ||
			die "postgres (tests): initdb failed; see $DEV/testpg-initdb.log"
	fi
	log "postgres (tests): starting private server on localhost:$port (data in $dir/data)"
	record testpg "dir=$dir/data" "bin=$bin"
	run_as postgres "$bin/pg_ctl" -D "$dir/data" -l "$dir/postgres.log" -w -t "$STACK_WAIT_SECONDS" \
		-o "-p $port -c listen_addresses=localhost -k '' -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" \
		start >/dev/null 9>&- ||
		die "postgres (tests): pg_ctl start failed; see $dir/postgres.log"
	wait_for "postgres (tests)" "$STACK_WAIT_SECONDS" answers localhost "$port" ||
		die "postgres (tests): server does not accept connections on $port; see $dir/postgres.log"
}

# testpg_mine: the test server answering is the one this checkout started.
testpg_mine() { pg_private_mine testpg; }

testpg_down() { pg_private_down testpg "postgres (tests)"; }

# create_database: the database named by DATABASE_URL exists.
create_database() {
	local prefix query db admin
	command -v psql >/dev/null || ensure_packages postgresql-client
	prefix=${DATABASE_URL%%\?*}
	query=${DATABASE_URL#"$prefix"}
	db=${prefix##*/}
	[[ -n $db && $prefix == *://*/* ]] || die "postgres: DATABASE_URL names no database"
	admin=${prefix%/*}/postgres$query
	if [[ -z $(psql "$admin" -XtAc "SELECT 1 FROM pg_database WHERE datname = '$db'" 2>/dev/null) ]]; then
		log "postgres: creating database $db"
		psql "$admin" -Xq -v ON_ERROR_STOP=1 -c "CREATE DATABASE \"$db\"" ||
			die "postgres: create database $db failed"
	fi
}

# ---------------------------------------------------------------- MinIO

minio_build() {
	[[ -x $ROOT/.tools/minio ]] && return 0
	command -v go >/dev/null || die "minio: go is needed to build .tools/minio"
	log "minio: building .tools/minio (about 5 minutes the first time)"
	mkdir -p "$ROOT/.tools"
	(cd /tmp && GOWORK=off GOBIN=$ROOT/.tools go install "github.com/minio/minio@$MINIO_VERSION") ||
		die "minio: go install github.com/minio/minio@$MINIO_VERSION failed"
}

minio_live() {
	local scheme=http
	[[ $S3_USE_SSL == true ]] && scheme=https
	curl -fsS -o /dev/null --max-time 3 -k "$scheme://$1:$2/minio/health/live" 2>/dev/null
}

minio_up() {
	local host port pid owner
	use_recorded_minio
	read -r host port < <(split_hostport "$S3_ENDPOINT" 9000)
	if answers "$host" "$port"; then
		if minio_mine; then
			log "minio: private server answers at $host:$port"
			return
		fi
		forget minio
		if ! is_local "$host" || ! owner=$(foreign_owner "$port"); then
			log "minio: using the S3 endpoint at $host:$port"
			return
		fi
		if [[ -n $S3_ENDPOINT_GIVEN ]]; then
			die "minio: the server on $host:$port (S3_ENDPOINT) belongs to the checkout in $owner" \
				"(pid $(listener_pid "$port")); this stack does not adopt it. Stop it there" \
				"(scripts/stack.sh down in $owner) or unset S3_ENDPOINT to get a private server on a free port"
		fi
		port=$(free_port $((port + 1)))
		log "minio: the server on $host:9000 belongs to the checkout in $owner; not adopting it," \
			"starting a private one on port $port"
		S3_ENDPOINT=$host:$port
	fi
	is_local "$host" || die "minio: nothing answers at $host:$port (S3_ENDPOINT), and it is not this machine"
	[[ $S3_USE_SSL != true ]] || die "minio: a private MinIO serves plain HTTP; set S3_USE_SSL=false"
	((${#S3_SECRET_KEY} >= 8)) || die "minio: S3_SECRET_KEY must have at least 8 characters"
	command -v curl >/dev/null || ensure_packages curl
	minio_build
	mkdir -p "$DEV/minio" "$DEV/logs"
	log "minio: starting private server on $host:$port (data in $DEV/minio)"
	MINIO_ROOT_USER=$S3_ACCESS_KEY MINIO_ROOT_PASSWORD=$S3_SECRET_KEY MINIO_BROWSER=off \
		setsid "$ROOT/.tools/minio" server --quiet --address "$host:$port" "$DEV/minio" \
		>>"$DEV/logs/minio.log" 2>&1 </dev/null 9>&- &
	pid=$!
	record minio "pid=$pid" "endpoint=$S3_ENDPOINT"
	if ! wait_for minio "$STACK_WAIT_SECONDS" minio_live "$host" "$port"; then
		pid_alive "$pid" || die "minio: exited at start; see $DEV/logs/minio.log"
		die "minio: not live after ${STACK_WAIT_SECONDS}s; see $DEV/logs/minio.log"
	fi
}

# use_recorded_minio: without S3_ENDPOINT given, the private server an
# earlier `up` started (perhaps away from the default port) is the endpoint.
use_recorded_minio() {
	local endpoint
	endpoint=$(recorded minio endpoint)
	if [[ -z $S3_ENDPOINT_GIVEN && -n $endpoint ]] && minio_mine; then
		S3_ENDPOINT=$endpoint
	fi
}

# minio_mine: the endpoint answering is the private MinIO this script started.
minio_mine() {
	local pid
	pid=$(recorded minio pid)
	pid_alive "$pid" && [[ /proc/$pid/exe -ef $ROOT/.tools/minio ]]
}

minio_down() {
	local pid
	pid=$(recorded minio pid)
	[[ -n $pid ]] || return 0
	if pid_alive "$pid"; then
		log "minio: stopping private server (pid $pid)"
		stop_pid "$pid" minio
	fi
	rm -f "$DEV/started/minio"
}

# ---------------------------------------------------------------- workers

# stop_pid PID NAME: SIGTERM, wait DOWN_GRACE_SECONDS, then SIGKILL.
stop_pid() {
	local pid=$1 name=$2 start=$SECONDS
	kill -TERM "$pid" 2>/dev/null || return 0
	while pid_alive "$pid"; do
		if ((SECONDS - start >= DOWN_GRACE_SECONDS)); then
			log "$name: still running after ${DOWN_GRACE_SECONDS}s, sending SIGKILL"
			kill -KILL "$pid" 2>/dev/null || true
			break
		fi
		sleep 0.2
	done
}

# services: "name ops_port" for each line of scripts/services.txt.
services() {
	local i=0 name
	while read -r name; do
		name=${name%%#*}
		[[ -n ${name// /} ]] || continue
		printf '%s %s\n' "$name" $((OPS_BASE_PORT + i))
		i=$((i + 1))
	done <"$ROOT/scripts/services.txt"
}

workers_up() {
	local name port pidf pid bin sum
	mkdir -p "$DEV/logs" "$DEV/pids"
	while read -r name port; do
		bin=$ROOT/bin/$name
		pidf=$DEV/pids/$name.pid
		if [[ ! -x $bin ]]; then
			log "$name: bin/$name not built yet, skipped"
			continue
		fi
		pid=$(cat "$pidf" 2>/dev/null || true)
		sum=$(sha256sum "$bin" | cut -d' ' -f1)
		if pid_alive "$pid"; then
			if [[ $sum == "$(cat "$DEV/pids/$name.sum" 2>/dev/null)" ]]; then
				continue
			fi
			log "$name: bin/$name changed since it started, restarting"
			stop_pid "$pid" "$name"
		fi
		(
			set -a
			# shellcheck source=/dev/null
			source "$DEV/env"
			set +a
			export OPS_ADDR=127.0.0.1:$port
			# Consumers sized to the machine unless the env says otherwise:
			# a step worker one per core, asr one more (README, Sizing).
			if [[ -z ${WORKER_CONCURRENCY:-} ]]; then
				case $name in
				asr) export WORKER_CONCURRENCY=$(($(nproc) + 1)) ;;
				extract_audio | translate | tts | mux_video) WORKER_CONCURRENCY=$(nproc) && export WORKER_CONCURRENCY ;;
				esac
			fi
			cd "$ROOT"
			exec setsid "$bin" >>"$DEV/logs/$name.log" 2>&1 </dev/null
		) 9>&- &
		echo $! >"$pidf"
		echo "$sum" >"$DEV/pids/$name.sum"
		log "$name: started (pid $!, ops on 127.0.0.1:$port, log .devstack/logs/$name.log)"
	done < <(services)
	sleep 1
	while read -r name port; do
		pidf=$DEV/pids/$name.pid
		[[ -f $pidf ]] || continue
		pid_alive "$(cat "$pidf")" || log "$name: exited right after start; see .devstack/logs/$name.log"
	done < <(services)
}

workers_down() {
	local f name pid
	for f in "$DEV"/pids/*.pid; do
		[[ -f $f ]] || continue
		name=$(basename "$f" .pid)
		pid=$(cat "$f")
		if pid_alive "$pid"; then
			log "$name: stopping (pid $pid)"
			stop_pid "$pid" "$name" &
		fi
	done
	wait
	rm -f "$DEV"/pids/*.pid "$DEV"/pids/*.sum
}

# ---------------------------------------------------------------- env, migrate

# export_line NAME VALUE: a single-quoted export line.
export_line() {
	local q="'\\''"
	printf "export %s='%s'\n" "$1" "${2//\'/$q}"
}

write_env() {
	local token
	mkdir -p "$DEV"
	if [[ -n ${DISPATCHER_API_TOKEN:-} ]]; then
		token=$DISPATCHER_API_TOKEN
	else
		if [[ ! -s $DEV/dispatcher_token ]]; then
			(umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$DEV/dispatcher_token")
		fi
		token=$(cat "$DEV/dispatcher_token")
	fi
	local node=${RABBIT_NODE:-$(recorded rabbitmq node)}
	local console_token=${DUBFLOW_API_TOKEN:-}
	if [[ -z $console_token ]]; then
		if [[ ! -s $DEV/console_token ]]; then
			(umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$DEV/console_token")
		fi
		console_token=$(cat "$DEV/console_token")
	fi
	local console_addr=${CONSOLE_HTTP_ADDR:-127.0.0.1:8080}
	local dispatcher_addr=${DISPATCHER_HTTP_ADDR:-127.0.0.1:8090}
	local presign_user=${S3_PRESIGN_ACCESS_KEY-dubflow-presign} presign_secret=${S3_PRESIGN_SECRET_KEY:-}
	if [[ -n $presign_user && -z $presign_secret ]]; then
		if [[ ! -s $DEV/presign_secret ]]; then
			(umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' >"$DEV/presign_secret")
		fi
		presign_secret=$(cat "$DEV/presign_secret")
	fi
	{
		echo "# Written by scripts/stack.sh; source it to use the local stack."
		export_line AMQP_URL "$AMQP_URL"
		export_line DATABASE_URL "$DATABASE_URL"
		export_line S3_ENDPOINT "$S3_ENDPOINT"
		export_line S3_ACCESS_KEY "$S3_ACCESS_KEY"
		export_line S3_SECRET_KEY "$S3_SECRET_KEY"
		export_line S3_BUCKET "$S3_BUCKET"
		export_line S3_USE_SSL "$S3_USE_SSL"
		if [[ -n $presign_user ]]; then
			echo "# The console signs uploads and links as this user (write uploads/, read outputs/ only)."
			export_line S3_PRESIGN_ACCESS_KEY "$presign_user"
			export_line S3_PRESIGN_SECRET_KEY "$presign_secret"
		fi
		export_line DISPATCHER_API_TOKEN "$token"
		export_line DISPATCHER_HTTP_ADDR "$dispatcher_addr"
		export_line DISPATCHER_URL "http://127.0.0.1:${dispatcher_addr##*:}"
		export_line DUBFLOW_API_TOKEN "$console_token"
		export_line CONSOLE_HTTP_ADDR "$console_addr"
		export_line CONSOLE_URL "http://$console_addr"
		if [[ -n $node ]]; then
			echo "# The private RabbitMQ node, for rabbitmqctl and pkg/testenv."
			export_line RABBITMQ_NODENAME "$node"
		fi
	} >"$DEV/env.tmp"
	chmod 600 "$DEV/env.tmp"
	mv "$DEV/env.tmp" "$DEV/env"
}

migrate() {
	local cmd
	if [[ -x $ROOT/bin/migrate ]]; then
		cmd=("$ROOT/bin/migrate")
	elif [[ -f $ROOT/services/migrate/main.go ]]; then
		cmd=(go run ./services/migrate)
	else
		log "migrate: neither bin/migrate nor services/migrate exists yet; bucket, schema and topology skipped"
		return
	fi
	log "migrate: schema, bucket, presign user and broker topology"
	(
		set -a
		# shellcheck source=/dev/null
		source "$DEV/env"
		set +a
		cd "$ROOT"
		"${cmd[@]}"
	) >"$DEV/logs/migrate.log" 2>&1 || {
		tail -n 20 "$DEV/logs/migrate.log" >&2
		die "migrate failed; see .devstack/logs/migrate.log"
	}
}

# ---------------------------------------------------------------- commands

lock() {
	mkdir -p "$DEV"
	exec 9>"$DEV/.lock"
	flock -w 900 9 || die "another stack.sh holds $DEV/.lock"
}

cmd_up() {
	local infra_only=0
	case ${1:-} in
	--infra-only) infra_only=1 ;;
	"") ;;
	*) die "usage: stack.sh up [--infra-only]" ;;
	esac
	lock
	mkdir -p "$DEV/logs"
	cmd_packages
	rabbit_up
	postgres_up
	create_database
	minio_up
	write_env
	migrate
	if ((!infra_only)); then
		workers_up
		log "console: $(grep -o "CONSOLE_URL='[^']*'" "$DEV/env" | cut -d"'" -f2) (log in with DUBFLOW_API_TOKEN from .devstack/env)"
	fi
	log "ready: source .devstack/env"
}

# cmd_packages: the media/speech packages and the build packages, unless
# STACK_SKIP_PACKAGES=1.
cmd_packages() {
	if [[ ${STACK_SKIP_PACKAGES:-0} != 1 ]]; then
		ensure_packages "${MEDIA_PACKAGES[@]}" "${BUILD_PACKAGES[@]}"
	fi
}

cmd_down() {
	lock
	workers_down
	rabbit_down
	postgres_down
	testpg_down
	minio_down
	log "stopped"
}

# cmd_with_infra CMD...: start what the stack lacks, run CMD with the
# stack's environment, then stop what this call started (and nothing that
# ran before it); exits with CMD's status.
cmd_with_infra() {
	local before=" " f name status=0
	(($#)) || die "usage: stack.sh with-infra CMD..."
	for f in "$DEV"/started/*; do
		[[ -f $f ]] && before+="$(basename "$f") "
	done
	cmd_up --infra-only
	if [[ ${STACK_SKIP_PACKAGES:-0} != 1 ]]; then
		ensure_packages "${TEST_PACKAGES[@]}"
	fi
	local test_db=""
	if [[ -n ${STACK_TEST_POSTGRES_PORT:-} ]]; then
		testpg_up "$STACK_TEST_POSTGRES_PORT"
		test_db="postgres://postgres@localhost:$STACK_TEST_POSTGRES_PORT/postgres?sslmode=disable"
	fi
	exec 9>&- # release the lock while CMD runs
	# An interrupt ends CMD, not the clean-up below.
	trap : INT TERM
	(
		set -a
		# shellcheck source=/dev/null
		source "$DEV/env"
		set +a
		if [[ -n $test_db ]]; then set -- env DATABASE_URL="$test_db" "$@"; fi
		"$@"
	) || status=$?
	trap - INT TERM
	lock
	for name in rabbitmq postgres minio testpg; do
		[[ -f $DEV/started/$name && $before != *" $name "* ]] || continue
		log "$name: stopping what this run started"
		"${name/rabbitmq/rabbit}_down"
	done
	return "$status"
}

cmd_status() {
	local host port name pid state
	read -r host port < <(split_hostport "$AMQP_URL" 5672)
	status_line rabbitmq "$host" "$port" "$(recorded rabbitmq node)"
	read -r host port < <(split_hostport "$DATABASE_URL" 5432)
	status_line postgres "$host" "$port" "$(recorded postgres dir)"
	use_recorded_minio
	read -r host port < <(split_hostport "$S3_ENDPOINT" 9000)
	status_line minio "$host" "$port" "$(recorded minio pid)"
	while read -r name port; do
		pid=$(cat "$DEV/pids/$name.pid" 2>/dev/null || true)
		if pid_alive "$pid"; then
			state="running  pid $pid, ops 127.0.0.1:$port"
		elif [[ -x $ROOT/bin/$name ]]; then
			state="stopped"
		else
			state="not built"
		fi
		printf '%-14s %s\n' "$name" "$state"
	done < <(services)
}

status_line() {
	local what=$1 host=$2 port=$3 mine=$4 state
	if answers "$host" "$port"; then
		state="up"
	else
		state="down"
	fi
	if [[ -n $mine ]]; then
		state="$state (private: $mine)"
	elif [[ $state == up ]]; then
		state="up (external)"
	fi
	printf '%-14s %-22s %s\n' "$what" "$host:$port" "$state"
}

cmd_env() {
	use_recorded_minio
	write_env
	cat "$DEV/env"
}

case ${1:-} in
up) cmd_up "${@:2}" ;;
packages) cmd_packages ;;
with-infra) cmd_with_infra "${@:2}" ;;
down) cmd_down ;;
status) cmd_status ;;
env) cmd_env ;;
*)
	echo "usage: scripts/stack.sh up [--infra-only] | down | status | env | packages | with-infra CMD..." >&2
	exit 2
	;;
esac
