#!/usr/bin/env bash
# cluster.sh: a private 3-node RabbitMQ cluster on local ports, for the
# failover test (`make cluster-test`). It never touches the machine's own
# RabbitMQ node.
#
#   scripts/cluster.sh up          start nodes 1..3, join 2 and 3 to 1, print AMQP_URL
#   scripts/cluster.sh down        stop every node and remove the data folder
#   scripts/cluster.sh kill PORT   SIGKILL the node serving AMQP on PORT (a crash)
#   scripts/cluster.sh start PORT  start that node again; it rejoins the cluster
#   scripts/cluster.sh urls        print the comma-separated AMQP_URL of the cluster
#   scripts/cluster.sh status      rabbitmqctl cluster_status of the first live node
#
# Each node has its own name (dubflow-cluster-N@localhost), AMQP port
# (CLUSTER_BASE_PORT+N-1), distribution port (CLUSTER_DIST_BASE_PORT+N-1) and
# data folder (CLUSTER_DIR/nodeN), owned by the rabbitmq user because the
# Debian wrapper runs the server as that user. The nodes share one Erlang
# cookie: they all run as the rabbitmq user, whose home holds it
# (/var/lib/rabbitmq/.erlang.cookie), and rabbitmqctl reads the same one.
#
# Settings (environment):
#   CLUSTER_DIR              data and logs (default /tmp/dubflow-cluster)
#   CLUSTER_BASE_PORT        first AMQP port (default 5781)
#   CLUSTER_DIST_BASE_PORT   first Erlang distribution port (default 25781)
set -euo pipefail

CLUSTER_DIR=${CLUSTER_DIR:-/tmp/dubflow-cluster}
CLUSTER_BASE_PORT=${CLUSTER_BASE_PORT:-5781}
CLUSTER_DIST_BASE_PORT=${CLUSTER_DIST_BASE_PORT:-25781}
NODES=(1 2 3)

node_name() { echo "dubflow-cluster-$1@localhost"; }
node_port() { echo $((CLUSTER_BASE_PORT + $1 - 1)); }
node_dir() { echo "$CLUSTER_DIR/node$1"; }
ctl() { local n=$1; shift; rabbitmqctl -q -n "$(node_name "$n")" "$@"; }

urls() {
	local out=() n
	for n in "${NODES[@]}"; do
		out+=("amqp://guest:guest@127.0.0.1:$(node_port "$n")/")
	done
	(IFS=,; echo "${out[*]}")
}

prepare() {
	local n=$1 dir
	dir=$(node_dir "$n")
	mkdir -p "$dir/mnesia" "$dir/log"
	echo '[].' >"$dir/enabled_plugins"
	# The machine's own config may pin the listener to 5672; this one replaces it.
	printf 'listeners.tcp.local = 127.0.0.1:%s\n' "$(node_port "$n")" >"$dir/rabbitmq.conf"
	# Keeps the machine's rabbitmq-env.conf (node name, ports) out.
	echo 'export ERL_FLAGS="-kernel inet_dist_use_interface {127,0,0,1}"' >"$dir/rabbitmq-env.conf"
	chown -R rabbitmq:rabbitmq "$dir"
}

start_node() {
	local n=$1 dir
	dir=$(node_dir "$n")
	(cd "$dir" && env RABBITMQ_NODENAME="$(node_name "$n")" \
		RABBITMQ_NODE_PORT="$(node_port "$n")" \
		RABBITMQ_DIST_PORT=$((CLUSTER_DIST_BASE_PORT + n - 1)) \
		RABBITMQ_CONFIG_FILE="$dir/rabbitmq.conf" \
		RABBITMQ_CONF_ENV_FILE="$dir/rabbitmq-env.conf" \
		RABBITMQ_MNESIA_BASE="$dir/mnesia" \
		RABBITMQ_LOG_BASE="$dir/log" \
		RABBITMQ_ENABLED_PLUGINS_FILE="$dir/enabled_plugins" \
		RABBITMQ_PID_FILE="$dir/rabbit.pid" \
		rabbitmq-server -detached)
	ctl "$n" wait "$dir/rabbit.pid" --timeout 90
}

up() {
	local n
	if [ -d "$CLUSTER_DIR" ]; then
		down
	fi
	mkdir -p "$CLUSTER_DIR"
	chmod 755 "$CLUSTER_DIR"
	for n in "${NODES[@]}"; do
		prepare "$n"
		start_node "$n"
	done
	for n in "${NODES[@]:1}"; do
		ctl "$n" stop_app
		ctl "$n" join_cluster "$(node_name 1)"
		ctl "$n" start_app
	done
	ctl 1 await_online_nodes "${#NODES[@]}" --timeout 60 >/dev/null 2>&1 || true
	running=$(ctl 1 eval 'length(rabbit_nodes:all_running()).')
	if [ "$running" != "${#NODES[@]}" ]; then
		echo "cluster.sh: $running of ${#NODES[@]} nodes running" >&2
		exit 1
	fi
	echo "AMQP_URL=$(urls)"
}

node_of_port() {
	local n
	for n in "${NODES[@]}"; do
		if [ "$(node_port "$n")" = "$1" ]; then
			echo "$n"
			return 0
		fi
	done
	echo "cluster.sh: no node serves port $1" >&2
	exit 1
}

pid_of() { cat "$(node_dir "$1")/rabbit.pid" 2>/dev/null || true; }

kill_port() {
	local n pid
	n=$(node_of_port "$1")
	pid=$(pid_of "$n")
	[ -n "$pid" ] || { echo "cluster.sh: node $n has no pid file" >&2; exit 1; }
	kill -KILL "$pid"
	for _ in $(seq 1 300); do
		if ! kill -0 "$pid" 2>/dev/null; then
			rm -f "$(node_dir "$n")/rabbit.pid"
			echo "killed $(node_name "$n") (pid $pid)"
			return 0
		fi
		sleep 0.1
	done
	echo "cluster.sh: pid $pid still alive" >&2
	exit 1
}

down() {
	local n pid
	for n in "${NODES[@]}"; do
		pid=$(pid_of "$n")
		if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
			ctl "$n" stop "$(node_dir "$n")/rabbit.pid" >/dev/null 2>&1 || kill -KILL "$pid" || true
		fi
	done
	rm -rf "$CLUSTER_DIR"
}

status() {
	local n
	for n in "${NODES[@]}"; do
		if ctl "$n" cluster_status 2>/dev/null; then
			return 0
		fi
	done
	echo "cluster.sh: no node answers" >&2
	return 1
}

case "${1:-}" in
up) up ;;
down) down ;;
kill) kill_port "${2:?usage: cluster.sh kill PORT}" ;;
start) start_node "$(node_of_port "${2:?usage: cluster.sh start PORT}")" ;;
urls) urls ;;
status) status ;;
*)
	sed -n '2,11p' "$0" >&2
	exit 2
	;;
esac
