#!/usr/bin/env bash
# Sends one correctly signed demo callback to a running gateway, waits for
# the worker's outcome and prints it: the callback's final status and the
# notifications it produced.
#   scripts/demo-callback.sh paydemo  [ORDER_CODE] [AMOUNT]   (Standard Webhooks)
#   scripts/demo-callback.sh refund   [ORDER_CODE] [AMOUNT] [REFUND_NO] (paydemo)
#   scripts/demo-callback.sh shipdemo [WAYBILL] [SEQ] [STATUS] [ORDER_CODE] (HMAC-SHA256, hex)
#
# paydemo pays ORDER_CODE (default ORD-1001) with AMOUNT (default 1999):
# - The order must exist for the payment to apply, so the script creates it
#   (user 42, AMOUNT) when it is missing, and says so. It uses the mariadb
#   client on the database of CALLGATE_MYSQL_DSN (the gateway's setting;
#   default root:@tcp(127.0.0.1:3306)/callgate). DEMO_CREATE_ORDER=0 keeps
#   the script out of the database (a gateway whose database you cannot
#   reach): it creates no order and cannot show the outcome.
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
# shipdemo moves WAYBILL (default WB-<ORDER_CODE>) to STATUS (default
# PICKED_UP) as the carrier's event number SEQ (default 1), for ORDER_CODE
# (default: the order created last).
#
# Every mistake is one line, before anything is written: a wrong argument,
# a secret that is not one, a database it cannot read. A payment the
# gateway did not accept leaves nothing behind: the order created for it
# is removed whether the gateway refused it (a wrong PAYDEMO_SECRET: 401),
# could not be reached (not running, CALLGATE_URL naming another) or the
# script stopped before the answer (Ctrl-C). DEMO_WAIT (default 15) is how
# many seconds to wait for the outcome.
#
# Uses the documented demo secrets unless PAYDEMO_SECRET / SHIPDEMO_SECRET
# are set, and the gateway at CALLGATE_URL (default http://127.0.0.1:8080).
# Needs bash, openssl, curl (and the mariadb or mysql client).
set -euo pipefail
url=${CALLGATE_URL:-http://127.0.0.1:8080}
source=${1:-paydemo}
wait_s=${DEMO_WAIT:-15}
use_db=${DEMO_CREATE_ORDER:-1}
created=  # the order this run created, removed again unless its payment is accepted
accepted= # set once the gateway answered 200

fail() { echo "demo: $*" >&2; exit 2; }

# remove_order removes the order this run created while its payment is not
# accepted; it runs at every exit, after an answer other than 200, a
# gateway that could not be reached, or an interrupt. Only an order still
# as created (unpaid, no payment) is removed.
remove_order() {
  if [ -z "$created" ] || [ -n "$accepted" ]; then return; fi
  local order=$created
  created=
  if sql "DELETE FROM orders WHERE order_code = '$order' AND payment_status = 'UNPAID' AND payment_no IS NULL"; then
    echo "demo: removed the order $order created for this payment" >&2
  fi
}
trap remove_order EXIT

# sql runs one statement on the gateway's database (tab-separated rows).
sql() {
  MYSQL_PWD="$db_pass" "$db_client" --protocol=TCP -h "$db_host" -P "$db_port" -u "$db_user" -N -B "$db_name" -e "$1"
}

# db_open finds the client and reads CALLGATE_MYSQL_DSN, then checks that the
# database answers; with DEMO_CREATE_ORDER=0 it does nothing.
db_open() {
  if [ "$use_db" = 0 ]; then return; fi
  local dsn=${CALLGATE_MYSQL_DSN:-root:@tcp(127.0.0.1:3306)/callgate}
  db_client=$(command -v mariadb || command -v mysql || true)
  if [ -z "$db_client" ]; then
    echo "demo: no mariadb client: the order is not created and the outcome not shown (see the console)" >&2
    use_db=0
    return
  fi
  # go-sql-driver form: user[:password]@tcp(host[:port])/dbname[?params]
  local re='^([^:@]*)(:(.*))?@tcp\(([^)]*)\)/([^?]+)'
  if ! [[ $dsn =~ $re ]]; then
    fail "cannot read CALLGATE_MYSQL_DSN (want user:password@tcp(host:port)/dbname); DEMO_CREATE_ORDER=0 keeps the script out of the database"
  fi
  db_user=${BASH_REMATCH[1]} db_pass=${BASH_REMATCH[3]} db_name=${BASH_REMATCH[5]}
  local hostport=${BASH_REMATCH[4]}
  db_host=${hostport%:*} db_port=3306
  if [ "$hostport" != "$db_host" ]; then db_port=${hostport##*:}; fi
  local err
  if ! err=$(sql "SELECT 1 FROM orders LIMIT 0" 2>&1); then
    fail "cannot read the orders of database $db_name on $db_host:$db_port: ${err##*ERROR}; DEMO_CREATE_ORDER=0 keeps the script out of the database"
  fi
}

# ensure_order creates the order ($1, amount $2) if it is missing.
ensure_order() {
  local order=$1 amount=$2 row
  row=$(sql "SELECT amount, payment_status, IFNULL(payment_no, '') FROM orders WHERE order_code = '$order'")
  if [ -z "$row" ]; then
    sql "INSERT INTO orders (order_code, user_id, amount, payment_source) VALUES ('$order', 42, $amount, 'paydemo')"
    created=$order
    echo "demo: created order $order (user 42, amount $amount) in database $db_name" >&2
    return
  fi
  local have status paid_by
  IFS=$'\t' read -r have status paid_by <<<"$row"
  echo "demo: order $order exists (amount $have, $status${paid_by:+ by $paid_by})" >&2
  if [ "$have" != "$amount" ] && [ -z "$(sent_before)" ]; then
    echo "demo: the order's amount is $have, not $amount: the worker will report this payment as payment.exception amount_mismatch" >&2
  fi
}

# sent_before prints the id and status of the callback already stored for
# this event ($id), if any.
sent_before() {
  sql "SELECT id, status FROM callback_log WHERE source = 'paydemo' AND event_id = '$id'"
}

# post posts body to source $1 with the extra curl arguments, prints the
# answer, and exits when it is not accepted (undoing the order this run
# created, remove_order).
post() {
  local src=$1 answer code
  shift
  if ! answer=$(curl -sS -w '\n%{http_code}' -X POST "$url/callbacks/$src" -H 'Content-Type: application/json' "$@" --data-binary "$body"); then
    remove_order
    fail "cannot reach the gateway at $url (is make run running? CALLGATE_URL names another)"
  fi
  code=${answer##*$'\n'}
  answer=${answer%$'\n'*}
  echo "$answer"
  echo "HTTP $code"
  if [ "$code" = 200 ]; then
    accepted=1
  else
    remove_order
    case $code in
    401) echo "demo: the gateway refused the signature: ${secret_name} is not $src's secret on this gateway" >&2 ;;
    404) echo "demo: the gateway does not serve $src (not in demo mode? make run sets CALLGATE_DEMO=1; its log says why a source is disabled)" >&2 ;;
    *) echo "demo: the gateway refused the callback (HTTP $code), see its answer above" >&2 ;;
    esac
    exit 1
  fi
  if [[ $answer == *'"duplicate":true'* ]]; then
    echo "demo: sent before: answered as a duplicate (same log_id), nothing is processed again${dup_hint:-}" >&2
  fi
  log_id=$(sed -n 's/.*"log_id":\([0-9]*\).*/\1/p' <<<"$answer")
}

# outcome waits until callback $log_id is SUCCESS or FAILED (at most
# DEMO_WAIT seconds), then prints its status and its notifications.
outcome() {
  if [ "$use_db" = 0 ] || [ -z "${log_id:-}" ]; then
    echo "demo: the outcome is in the console: $url/admin/callbacks/${log_id:-}" >&2
    return
  fi
  local row status attempts ms err deadline=$((SECONDS + wait_s))
  while :; do
    row=$(sql "SELECT status, attempts, IFNULL(TIMESTAMPDIFF(MICROSECOND, received_at, processed_at) DIV 1000, ''), REPLACE(IFNULL(last_error, ''), '\n', ' ') FROM callback_log WHERE id = $log_id")
    IFS=$'\t' read -r status attempts ms err <<<"$row"
    if [ "$status" = SUCCESS ] || [ "$status" = FAILED ] || [ $SECONDS -ge $deadline ]; then break; fi
    sleep 0.1
  done
  case $status in
  SUCCESS) echo "demo: callback $log_id SUCCESS after $attempts attempt(s), $ms ms after it arrived" ;;
  FAILED) echo "demo: callback $log_id FAILED after $attempts attempt(s): $err" ;;
  *)
    echo "demo: callback $log_id still $status after ${wait_s}s${err:+ (last error: $err)}: is the worker running? (make run starts it)"
    return
    ;;
  esac
  # The notifications, once the worker (or the relay) has published them.
  local rows
  while :; do
    rows=$(sql "SELECT routing_key, message_id, status FROM outbox WHERE message_id LIKE 'cb$log_id.%' ORDER BY id")
    if ! grep -q $'\tPENDING$' <<<"$rows" || [ $SECONDS -ge $deadline ]; then break; fi
    sleep 0.1
  done
  if [ -z "$rows" ]; then
    echo "demo: no notifications"
  else
    local rk mid st
    while IFS=$'\t' read -r rk mid st; do
      echo "demo: notification $rk ($mid) $st"
    done <<<"$rows"
  fi
  echo "demo: $url/admin/callbacks/$log_id shows it in the console"
}

case "$source" in
paydemo | refund)
  secret_name=PAYDEMO_SECRET
  secret=${PAYDEMO_SECRET:-whsec_Y2FsbGdhdGUtcGF5ZGVtby1kZW1vLWtleS0zMmJ5dGU=}
  order=${2:-ORD-1001}
  if [ "$source" = paydemo ]; then amount=${3:-1999}; else amount=${3:-500}; fi
  refund=${4:-RF-$order-$amount}
  if ! [[ $order =~ ^[A-Za-z0-9._-]{1,64}$ ]] || ! [[ $amount =~ ^[0-9]{1,15}$ ]] || ! [[ $refund =~ ^[A-Za-z0-9._-]{1,120}$ ]]; then
    if [ "$source" = paydemo ]; then
      fail "usage: $0 paydemo [ORDER_CODE (letters, digits, . _ -)] [AMOUNT (minor units)]"
    fi
    fail "usage: $0 refund [ORDER_CODE] [AMOUNT (minor units)] [REFUND_NO] (letters, digits, . _ -)"
  fi
  # A Standard Webhooks secret is whsec_ and the key in base64.
  if ! [[ $secret == whsec_* ]] || ! key=$(printf '%s' "${secret#whsec_}" | base64 -d 2>/dev/null | od -An -vtx1 | tr -d ' \n') || [ -z "$key" ]; then
    fail "PAYDEMO_SECRET is not a Standard Webhooks secret (whsec_ followed by the key in base64)"
  fi
  payment=${DEMO_PAYMENT_NO:-PAY-$order}
  if [ "${DEMO_NEW_PAYMENT:-0}" = 1 ]; then payment="PAY-$order-$(date +%s%N)"; fi
  if ! [[ $payment =~ ^[A-Za-z0-9._-]{1,120}$ ]]; then
    fail "DEMO_PAYMENT_NO: letters, digits, . _ - only"
  fi
  db_open
  if [ "$source" = paydemo ]; then
    id="msg_$payment"
    dup_hint="; DEMO_NEW_PAYMENT=1 sends a new payment"
    if [ "$use_db" != 0 ]; then ensure_order "$order" "$amount"; fi
    body=$(printf '{"orderCode":"%s","paymentNo":"%s","amount":%s,"status":"SUCCESS","paidAt":"%s"}' \
      "$order" "$payment" "$amount" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
    echo "demo: payment $payment for $order, webhook-id $id" >&2
  else
    id="msg_$refund"
    body=$(printf '{"type":"refund","orderCode":"%s","paymentNo":"%s","refundNo":"%s","amount":%s,"status":"SUCCESS"}' \
      "$order" "$payment" "$refund" "$amount")
    echo "demo: refund $refund of $amount for $order (payment $payment), webhook-id $id" >&2
  fi
  ts=$(date +%s)
  sig=$(printf '%s.%s.%s' "$id" "$ts" "$body" | openssl dgst -sha256 -mac HMAC -macopt "hexkey:$key" -binary | base64)
  post paydemo -H "webhook-id: $id" -H "webhook-timestamp: $ts" -H "webhook-signature: v1,$sig"
  outcome
  ;;
shipdemo)
  secret_name=SHIPDEMO_SECRET
  secret=${SHIPDEMO_SECRET:-shipdemo-demo-secret}
  [ -n "$secret" ] || fail "SHIPDEMO_SECRET is empty"
  db_open
  order=${5:-}
  if [ -z "$order" ] && [ "$use_db" != 0 ]; then
    order=$(sql "SELECT order_code FROM orders ORDER BY created_at DESC LIMIT 1")
  fi
  order=${order:-ORD-1001}
  waybill=${2:-WB-$order}; seq=${3:-1}; status=${4:-PICKED_UP}
  if ! [[ $waybill =~ ^[A-Za-z0-9._-]{1,64}$ ]] || ! [[ $seq =~ ^[0-9]{1,9}$ ]] || ! [[ $status =~ ^[A-Z_]{1,32}$ ]] || ! [[ $order =~ ^[A-Za-z0-9._-]{1,64}$ ]]; then
    fail "usage: $0 shipdemo [WAYBILL] [SEQ (a number)] [STATUS (like PICKED_UP, IN_TRANSIT, DELIVERED)] [ORDER_CODE]"
  fi
  body=$(printf '{"waybillNo":"%s","orderCode":"%s","seq":%s,"status":"%s","location":"Hamburg","occurredAt":"%s"}' \
    "$waybill" "$order" "$seq" "$status" "$(date -u +%Y-%m-%dT%H:%M:%SZ)")
  echo "demo: waybill $waybill of order $order: event $seq $status" >&2
  sig=$(printf '%s' "$body" | openssl dgst -sha256 -hmac "$secret" -hex | sed 's/^.* //')
  post shipdemo -H "X-Signature: $sig"
  outcome
  ;;
*) fail "usage: $0 paydemo|refund|shipdemo [args]" ;;
esac
