package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"strconv"
	"time"

	"callgate/internal/callback"
	"callgate/internal/store"
)

// Service holds the operator's read operations, shared by the API, the
// console and (through the API) the CLI: finding callbacks, reading one,
// the audit trail, the dashboard's figures. Replays are internal/replay.
type Service struct {
	Store *store.Store
	// Masks are the JSON fields masked on display, by source.
	Masks map[string][]string
	// Unrouted reports how many notifications wait in
	// <prefix>.downstream.unrouted; nil or failing shows them as unknown.
	Unrouted func() (int, error)
	// Replica reports, with mysql.durability: replica, whether a replica
	// acknowledges the primary's commits; nil when durability is primary.
	Replica func(ctx context.Context) error
	Log     *slog.Logger
}

// ListFilter selects callbacks for the list.
type ListFilter struct {
	Status  string
	Source  string
	Kind    string
	Key     string
	EventID string
	Since   *time.Time
	Until   *time.Time
	Cursor  int64 // ids below this; 0 = from the newest
	Limit   int
}

// Page is one page of a keyset-paginated list.
type Page struct {
	Items      []callback.Summary `json:"items"`
	NextCursor *int64             `json:"next_cursor"`
}

// List returns callbacks newest first. Pagination is by id (keyset): the
// next page is the ids below the last one shown, never an OFFSET scan.
func (s *Service) List(ctx context.Context, f ListFilter) (Page, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	rows, err := s.Store.ListCallbacks(ctx, store.CallbackFilter{Status: f.Status, Source: f.Source, Kind: f.Kind, Key: f.Key,
		EventID: f.EventID, Since: f.Since, Until: f.Until}, f.Cursor, f.Limit+1)
	if err != nil {
		return Page{}, err
	}
	p := Page{Items: make([]callback.Summary, 0, len(rows))}
	for i := range rows {
		if i == f.Limit {
			next := rows[i-1].ID
			p.NextCursor = &next
			break
		}
		p.Items = append(p.Items, callback.Summarize(&rows[i]))
	}
	return p, nil
}

// Detail is everything about one callback.
type Detail struct {
	callback.Summary
	// Payload is the raw body as received (a string; PayloadJSON holds it
	// parsed when it is JSON).
	Payload     string          `json:"payload"`
	PayloadJSON json.RawMessage `json:"payload_json,omitempty"`
	// Normalized is the canonical event a platform preset made of the
	// payload (absent for sources without a preset).
	Normalized json.RawMessage    `json:"normalized,omitempty"`
	Headers    map[string]string  `json:"headers"`
	Attempts   []callback.Attempt `json:"attempt_history"`
	Lineage    []store.OutboxRow  `json:"lineage"`
	// Replays are the single replays of this callback, newest first: who
	// and why (from the audit trail).
	Replays []store.AuditEntry `json:"replays"`
}

// maxReplaysShown bounds the replays a callback's detail lists.
const maxReplaysShown = 50

// Get returns one callback with its payload, headers, attempts and the
// outbox messages it produced (store.ErrNotFound when there is none).
func (s *Service) Get(ctx context.Context, id int64) (*Detail, error) {
	l, err := s.Store.GetCallback(ctx, id)
	if err != nil {
		return nil, err
	}
	shown := maskPayload(l.Payload, s.Masks[l.Source])
	d := &Detail{Summary: callback.Summarize(l), Payload: string(shown), Headers: map[string]string{}}
	if json.Valid(shown) {
		d.PayloadJSON = json.RawMessage(shown)
	}
	if json.Valid(l.Normalized) {
		d.Normalized = l.Normalized
	}
	if len(l.Headers) > 0 {
		_ = json.Unmarshal(l.Headers, &d.Headers)
	}
	if d.Attempts, err = s.Store.Attempts(ctx, id); err != nil {
		return nil, err
	}
	if d.Lineage, err = s.Store.OutboxOf(ctx, id); err != nil {
		return nil, err
	}
	if d.Replays, err = s.Store.AuditOf(ctx, strconv.FormatInt(id, 10), []string{"replay"}, maxReplaysShown); err != nil {
		return nil, err
	}
	return d, nil
}

// Record puts an action without its own transaction (a login) into the
// audit trail; a failure to write it is logged, not fatal.
// reason may be empty.
func (s *Service) Record(ctx context.Context, actor, action, target, reason string) {
	e := store.AuditEntry{Actor: actor, Action: action, Target: target}
	if reason != "" {
		e.Reason = &reason
	}
	if err := s.Store.InsertAuditTx(ctx, nil, e, nil); err != nil {
		s.Log.WarnContext(ctx, "admin: could not write the audit trail", "action", action, "actor", actor, "error", err)
	}
}

// Audit returns the newest entries.
func (s *Service) Audit(ctx context.Context, limit int) ([]store.AuditEntry, error) {
	if limit <= 0 || limit > 500 {
		limit = 100
	}
	return s.Store.Audit(ctx, limit)
}
