// Package logistics is the demo handler of logistics callbacks: it records
// each carrier event once, keeps the shipment at the highest sequence
// number seen, and tells subscribers about every newly applied event and
// about deliveries.
package logistics

import (
	"context"
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
	StatusPickedUp       = "PICKED_UP"
	StatusInTransit      = "IN_TRANSIT"
	StatusOutForDelivery = "OUT_FOR_DELIVERY"
	StatusDelivered      = "DELIVERED"
	StatusException      = "EXCEPTION"
)

var validStatus = map[string]bool{
	StatusPickedUp: true, StatusInTransit: true, StatusOutForDelivery: true, StatusDelivered: true, StatusException: true,
}

// Payload is what a carrier sends.
type Payload struct {
	WaybillNo  string    `json:"waybillNo"`
	OrderCode  string    `json:"orderCode"`
	Seq        int64     `json:"seq"`
	Status     string    `json:"status"`
	Location   string    `json:"location"`
	OccurredAt time.Time `json:"occurredAt"`
}

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
const upsertShipmentSQL = `INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at)
 VALUES (?, ?, ?, ?, ?)
 ON DUPLICATE KEY UPDATE
   status = IF(VALUES(last_seq) > last_seq, VALUES(status), status),
   updated_at = IF(VALUES(last_seq) > last_seq, VALUES(updated_at), updated_at),
   last_seq = GREATEST(last_seq, VALUES(last_seq))`

// Handle implements callback.Handler.
func (Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	var p Payload
	if err := callback.DecodePayload(cb.Payload, &p); err != nil {
		return err
	}
	if p.WaybillNo == "" || p.OrderCode == "" {
		return callback.Permanentf("invalid payload: waybillNo and orderCode are required")
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
	if err := db.Exec(upsertShipmentSQL, p.WaybillNo, p.OrderCode, p.Status, p.Seq, time.Now().UTC()).Error; err != nil {
		return fmt.Errorf("error updating shipment: %w", err)
	}
	err := out.Add(ctx, callback.Message{RoutingKey: RoutingShipmentUpdated, Payload: map[string]any{
		"waybillNo": p.WaybillNo, "orderCode": p.OrderCode, "seq": p.Seq, "status": p.Status,
	}})
	if err != nil {
		return err
	}
	if p.Status == StatusDelivered {
		return out.Add(ctx, callback.Message{RoutingKey: RoutingOrderDelivered, Payload: map[string]any{
			"orderCode": p.OrderCode, "waybillNo": p.WaybillNo,
		}})
	}
	return nil
}
