package ingest

import (
	"errors"
	"fmt"

	"callgate/internal/callback"
	"callgate/internal/platform"
)

// PresetRows makes the rows stored of the callbacks a preset read (from a
// notification, or, with template.Origin reconcile, from a platform's
// answer to a query): one per callback, a copy of template (source, kind,
// body, headers, trace, times) with the callback's event id, business key
// and canonical event. A callback that is signed and ours but unreadable
// is kept (FAILED with the reason by the worker) and reported to
// unreadable. An error is a reason to refuse them all, nothing stored.
func PresetRows(template *callback.Log, cbs []platform.Callback, unreadable func(platform.Callback)) ([]*callback.Log, error) {
	rows := make([]*callback.Log, len(cbs))
	for i, cb := range cbs {
		if err := checkIDs(cb); err != nil {
			return nil, err
		}
		event := cb.Event
		if cb.Unreadable != "" {
			event = callback.Unreadable{Reason: callback.Truncate(cb.Unreadable, 2000)}
			if unreadable != nil {
				unreadable(cb)
			}
		}
		normalized, err := callback.MarshalEvent(event)
		if err != nil || len(normalized) > callback.MaxNormalizedBytes {
			return nil, errors.New("the notification's fields are too large")
		}
		row := *template
		row.EventID, row.BusinessKey, row.Normalized = cb.EventID, cb.BusinessKey, normalized
		rows[i] = &row
	}
	return rows, nil
}

// checkIDs refuses an event id or business key the columns cannot hold or
// a person could not read back.
func checkIDs(cb platform.Callback) error {
	switch {
	case cb.EventID == "":
		return fmt.Errorf("the notification has no event id")
	case len(cb.EventID) > callback.MaxEventIDLen:
		return fmt.Errorf("event id is longer than %d characters", callback.MaxEventIDLen)
	case cb.BusinessKey == "":
		return fmt.Errorf("the notification has no order or waybill number")
	case len(cb.BusinessKey) > callback.MaxBusinessKeyLen:
		return fmt.Errorf("business key is longer than %d characters", callback.MaxBusinessKeyLen)
	}
	return nil
}
