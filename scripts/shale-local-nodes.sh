# scripts/shale-local-nodes.sh: a local 3-node Shale for the benchmark
# scripts, sourced (not run) by bench-vs-etcd and bench-cpu-per-write so
# that both start their clusters the same way. Node i listens for gRPC on
# port FIRST+2(i-1) of 127.0.0.1 and for HTTP on the port after it.
#
# The caller keeps a bash array `pids` (the started processes are appended
# to it) and runs from the repository root with bin/ built. Two variables,
# when set, change where and what runs: SHALE_LOCAL_HOST, the loopback
# address to bind (127.0.0.1), and SHALE_LOCAL_BIN, the shale binary to
# start (bin/shale; scripts/bench-vs-commit starts an earlier commit's).

# shale_local_addrs <first port>: sets shale_initial (the --initial-cluster
# value) and shale_endpoints (the shalectl --endpoints value).
shale_local_addrs() {
  local first=$1 i g
  shale_initial=""
  shale_endpoints=""
  local host=${SHALE_LOCAL_HOST:-127.0.0.1}
  for i in 1 2 3; do
    g=$((first + 2 * (i - 1)))
    shale_initial+="${shale_initial:+,}$i=$host:$g"
    shale_endpoints+="${shale_endpoints:+,}$host:$g"
  done
}

# shale_local_start <dir> <first port> [node flags...]: starts the three
# nodes with their data and logs (shale<i>.log) under dir.
shale_local_start() {
  local dir=$1 first=$2 i g host=${SHALE_LOCAL_HOST:-127.0.0.1}
  shift 2
  shale_local_addrs "$first"
  for i in 1 2 3; do
    g=$((first + 2 * (i - 1)))
    "${SHALE_LOCAL_BIN:-bin/shale}" --node-id "$i" --listen "$host:$g" --http "$host:$((g + 1))" \
      --data-dir "$dir/shale$i" --initial-cluster "$shale_initial" "$@" \
      >"$dir/shale$i.log" 2>&1 &
    pids+=($!)
  done
}

# shale_local_up <endpoints>: whether the cluster takes a write, retried for
# up to 30 s; 1 if it never did.
shale_local_up() {
  local _
  for _ in $(seq 1 150); do
    if bin/shalectl --endpoints "$1" --timeout 2s put bench-probe up >/dev/null 2>&1; then
      return 0
    fi
    sleep 0.2
  done
  return 1
}
