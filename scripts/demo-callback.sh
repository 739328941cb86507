#!/usr/bin/env bash
# Sends one correctly signed demo callback to a running gateway.
#   scripts/demo-callback.sh paydemo  [ORDER_CODE] [AMOUNT]   (Standard Webhooks)
#   scripts/demo-callback.sh shipdemo [WAYBILL] [SEQ] [STATUS] (HMAC-SHA256, hex)
# Uses the documented demo secrets unless PAYDEMO_SECRET / SHIPDEMO_SECRET
# are set. Needs bash, openssl, curl.
set -euo pipefail
url=${CALLGATE_URL:-http://127.0.0.1:8080}
source=${1:-paydemo}
case "$source" in
paydemo)
  secret=${PAYDEMO_SECRET:-whsec_Y2FsbGdhdGUtcGF5ZGVtby1kZW1vLWtleS0zMmJ5dGU=}
  order=${2:-ORD-1001}; amount=${3:-1999}
  id="msg_$(date +%s%N)"; ts=$(date +%s)
  body=$(printf '{"orderCode":"%s","paymentNo":"PAY-%s","amount":%s,"status":"SUCCESS","paidAt":"%s"}' \
    "$order" "$id" "$amount" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
  key=$(printf '%s' "${secret#whsec_}" | base64 -d | od -An -vtx1 | tr -d ' \n')
  sig=$(printf '%s.%s.%s' "$id" "$ts" "$body" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64)
  curl -sS -w '\nHTTP %{http_code}\n' -X POST "$url/callbacks/paydemo" \
    -H 'Content-Type: application/json' \
    -H "webhook-id: $id" -H "webhook-timestamp: $ts" -H "webhook-signature: v1,$sig" \
    --data-binary "$body"
  ;;
shipdemo)
  secret=${SHIPDEMO_SECRET:-shipdemo-demo-secret}
  waybill=${2:-WB-2001}; seq=${3:-1}; status=${4:-PICKED_UP}
  body=$(printf '{"waybillNo":"%s","orderCode":"ORD-1001","seq":%s,"status":"%s","location":"Hamburg","occurredAt":"%s"}' \
    "$waybill" "$seq" "$status" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
  sig=$(printf '%s' "$body" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.* //')
  curl -sS -w '\nHTTP %{http_code}\n' -X POST "$url/callbacks/shipdemo" \
    -H 'Content-Type: application/json' -H "X-Signature: $sig" --data-binary "$body"
  ;;
*) echo "usage: $0 paydemo|shipdemo [args]" >&2; exit 2 ;;
esac
