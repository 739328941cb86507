package replay

import (
	"fmt"
	"time"

	"callgate/internal/callback"
	"callgate/internal/store"
)

// BulkFilter selects the callbacks of a bulk replay. At least one field
// must be set; Status defaults to FAILED, and only FAILED (or, with
// Status SUCCESS, SUCCESS) callbacks can be replayed.
type BulkFilter struct {
	Status        string     `json:"status,omitempty"`
	Source        string     `json:"source,omitempty"`
	Kind          string     `json:"kind,omitempty"`
	Since         *time.Time `json:"since,omitempty"`
	Until         *time.Time `json:"until,omitempty"`
	ErrorContains string     `json:"error_contains,omitempty"`
	IDs           []int64    `json:"ids,omitempty"`
	// Origin is callback.OriginNotify or callback.OriginReconcile ("":
	// both).
	Origin string `json:"origin,omitempty"`
}

// maxIDs bounds a filter's id list.
const maxIDs = 100000

// Normalized checks f and fills its default status.
func (f BulkFilter) Normalized() (BulkFilter, error) {
	if f.Source == "" && f.Kind == "" && f.Since == nil && f.Until == nil && f.ErrorContains == "" && len(f.IDs) == 0 && f.Status == "" && f.Origin == "" {
		return f, ErrEmptyFilter
	}
	if f.Status == "" {
		f.Status = string(callback.StatusFailed)
	}
	if f.Status != string(callback.StatusFailed) && f.Status != string(callback.StatusSuccess) {
		return f, fmt.Errorf("%w: status must be FAILED or SUCCESS", ErrBadFilter)
	}
	if f.Origin != "" && !callback.KnownOrigin(f.Origin) {
		return f, fmt.Errorf("%w: origin must be notify or reconcile", ErrBadFilter)
	}
	if len(f.IDs) > maxIDs {
		return f, fmt.Errorf("%w: at most %d ids", ErrBadFilter, maxIDs)
	}
	return f, nil
}

// selection is f as the store's filter.
func (f BulkFilter) selection() store.CallbackFilter {
	return store.CallbackFilter{Status: f.Status, Source: f.Source, Kind: f.Kind, Since: f.Since, Until: f.Until,
		ErrorContains: f.ErrorContains, IDs: f.IDs, Origin: f.Origin}
}
