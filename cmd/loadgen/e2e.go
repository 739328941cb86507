package main

import (
	"context"
	"time"
)

// EndToEnd is what the worker made of an open-loop load.
type EndToEnd struct {
	Accepted     int `json:"accepted"`
	Succeeded    int `json:"succeeded"`
	Failed       int `json:"failed"`
	StillPending int `json:"still_pending"`
	// ProcessedPerSecond over the measured window, and from the first to
	// the last SUCCESS.
	ProcessedPerSecondWindow  float64 `json:"processed_per_second_window"`
	ProcessedPerSecondOverall float64 `json:"processed_per_second_overall"`
	// Drained: every accepted callback SUCCESS when the database was read;
	// DrainSeconds: from the last request sent to the last SUCCESS
	// (processed_at).
	Drained      bool    `json:"drained"`
	DrainSeconds float64 `json:"drain_seconds"`
	// Lag: processed_at - received_at of callbacks received in the window
	// (LagWindow: those not processed when the database was read count
	// with the lag they had then, a lower bound; LagWindowUnprocessed says
	// how many) and of every SUCCESS (LagAll).
	LagWindow            Latency `json:"lag_window"`
	LagWindowUnprocessed int     `json:"lag_window_unprocessed"`
	LagAll               Latency `json:"lag_all"`
	// Downstream: the worker's callgate_outbox_published_total per second
	// over the window, in total, and the outbox rows.
	DownstreamPerSecondWindow float64 `json:"downstream_published_per_second_window"`
	DownstreamPublished       float64 `json:"downstream_published_total"`
	OutboxRows                int     `json:"outbox_rows"`
	OutboxSent                int     `json:"outbox_sent"`
	// Unrouted: notifications in <prefix>.downstream.unrouted afterwards
	// (nobody is bound to <prefix>.downstream in the benchmark).
	Unrouted       int       `json:"unrouted_notifications"`
	DrainResources Resources `json:"drain_resources"`
	// DrainProcessed: callbacks the worker finished after the last send.
	DrainProcessed int `json:"drain_processed"`
	// WorkerAnnounced: log ids the worker itself announced (compensation
	// job re-announcing PENDING callbacks older than its threshold, and
	// per-key wake-ups); CompensationRuns: runs of that job.
	WorkerAnnounced  float64 `json:"worker_announced"`
	CompensationRuns float64 `json:"compensation_runs"`
}

// pending counts PENDING callbacks (-1 on error).
func (b *bench) pending(ctx context.Context) int {
	var n int
	if err := b.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM callback_log WHERE status = 'PENDING'`).Scan(&n); err != nil {
		return -1
	}
	return n
}

// waitPending polls until no callback is PENDING or deadline, and returns
// how many still are (-1: unknown).
func (b *bench) waitPending(ctx context.Context, deadline time.Time) int {
	left := -1
	for ctx.Err() == nil {
		if left = b.pending(ctx); left == 0 || !time.Now().Before(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	return left
}

// e2eFromDB fills e from callback_log and outbox at rest (worker stopped).
func (b *bench) e2eFromDB(ctx context.Context, e *EndToEnd, lastSend, winStart, winEnd time.Time) error {
	byStatus, err := b.countByStatus(ctx, "callback_log")
	if err != nil {
		return err
	}
	e.Succeeded, e.Failed, e.StillPending = byStatus["SUCCESS"], byStatus["FAILED"], byStatus["PENDING"]
	e.Drained = e.StillPending == 0 && e.Failed == 0 && e.Succeeded == e.Accepted

	var first, last *time.Time
	if err := b.db.QueryRowContext(ctx, `SELECT MIN(processed_at), MAX(processed_at) FROM callback_log WHERE status = 'SUCCESS' AND id > ?`,
		b.floor("callback_log")).Scan(&first, &last); err != nil {
		return err
	}
	if first != nil && last != nil {
		e.DrainSeconds = round(last.Sub(lastSend).Seconds(), 2)
		if span := last.Sub(*first).Seconds(); span > 0 {
			e.ProcessedPerSecondOverall = round(float64(e.Succeeded)/span, 1)
		}
	}

	lagW, unprocessed, lagA, err := b.lags(ctx, winStart, winEnd)
	if err != nil {
		return err
	}
	e.LagWindow, e.LagWindowUnprocessed, e.LagAll = summarize(lagW), unprocessed, summarize(lagA)

	outbox, err := b.countByStatus(ctx, "outbox")
	if err != nil {
		return err
	}
	for _, c := range outbox {
		e.OutboxRows += c
	}
	e.OutboxSent = outbox["SENT"]
	return nil
}

// countByStatus counts the rows of a table by status (the phases' rows:
// above the loaded ones of make bench-scale).
func (b *bench) countByStatus(ctx context.Context, table string) (map[string]int, error) {
	rows, err := b.db.QueryContext(ctx, "SELECT status, COUNT(*) FROM "+table+" WHERE id > ? GROUP BY status", b.floor(table))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var c int
		if err := rows.Scan(&s, &c); err != nil {
			return nil, err
		}
		out[s] = c
	}
	return out, rows.Err()
}

// lags returns processed_at - received_at of the callbacks received in
// [winStart, winEnd) (one not processed yet counts with its lag now, and
// is counted in unprocessed), and of every SUCCESS callback (the
// phase's: above make bench-scale's loaded ones).
func (b *bench) lags(ctx context.Context, winStart, winEnd time.Time) (window []time.Duration, unprocessed int, all []time.Duration, err error) {
	now := time.Now()
	rows, err := b.db.QueryContext(ctx, `SELECT received_at, processed_at, status = 'SUCCESS' FROM callback_log WHERE id > ?`, b.floor("callback_log"))
	if err != nil {
		return nil, 0, nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var recv time.Time
		var proc *time.Time
		var success bool
		if err := rows.Scan(&recv, &proc, &success); err != nil {
			return nil, 0, nil, err
		}
		inWindow := !recv.Before(winStart) && recv.Before(winEnd)
		if !success || proc == nil {
			if inWindow {
				window = append(window, now.Sub(recv))
				unprocessed++
			}
			continue
		}
		d := proc.Sub(recv)
		all = append(all, d)
		if inWindow {
			window = append(window, d)
		}
	}
	return window, unprocessed, all, rows.Err()
}

// cpuPerCallback is each process's CPU in a window per callback processed
// in it, in ms, with "machine" for all of the machine's (nil: none
// processed).
func cpuPerCallback(r Resources, callbacks float64) map[string]float64 {
	if callbacks <= 0 || r.WindowSeconds == 0 {
		return nil
	}
	out := map[string]float64{"machine": round(1000*r.MachineBusy.CPUSeconds/callbacks, 3)}
	for name, u := range r.Procs {
		out[name] = round(1000*u.CPUSeconds/callbacks, 3)
	}
	return out
}
