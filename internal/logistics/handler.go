// Package logistics is the demo handler of logistics callbacks: it records
// each carrier event once, keeps the shipment at the highest sequence
// number seen, and tells subscribers about every newly applied event and
// about deliveries.
package logistics

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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

var (
	_ callback.BatchHandler = Handler{}
	_ callback.EventChecker = Handler{}
)

// upsertShipmentUpdate moves status and last_seq only forward: a late
// event with a lower seq is recorded but never moves the status
// backwards. MySQL evaluates the assignments left to right, so status is
// decided before last_seq changes. The rows of the batch's multi-row
// upsert apply in order, each seeing the ones before.
//
// An event without an order code (a carrier that does not know it) leaves
// the shipment's order code as it is; one with a code fills a missing one.
const upsertShipmentUpdate = `
 ON DUPLICATE KEY UPDATE
   order_code = COALESCE(order_code, VALUES(order_code)),
   status = IF(VALUES(last_seq) > last_seq, VALUES(status), status),
   updated_at = IF(VALUES(last_seq) > last_seq, VALUES(updated_at), updated_at),
   last_seq = GREATEST(last_seq, VALUES(last_seq))`

// Handle implements callback.Handler: HandleBatch applied to a batch of
// one, so a carrier event is decided by the same code alone or in a batch.
func (h Handler) Handle(ctx context.Context, tx *gorm.DB, cb *callback.Log, out callback.Outbox) error {
	return h.HandleBatch(ctx, tx, []*callback.Log{cb}, []callback.Outbox{out})[0]
}

// HandleBatch implements callback.BatchHandler in four statements whatever
// the batch's size: which events were recorded before, record the new ones,
// read and lock their shipments, and move the shipments with one multi-row
// upsert, whose rows MariaDB applies in order exactly as one statement per
// event would.
func (Handler) HandleBatch(ctx context.Context, tx *gorm.DB, cbs []*callback.Log, outs []callback.Outbox) []error {
	errs := make([]error, len(cbs))
	events := make([]Payload, len(cbs))
	for i, cb := range cbs {
		p, err := event(cb)
		if err != nil {
			errs[i] = err
			return errs
		}
		events[i] = p
	}
	db := tx.WithContext(ctx)
	recorded, err := recordedEvents(db, events)
	if err != nil {
		return callback.FailBatch(errs, err)
	}
	// An event is new unless recorded before or earlier in the batch.
	fresh := make([]bool, len(events))
	var newEvents []Payload
	for i, p := range events {
		k := eventKey{p.WaybillNo, p.Seq}
		if !recorded[k] {
			recorded[k] = true
			fresh[i] = true
			newEvents = append(newEvents, p)
		}
	}
	if len(newEvents) == 0 {
		return errs
	}
	var q strings.Builder
	args := make([]any, 0, 5*len(newEvents))
	q.WriteString(`INSERT INTO shipment_events (waybill_no, seq, status, location, occurred_at) VALUES `)
	for i, p := range newEvents {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, ?, ?)")
		args = append(args, p.WaybillNo, p.Seq, p.Status, p.Location, p.OccurredAt.UTC())
	}
	q.WriteString(` ON DUPLICATE KEY UPDATE id = id`)
	res := db.Exec(q.String(), args...)
	if res.Error != nil {
		return callback.FailBatch(errs, fmt.Errorf("error recording shipment events: %w", res.Error))
	}
	if res.RowsAffected != int64(len(newEvents)) {
		// Another transaction recorded one of them meanwhile: let each
		// callback run alone.
		return callback.FailBatch(errs, fmt.Errorf("recorded %d of %d new shipment events", res.RowsAffected, len(newEvents)))
	}
	known, err := lockShipments(db, newEvents)
	if err != nil {
		return callback.FailBatch(errs, err)
	}
	q.Reset()
	args = args[:0]
	now := time.Now().UTC()
	q.WriteString(`INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at) VALUES `)
	for i, p := range newEvents {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?, ?, ?, ?)")
		var orderCode *string
		if p.OrderCode != "" {
			orderCode = &p.OrderCode
		}
		args = append(args, p.WaybillNo, orderCode, p.Status, p.Seq, now)
	}
	q.WriteString(upsertShipmentUpdate)
	if err := db.Exec(q.String(), args...).Error; err != nil {
		return callback.FailBatch(errs, fmt.Errorf("error updating shipments: %w", err))
	}
	// Each event's order code, as the shipment knew it after that event.
	for i := range events {
		if !fresh[i] {
			continue
		}
		p := events[i]
		if p.OrderCode == "" {
			p.OrderCode = known[p.WaybillNo]
		} else if known[p.WaybillNo] == "" {
			known[p.WaybillNo] = p.OrderCode
		}
		if err := notify(ctx, outs[i], p); err != nil {
			errs[i] = err
			return errs
		}
	}
	return errs
}

// event decodes and checks a callback's carrier event.
func event(cb *callback.Log) (Payload, error) {
	p, err := decode(cb.Event())
	if err != nil {
		return p, err
	}
	if p.WaybillNo == "" {
		return p, callback.Permanentf("invalid payload: waybillNo is required")
	}
	if !validStatus[p.Status] {
		return p, callback.Permanentf("invalid payload: unknown status %q", p.Status)
	}
	if p.OccurredAt.IsZero() {
		p.OccurredAt = cb.ReceivedAt
	}
	return p, nil
}

// decode reads body as the canonical carrier event: the one reading of a
// carrier's body, by the worker (event) and, before a configured source's
// body is stored, by the intake (Handler.CheckEvent).
func decode(body []byte) (Payload, error) {
	var p Payload
	err := callback.DecodePayload(body, &p)
	return p, err
}

// CheckEvent implements callback.EventChecker: whether body reads as a
// carrier event, as the worker will read it (decode).
func (Handler) CheckEvent(body []byte) error {
	_, err := decode(body)
	return err
}

type eventKey struct {
	waybill string
	seq     int64
}

// recordedEvents returns which of events' (waybill, seq) are recorded.
func recordedEvents(db *gorm.DB, events []Payload) (map[eventKey]bool, error) {
	var q strings.Builder
	args := make([]any, 0, 2*len(events))
	q.WriteString(`SELECT waybill_no, seq FROM shipment_events WHERE (waybill_no, seq) IN (`)
	for i, p := range events {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteString("(?, ?)")
		args = append(args, p.WaybillNo, p.Seq)
	}
	q.WriteString(`) FOR UPDATE`)
	var rows []struct {
		WaybillNo string
		Seq       int64
	}
	if err := db.Raw(q.String(), args...).Scan(&rows).Error; err != nil {
		return nil, fmt.Errorf("error reading shipment events: %w", err)
	}
	out := make(map[eventKey]bool, len(events))
	for _, r := range rows {
		out[eventKey{r.WaybillNo, r.Seq}] = true
	}
	return out, nil
}

// lockShipments reads and locks the shipments of events and returns their
// known order codes, by waybill.
func lockShipments(db *gorm.DB, events []Payload) (map[string]string, error) {
	waybills := make([]string, 0, len(events))
	for _, p := range events {
		waybills = append(waybills, p.WaybillNo)
	}
	var rows []struct {
		WaybillNo string
		OrderCode sql.NullString
	}
	err := db.Raw(`SELECT waybill_no, order_code FROM shipments WHERE waybill_no IN ? FOR UPDATE`, waybills).Scan(&rows).Error
	if err != nil {
		return nil, fmt.Errorf("error reading shipments: %w", err)
	}
	out := make(map[string]string, len(rows))
	for _, r := range rows {
		if r.OrderCode.Valid {
			out[r.WaybillNo] = r.OrderCode.String
		}
	}
	return out, nil
}

// notify writes an applied event's notifications.
func notify(ctx context.Context, out callback.Outbox, p Payload) error {
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
