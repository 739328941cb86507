package payment_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"github.com/golang-migrate/migrate/v4"
	migratemysql "github.com/golang-migrate/migrate/v4/database/mysql"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/stretchr/testify/require"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"callgate/internal/payment"
	"callgate/internal/testenv"
	"callgate/migrations"
)

// migrateTo moves the database of dsn to version v, up or down.
func migrateTo(t *testing.T, dsn string, v uint) {
	t.Helper()
	c, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	c.MultiStatements, c.InterpolateParams = true, false
	db, err := sql.Open("mysql", c.FormatDSN())
	require.NoError(t, err)
	defer db.Close()
	src, err := iofs.New(migrations.FS, ".")
	require.NoError(t, err)
	drv, err := migratemysql.WithInstance(db, &migratemysql.Config{})
	require.NoError(t, err)
	m, err := migrate.NewWithInstance("iofs", src, "mysql", drv)
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Migrate(v))
}

// TestMigration015RecordsPaidOrdersAndRollsBackSafely: migration 015
// records the paying payment of every order paid before it, so that a
// refund or dispute naming only its payment finds its order; its down
// migration leaves no order an older callgate would pay again (refunded:
// PAID, closed: FAILED).
func TestMigration015RecordsPaidOrdersAndRollsBackSafely(t *testing.T) {
	dsn := testenv.DB(t)
	migrateTo(t, dsn, 14)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO orders (order_code, user_id, amount, currency, payment_status, payment_no, paid_at) VALUES
		('OLD-PAID', 7, 1999, 'USD', 'PAID', 'pi_old', '2026-11-30 10:00:00'),
		('OLD-HAND', 7, 500, 'CNY', 'PAID', 'BANK-1', NULL),
		('OLD-UNPAID', 7, 800, 'CNY', 'UNPAID', NULL, NULL),
		('OLD-FAILED', 7, 800, 'CNY', 'FAILED', NULL, NULL)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, payload, trace_id, received_at)
		VALUES ('stripe', 'payment', 'evt_old', 'OLD-PAID', 'SUCCESS', '{}', 't', '2026-11-30 10:00:00')`)
	require.NoError(t, err)

	migrateTo(t, dsn, 15)
	type row struct {
		Order, PaymentNo, Source, Status string
		Paying                           bool
		Amount                           int64
		Currency                         string
	}
	var got []row
	rows, err := db.Query(`SELECT order_code, payment_no, source, status, paying, amount, currency FROM payments ORDER BY order_code`)
	require.NoError(t, err)
	defer rows.Close()
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.Order, &r.PaymentNo, &r.Source, &r.Status, &r.Paying, &r.Amount, &r.Currency))
		got = append(got, r)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []row{
		{"OLD-HAND", "BANK-1", "", "SUCCEEDED", true, 500, "CNY"},
		{"OLD-PAID", "pi_old", "stripe", "SUCCEEDED", true, 1999, "USD"},
	}, got)

	_, err = db.Exec(`INSERT INTO orders (order_code, user_id, amount, currency, payment_status, payment_no, paid_at, refunded_amount) VALUES
		('NEW-PART', 7, 1000, 'CNY', 'PARTIALLY_REFUNDED', 'P1', NOW(), 300),
		('NEW-FULL', 7, 1000, 'CNY', 'REFUNDED', 'P2', NOW(), 1000),
		('NEW-CLOSED', 7, 1000, 'CNY', 'CLOSED', NULL, NULL, 0)`)
	require.NoError(t, err)
	migrateTo(t, dsn, 14)
	status := map[string]string{}
	statuses, err := db.Query(`SELECT order_code, payment_status FROM orders`)
	require.NoError(t, err)
	defer statuses.Close()
	rows = statuses
	for rows.Next() {
		var code, s string
		require.NoError(t, rows.Scan(&code, &s))
		status[code] = s
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]string{"OLD-PAID": "PAID", "OLD-HAND": "PAID", "OLD-UNPAID": "UNPAID", "OLD-FAILED": "FAILED",
		"NEW-PART": "PAID", "NEW-FULL": "PAID", "NEW-CLOSED": "FAILED"}, status)
}

// TestMigration016KeepsWhatWasThere: migration 016 gives existing orders no
// payment source (never asked about) and a creation time, and existing
// callbacks the origin notify; its down migration removes only what it
// added, and up again works.
func TestMigration016KeepsWhatWasThere(t *testing.T) {
	dsn := testenv.DB(t)
	migrateTo(t, dsn, 15)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO orders (order_code, user_id, amount, currency) VALUES ('OLD-1', 7, 100, 'CNY')`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO callback_log (source, kind, event_id, business_key, status, payload, trace_id, received_at)
		VALUES ('wechatpay', 'payment', 'ev-old', 'OLD-1', 'SUCCESS', '{}', 't', '2026-11-30 10:00:00')`)
	require.NoError(t, err)

	migrateTo(t, dsn, 16)
	var source sql.NullString
	var created sql.NullString
	require.NoError(t, db.QueryRow(`SELECT payment_source, created_at FROM orders WHERE order_code = 'OLD-1'`).Scan(&source, &created))
	require.False(t, source.Valid, "an existing order has no payment source: never asked about")
	require.True(t, created.Valid && created.String != "", "and a creation time")
	var origin string
	require.NoError(t, db.QueryRow(`SELECT origin FROM callback_log WHERE event_id = 'ev-old'`).Scan(&origin))
	require.Equal(t, "notify", origin)
	_, err = db.Exec(`INSERT INTO reconcile_orders (order_code, source, next_at, last_outcome, updated_at) VALUES ('OLD-1', 'wechatpay', NOW(6), 'nothing', NOW(6))`)
	require.NoError(t, err)

	migrateTo(t, dsn, 15)
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM orders o JOIN callback_log c ON c.business_key = o.order_code`).Scan(&n))
	require.Equal(t, 1, n, "the order and its callback stay")
	require.Error(t, db.QueryRow(`SELECT origin FROM callback_log`).Scan(&origin), "origin is gone")
	migrateTo(t, dsn, 16)
}

// TestMigration018KeepsWhatWasThere: migration 018 gives existing
// shipments no tracking source (never asked about); its down migration
// removes only what it added, and up again works.
func TestMigration018KeepsWhatWasThere(t *testing.T) {
	dsn := testenv.DB(t)
	migrateTo(t, dsn, 16)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at) VALUES ('YT-OLD-1', 'ORD-OLD-1', 'IN_TRANSIT', 2, NOW(6))`)
	require.NoError(t, err)

	migrateTo(t, dsn, 18)
	var source, carrier sql.NullString
	require.NoError(t, db.QueryRow(`SELECT tracking_source, carrier_code FROM shipments WHERE waybill_no = 'YT-OLD-1'`).Scan(&source, &carrier))
	require.False(t, source.Valid, "an existing shipment has no tracking source: never asked about")
	require.False(t, carrier.Valid)
	_, err = db.Exec(`INSERT INTO reconcile_waybills (waybill_no, source, next_at, last_outcome, updated_at) VALUES ('YT-OLD-1', 'kuaidi100', NOW(6), 'nothing', NOW(6))`)
	require.NoError(t, err)

	migrateTo(t, dsn, 16)
	var status string
	require.NoError(t, db.QueryRow(`SELECT status FROM shipments WHERE waybill_no = 'YT-OLD-1'`).Scan(&status))
	require.Equal(t, "IN_TRANSIT", status, "the shipment stays")
	require.Error(t, db.QueryRow(`SELECT tracking_source FROM shipments`).Scan(&source), "tracking_source is gone")
	migrateTo(t, dsn, 18)
}

// TestMigration017KeepsWhatWasThere: migration 017 adds the events-list
// checkpoints (Stripe) and touches nothing else; its down migration drops
// them only, and up again works.
func TestMigration017KeepsWhatWasThere(t *testing.T) {
	dsn := testenv.DB(t)
	migrateTo(t, dsn, 16)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO reconcile_orders (order_code, source, next_at, last_outcome, updated_at) VALUES ('OLD-1', 'stripe', NOW(6), 'nothing', NOW(6))`)
	require.NoError(t, err)

	migrateTo(t, dsn, 17)
	_, err = db.Exec(`INSERT INTO reconcile_checkpoints (source, listed_until, updated_at) VALUES ('stripe', '2026-12-01 00:00:00', NOW(6))`)
	require.NoError(t, err)
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM reconcile_orders WHERE order_code = 'OLD-1'`).Scan(&n))
	require.Equal(t, 1, n)

	migrateTo(t, dsn, 16)
	require.Error(t, db.QueryRow(`SELECT COUNT(*) FROM reconcile_checkpoints`).Scan(&n), "the checkpoints are gone")
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM reconcile_orders WHERE order_code = 'OLD-1'`).Scan(&n))
	require.Equal(t, 1, n, "the orders' reconciliation stays")
	migrateTo(t, dsn, 17)
}

// TestMigration019TurnsRowsIntoFacts: migration 019 turns the payments,
// refunds and disputes rows into facts, and what those facts derive is
// the order as it was; a refunded order counts as cancelled at the
// warehouse already (no second warehouse.cancel). Its down migration
// gives the rows back, and up again works.
func TestMigration019TurnsRowsIntoFacts(t *testing.T) {
	dsn := testenv.DB(t)
	migrateTo(t, dsn, 18)
	db, err := sql.Open("mysql", dsn)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO orders (order_code, user_id, amount, currency, payment_status, payment_no, paid_at, refunded_amount, dispute_status) VALUES
		('M-PART', 7, 1000, 'EUR', 'PARTIALLY_REFUNDED', 'pi_1', '2026-11-30 10:00:00', 300, 'LOST'),
		('M-FULL', 7, 500, 'EUR', 'REFUNDED', 'pi_2', '2026-11-30 10:00:00', 500, NULL),
		('M-CLOSED', 7, 500, 'EUR', 'CLOSED', NULL, NULL, 0, NULL)`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO payments VALUES ('M-PART', 'pi_1', 'stripe', 'SUCCEEDED', 1, 1000, 'EUR', 1, 1, NOW(6), NOW(6)),
		('M-PART', 'pi_x', 'stripe', 'FAILED', 0, 1000, 'EUR', 2, 2, NOW(6), NOW(6)),
		('M-FULL', 'pi_2', 'stripe', 'SUCCEEDED', 1, 500, 'EUR', 3, 3, NOW(6), NOW(6))`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO refunds VALUES ('M-PART', 're_1', 'pi_1', 'stripe', 'SUCCEEDED', 300, 300, 0, 'EUR', NULL, 4, 4, NOW(6), NOW(6)),
		('M-PART', 're_2', 'pi_1', 'stripe', 'FAILED', 50, 0, 0, 'EUR', 'declined', 5, 5, NOW(6), NOW(6)),
		('M-FULL', 're_3', 'pi_2', 'stripe', 'SUCCEEDED', 500, 500, 0, 'EUR', NULL, 6, 6, NOW(6), NOW(6))`)
	require.NoError(t, err)
	_, err = db.Exec(`INSERT INTO disputes VALUES ('M-PART', 'dp_1', 'pi_1', 'stripe', 'LOST', 200, 200, 'EUR', 7, 7, NOW(6), NOW(6))`)
	require.NoError(t, err)

	migrateTo(t, dsn, 19)
	gc, err := mysql.ParseDSN(dsn)
	require.NoError(t, err)
	gc.ParseTime, gc.Loc = true, time.UTC
	gdb, err := gorm.Open(gormmysql.Open(gc.FormatDSN()), &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	for code, want := range map[string]struct {
		status           string
		refunded, taken  int64
		cancelled, facts int
	}{"M-PART": {payment.OrderPartiallyRefunded, 300, 200, 0, 5}, "M-FULL": {payment.OrderRefunded, 500, 0, 1, 2}, "M-CLOSED": {payment.OrderClosed, 0, 0, 0, 1}} {
		var o payment.Order
		require.NoError(t, gdb.Take(&o, "order_code = ?", code).Error)
		var facts []payment.Fact
		require.NoError(t, gdb.Where("order_code = ?", code).Find(&facts).Error)
		require.Len(t, facts, want.facts, code)
		require.EqualValues(t, want.taken, o.ChargebackAmount, code)
		require.Equal(t, want.cancelled == 1, o.WarehouseCancelled, code)
		s := payment.Derive(&o, facts)
		require.Equal(t, want.status, s.Status, code)
		require.Equal(t, o.PaymentStatus, s.Status, code)
		require.Equal(t, want.refunded, s.Refunded, code)
		require.Equal(t, o.ChargebackAmount, s.Chargeback, code)
	}
	var n int
	require.Error(t, db.QueryRow(`SELECT COUNT(*) FROM payments`).Scan(&n), "payments is gone")

	migrateTo(t, dsn, 18)
	var status string
	var paying bool
	require.NoError(t, db.QueryRow(`SELECT status, paying FROM payments WHERE order_code = 'M-PART' AND payment_no = 'pi_1'`).Scan(&status, &paying))
	require.Equal(t, "SUCCEEDED", status)
	require.True(t, paying)
	require.NoError(t, db.QueryRow(`SELECT status FROM refunds WHERE order_code = 'M-PART' AND refund_no = 're_2'`).Scan(&status))
	require.Equal(t, "FAILED", status)
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM disputes WHERE dispute_id = 'dp_1' AND status = 'LOST' AND counted = 200`).Scan(&n))
	require.Equal(t, 1, n)
	migrateTo(t, dsn, 19)
}
