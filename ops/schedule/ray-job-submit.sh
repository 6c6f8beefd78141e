#!/usr/bin/env bash
# loadtest soak as a Ray job on a running Ray cluster (`ray up cluster/ray-h100.yaml`): the driver
# runs on the head node, provisions the fleet there and replays for eight hours; `ray job logs
# --follow JOB_ID` shows its output and `ray job status` its end (the soak's exit code fails the
# job when an SLO window or drift check failed). Run from the repository root.
set -euo pipefail
ADDRESS="${RAY_DASHBOARD_ADDRESS:-http://127.0.0.1:8265}"
exec ray job submit --address "$ADDRESS" --working-dir . --submission-id "loadtest-soak-$(date -u +%Y%m%dT%H%M%SZ)" \
  -- loadtest soak --fleet h100-70b --address auto --scenario soak --duration 8h --window 5m --slo-from-scenario \
  --out /mnt/shared/loadtest --metrics-port 9464 --metrics-linger 30
