package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The benchmark measures callgate on a MariaDB set up as docs/performance.md asks
// for in production ("What to give MySQL"), and as scripts/services.sh
// configures a MariaDB it installs: a buffer pool that holds the backlog
// (a quarter of the RAM, 512 MB to 4 GB) and a 512 MB redo log. A server
// that was already running with less (a distribution's defaults: 128 MB
// and 96 MB) gets them for the run, with SET GLOBAL (both are dynamic in
// MariaDB 10.11), and its own values back at the end; -server-settings=false
// measures it as it is. The raw INSERT baseline runs on the same settings.
// With the defaults, checkpoint flushing made the open loop's intake p99
// swing from 39 to 78 ms between runs (BENCHMARKS.md).

// serverSetting is one global variable the run raised.
type serverSetting struct {
	name     string
	was, set int64
}

// wantedServerSettings are the buffer pool and redo log sizes services.sh
// writes when it installs MariaDB.
func wantedServerSettings() map[string]int64 {
	pool := int64(512) << 20
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					pool = min(max(kb<<10/4, 512<<20), 4<<30)
				}
			}
		}
	}
	return map[string]int64{"innodb_buffer_pool_size": pool, "innodb_log_file_size": 512 << 20}
}

// raiseServerSettings gives MariaDB the wanted settings it lacks and
// remembers what it had.
func (b *bench) raiseServerSettings(ctx context.Context) error {
	wanted := wantedServerSettings()
	for _, name := range []string{"innodb_buffer_pool_size", "innodb_log_file_size"} {
		want := wanted[name]
		var have int64
		if err := b.db.QueryRowContext(ctx, "SELECT @@"+name).Scan(&have); err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		if have >= want {
			continue
		}
		if _, err := b.db.ExecContext(ctx, fmt.Sprintf("SET GLOBAL %s = %d", name, want)); err != nil {
			b.logf("WARNING: could not raise %s from %d to %d MB for the run (%v): measuring the server as it is", name, have>>20, want>>20, err)
			continue
		}
		b.raised = append(b.raised, serverSetting{name: name, was: have, set: want})
		b.logf("MariaDB: %s %d MB -> %d MB for the run (restored at the end)", name, have>>20, want>>20)
	}
	// Both resizes finish in the background; wait for them.
	deadline := time.Now().Add(2 * time.Minute)
	for _, s := range b.raised {
		for {
			var have int64
			if err := b.db.QueryRowContext(ctx, "SELECT @@"+s.name).Scan(&have); err == nil && have == s.set && b.resizeDone(ctx) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("MariaDB did not finish resizing %s within 2 minutes", s.name)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return nil
}

// resizeDone reports whether no buffer pool resize is under way.
func (b *bench) resizeDone(ctx context.Context) bool {
	var name, status string
	if err := b.db.QueryRowContext(ctx, "SHOW STATUS LIKE 'Innodb_buffer_pool_resize_status'").Scan(&name, &status); err != nil {
		return true // not reported by this server
	}
	return status == "" || strings.Contains(strings.ToLower(status), "complet")
}

// restoreServerSettings puts back what raiseServerSettings changed.
func (b *bench) restoreServerSettings() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range b.raised {
		if _, err := b.db.ExecContext(ctx, fmt.Sprintf("SET GLOBAL %s = %d", s.name, s.was)); err != nil {
			b.logf("WARNING: could not restore %s to %d MB: %v", s.name, s.was>>20, err)
		}
	}
	b.raised = nil
}
