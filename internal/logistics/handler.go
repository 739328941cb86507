// Package logistics is the demo handler of logistics callbacks: it records
// each carrier event once, keeps the shipment at the highest sequence
// number seen, and tells subscribers about every newly applied event and
// about deliveries.
package logistics

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"callgate/internal/callback"
)

// Routing keys of the notifications this handler writes.
const (
	RoutingShipmentUpdated = "shipment.updated"
	RoutingOrderDelivered  = "order.delivered"
)

// Carrier statuses.
const (
	StatusPickedUp       = callback.CarrierPickedUp
	StatusInTransit      = callback.CarrierInTransit
	StatusOutForDelivery = callback.CarrierOutForDelivery
	StatusDelivered      = callback.CarrierDelivered
	StatusException      = callback.CarrierException
)

var validStatus = map[string]bool{
	StatusPickedUp: true, StatusInTransit: true, StatusOutForDelivery: true, StatusDelivered: true, StatusException: true,
}

// Payload is the canonical carrier event: what the demo source shipdemo
// sends, and what the kuaidi100 preset maps its push to.
type Payload = callback.CarrierEvent

// Handler processes logistics callbacks.
type Handler struct{}

var _ callback.Handler = Handler{}

// insertEventSQL is a no-op for a (waybill_no, seq) already recorded; rows
// affected tells which happened.
const insertEventSQL = `INSERT INTO shipment_events (waybill_no, seq, status, location, occurred_at)
 VALUES (?, ?, ?, ?, ?) ON DUPLICATE KEY UPDATE id = id`

// upsertShipmentSQL moves status and last_seq only forward: a late event
// with a lower seq is recorded but never moves the status backwards. MySQL
// evaluates the assignments left to right, so status is decided before
// last_seq changes.
//
// An event without an order code (a carrier that does not know it) leaves
// the shipment's order code as it is; one with a code fills a missing one.
const upsertShipmentSQL = `INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at)
 VALUES (?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE
   order_code = COALESCE(order_code, VALUES(order_code)),
   status = IF(VALUES(last_seq) > last_seq, VALUES(status), status),
   updated_at = IF(VALUES(last_seq) > last_seq, VALUES(updated_at), updated_at),
   last_seq = GREATEST(last_seq, VALUES(last_seq))`

// Handle implements callback.Handler.
func (Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	var p Payload
	if err := callback.DecodePayload(cb.Event(), &p); err != nil {
		return err
	}
	if p.WaybillNo == "" {
		return callback.Permanentf("invalid payload: waybillNo is required")
	}
	if !validStatus[p.Status] {
		return callback.Permanentf("invalid payload: unknown status %q", p.Status)
	}
	occurred := p.OccurredAt
	if occurred.IsZero() {
		occurred = cb.ReceivedAt
	}
	db := tx.WithContext(ctx)
	res := db.Exec(insertEventSQL, p.WaybillNo, p.Seq, p.Status, p.Location, occurred.UTC())
	if res.Error != nil {
		return fmt.Errorf("error recording shipment event: %w", res.Error)
	}
	if res.RowsAffected == 0 {
		return nil // this (waybill, seq) was applied before
	}
	var orderCode *string
	if p.OrderCode != "" {
		orderCode = &p.OrderCode
	}
	if err := db.Exec(upsertShipmentSQL, p.WaybillNo, orderCode, p.Status, p.Seq, time.Now().UTC()).Error; err != nil {
		return fmt.Errorf("error updating shipment: %w", err)
	}
	if p.OrderCode == "" {
		// The carrier does not know the order: the shipment may.
		// NULL when no event brought one yet (a []*string scan refuses NULL).
		var known sql.NullString
		err := db.Raw(`SELECT order_code FROM shipments WHERE waybill_no = ?`, p.WaybillNo).Row().Scan(&known)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("error reading shipment: %w", err)
		}
		if known.Valid {
			p.OrderCode = known.String
		}
	}
	update := map[string]any{"waybillNo": p.WaybillNo, "seq": p.Seq, "status": p.Status}
	if p.OrderCode != "" {
		update["orderCode"] = p.OrderCode
	}
	if err := out.Add(ctx, callback.Message{RoutingKey: RoutingShipmentUpdated, Payload: update}); err != nil {
		return err
	}
	// order.delivered is about an order: without one known, only
	// shipment.updated says the parcel arrived.
	if p.Status == StatusDelivered && p.OrderCode != "" {
		return out.Add(ctx, callback.Message{RoutingKey: RoutingOrderDelivered, Payload: map[string]any{
			"orderCode": p.OrderCode, "waybillNo": p.WaybillNo,
		}})
	}
	return nil
}
