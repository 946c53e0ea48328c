#!/usr/bin/env bash
# soak.sh: the failure-path soak (make soak). SOAK_TASKS (50) short tasks go
# through the five workers, the dlq_recorder and the reconciler, with a TTS
# engine failing 20% of calls at random and a translation engine timing out
# on 10% of calls (fake remote engines inside the test); after the automatic
# retries and one tts_requeue pass every task must be done, or failed with a
# recorded dead letter. Prints the SOAK figures. Uses the local stack
# (started if needed) through .devstack/env.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/stack.sh up --infra-only
set -a
# shellcheck disable=SC1091
source .devstack/env
set +a
export DUBFLOW_SOAK=1 SOAK_TASKS="${SOAK_TASKS:-50}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
status=0
go test -count=1 -timeout 45m -run '^TestSoak$' -v ./services/dlq_recorder >"$log" 2>&1 || status=$?
grep -E 'SOAK|^(--- |ok|FAIL)' "$log" || true
if [ "$status" -ne 0 ]; then
	echo "soak failed; the last lines of the test output:" >&2
	tail -n 60 "$log" >&2
fi
exit "$status"
