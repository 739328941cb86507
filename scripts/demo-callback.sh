#!/usr/bin/env bash
# Sends one correctly signed demo callback to a running gateway.
#   scripts/demo-callback.sh paydemo  [ORDER_CODE] [AMOUNT]   (Standard Webhooks)
#   scripts/demo-callback.sh refund   [ORDER_CODE] [AMOUNT] [REFUND_NO] (paydemo)
#   scripts/demo-callback.sh shipdemo [WAYBILL] [SEQ] [STATUS] (HMAC-SHA256, hex)
#
# paydemo pays ORDER_CODE (default ORD-1001) with AMOUNT (default 1999):
# - The order must exist for the payment to apply, so the script creates it
#   (user 42, AMOUNT) when it is missing, and says so. It uses the mariadb
#   client on the database of CALLGATE_MYSQL_DSN (the gateway's setting;
#   default root:@tcp(127.0.0.1:3306)/callgate). DEMO_CREATE_ORDER=0 skips
#   this (a gateway whose database you cannot reach).
# - The payment number is PAY-<ORDER_CODE> and the event id (webhook-id)
#   msg_PAY-<ORDER_CODE>, the same at every run: running it again for the
#   same order is a platform re-sending the same payment, answered
#   duplicate:true with the first log_id, and nothing is processed twice.
#   DEMO_PAYMENT_NO=X uses another payment number (and event id);
#   DEMO_NEW_PAYMENT=1 makes a new one each run. A second payment for a
#   paid order is reported downstream as payment.exception paid_by_another:
#   the possible double charge, money to give back.
#
# refund refunds AMOUNT (default 500) of ORDER_CODE's payment PAY-<ORDER_CODE>
# as refund REFUND_NO (default RF-<ORDER_CODE>-<AMOUNT>): the order becomes
# PARTIALLY_REFUNDED, or REFUNDED when nothing remains, and order.refunded
# and points.deduct are published (warehouse.cancel on the full refund).
#
# Uses the documented demo secrets unless PAYDEMO_SECRET / SHIPDEMO_SECRET
# are set, and the gateway at CALLGATE_URL (default http://127.0.0.1:8080).
# Needs bash, openssl, curl (and the mariadb or mysql client for paydemo).
set -euo pipefail
url=${CALLGATE_URL:-http://127.0.0.1:8080}
source=${1:-paydemo}

# sql runs one statement on the gateway's database (tab-separated rows).
sql() {
  MYSQL_PWD="$db_pass" "$db_client" --protocol=TCP -h "$db_host" -P "$db_port" -u "$db_user" -N -B "$db_name" -e "$1"
}

# ensure_order creates the order ($1, amount $2) if it is missing.
ensure_order() {
  local order=$1 amount=$2 dsn=${CALLGATE_MYSQL_DSN:-root:@tcp(127.0.0.1:3306)/callgate}
  db_client=$(command -v mariadb || command -v mysql || true)
  if [ -z "$db_client" ]; then
    echo "demo: no mariadb client to check that order $order exists; if it does not, the payment ends FAILED \"order not found\"" >&2
    return
  fi
  # go-sql-driver form: user[:password]@tcp(host[:port])/dbname[?params]
  local re='^([^:@]*)(:(.*))?@tcp\(([^)]*)\)/([^?]+)'
  if ! [[ $dsn =~ $re ]]; then
    echo "demo: cannot read CALLGATE_MYSQL_DSN (want user:password@tcp(host:port)/dbname); set DEMO_CREATE_ORDER=0 to skip creating the order" >&2
    exit 2
  fi
  db_user=${BASH_REMATCH[1]} db_pass=${BASH_REMATCH[3]} db_name=${BASH_REMATCH[5]}
  local hostport=${BASH_REMATCH[4]}
  db_host=${hostport%:*} db_port=3306
  if [ "$hostport" != "$db_host" ]; then db_port=${hostport##*:}; fi

  local row
  if ! row=$(sql "SELECT amount, payment_status, IFNULL(payment_no, '') FROM orders WHERE order_code = '$order'"); then
    echo "demo: cannot read the orders of database $db_name on $db_host:$db_port (see above); set DEMO_CREATE_ORDER=0 to skip" >&2
    exit 1
  fi
  if [ -z "$row" ]; then
    sql "INSERT INTO orders (order_code, user_id, amount, payment_source) VALUES ('$order', 42, $amount, 'paydemo')"
    echo "demo: created order $order (user 42, amount $amount) in database $db_name" >&2
    return
  fi
  local have status paid_by
  IFS=$'\t' read -r have status paid_by <<<"$row"
  echo "demo: order $order exists (amount $have, $status${paid_by:+ by $paid_by})" >&2
  if [ "$have" != "$amount" ]; then
    echo "demo: the order's amount is $have, not $amount: this payment will be reported as payment.exception amount_mismatch" >&2
  fi
}

# send_paydemo signs body as the paydemo source's platform does (Standard
# Webhooks, event id id) and posts it.
send_paydemo() {
  local id=$1 body=$2 ts key sig answer
  ts=$(date +%s)
  key=$(printf '%s' "${secret#whsec_}" | base64 -d | od -An -vtx1 | tr -d ' \n')
  sig=$(printf '%s.%s.%s' "$id" "$ts" "$body" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64)
  answer=$(curl -sS -w '\nHTTP %{http_code}' -X POST "$url/callbacks/paydemo" \
    -H 'Content-Type: application/json' \
    -H "webhook-id: $id" -H "webhook-timestamp: $ts" -H "webhook-signature: v1,$sig" \
    --data-binary "$body")
  echo "$answer"
  if [[ $answer == *'"duplicate":true'* ]]; then
    echo "demo: sent before: answered as a duplicate (same log_id), nothing is processed again; DEMO_NEW_PAYMENT=1 sends a new payment" >&2
  fi
}

case "$source" in
paydemo)
  secret=${PAYDEMO_SECRET:-whsec_Y2FsbGdhdGUtcGF5ZGVtby1kZW1vLWtleS0zMmJ5dGU=}
  order=${2:-ORD-1001}; amount=${3:-1999}
  if ! [[ $order =~ ^[A-Za-z0-9._-]{1,64}$ ]] || ! [[ $amount =~ ^[0-9]{1,15}$ ]]; then
    echo "usage: $0 paydemo [ORDER_CODE (letters, digits, . _ -)] [AMOUNT (minor units)]" >&2; exit 2
  fi
  payment=${DEMO_PAYMENT_NO:-PAY-$order}
  if [ "${DEMO_NEW_PAYMENT:-0}" = 1 ]; then payment="PAY-$order-$(date +%s%N)"; fi
  if ! [[ $payment =~ ^[A-Za-z0-9._-]{1,120}$ ]]; then
    echo "demo: DEMO_PAYMENT_NO: letters, digits, . _ - only" >&2; exit 2
  fi
  if [ "${DEMO_CREATE_ORDER:-1}" != 0 ]; then ensure_order "$order" "$amount"; fi
  id="msg_$payment"
  body=$(printf '{"orderCode":"%s","paymentNo":"%s","amount":%s,"status":"SUCCESS","paidAt":"%s"}' \
    "$order" "$payment" "$amount" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
  echo "demo: payment $payment for $order, webhook-id $id" >&2
  send_paydemo "$id" "$body"
  ;;
refund)
  secret=${PAYDEMO_SECRET:-whsec_Y2FsbGdhdGUtcGF5ZGVtby1kZW1vLWtleS0zMmJ5dGU=}
  order=${2:-ORD-1001}; amount=${3:-500}; refund=${4:-RF-$order-$amount}
  if ! [[ $order =~ ^[A-Za-z0-9._-]{1,64}$ ]] || ! [[ $amount =~ ^[0-9]{1,15}$ ]] || ! [[ $refund =~ ^[A-Za-z0-9._-]{1,120}$ ]]; then
    echo "usage: $0 refund [ORDER_CODE] [AMOUNT (minor units)] [REFUND_NO] (letters, digits, . _ -)" >&2; exit 2
  fi
  payment=${DEMO_PAYMENT_NO:-PAY-$order}
  id="msg_$refund"
  body=$(printf '{"type":"refund","orderCode":"%s","paymentNo":"%s","refundNo":"%s","amount":%s,"status":"SUCCESS"}' \
    "$order" "$payment" "$refund" "$amount")
  echo "demo: refund $refund of $amount for $order (payment $payment), webhook-id $id" >&2
  send_paydemo "$id" "$body"
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
*) echo "usage: $0 paydemo|refund|shipdemo [args]" >&2; exit 2 ;;
esac
