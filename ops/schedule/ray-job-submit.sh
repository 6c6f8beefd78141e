#!/usr/bin/env bash
# loadtest soak as a Ray job on a running Ray cluster (`ray up cluster/ray-h100.yaml`): the driver
# runs on the head node, provisions the fleet there and replays for eight hours; `ray job logs
# --follow JOB_ID` shows its output and `ray job status` its end (any exit code but 0 fails the
# job; the log's last lines say which and why). The cluster's image has loadtest installed (the
# project's Dockerfile); --working-dir ships this checkout's scenarios and fleets. `ray job stop`
# sends SIGTERM and, by default, SIGKILL 3 s later: RAY_JOB_STOP_WAIT_TIME_S gives the soak time to
# finish its in-flight requests and write its verdict. Run from the repository root.
set -euo pipefail
ADDRESS="${RAY_DASHBOARD_ADDRESS:-http://127.0.0.1:8265}"
exec ray job submit --address "$ADDRESS" --working-dir . --submission-id "loadtest-soak-$(date -u +%Y%m%dT%H%M%SZ)" \
  --runtime-env-json '{"env_vars": {"RAY_JOB_STOP_WAIT_TIME_S": "300"}}' \
  -- loadtest soak --fleet h100-70b --address auto --scenario soak --duration 8h --window 5m --slo-from-scenario \
  --out /mnt/shared/loadtest --metrics-port 9464 --metrics-linger 30
