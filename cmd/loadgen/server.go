package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// The benchmark measures callgate on a MariaDB set up as docs/performance.md
// asks for in production ("What to give MySQL"), and as scripts/services.sh
// configures a MariaDB it installs: a buffer pool that holds the backlog
// (a quarter of the RAM, 512 MB to 4 GB) and a 512 MB redo log. make bench
// and make bench-scale start a MariaDB of their own with them
// (scripts/bench-db.sh). loadgen never changes a server's settings: on a
// server with less it refuses to run, and -server-settings=false measures
// it as it is. (It used to raise them with SET GLOBAL for the run and put
// them back at the end: on the shared server, shrinking the buffer pool
// back from 4 GB to 128 MB made the tests running beside it fail with
// "Lock table is full".) With a distribution's defaults (128 MB and 96 MB),
// checkpoint flushing made the open loop's intake p99 swing from 39 to
// 78 ms between runs (BENCHMARKS.md).

// serverSetting is one global variable below what the benchmark wants.
type serverSetting struct {
	name       string
	have, want int64
}

// wantedServerSettings are the buffer pool and redo log sizes services.sh
// writes when it installs MariaDB (and scripts/bench-db.sh starts its
// server with).
func wantedServerSettings() map[string]int64 {
	pool := int64(512) << 20
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					pool = min(max((kb/1024/4)<<20, 512<<20), 4<<30) // whole MB, as scripts/bench-db.sh computes it
				}
			}
		}
	}
	return map[string]int64{"innodb_buffer_pool_size": pool, "innodb_log_file_size": 512 << 20}
}

// serverSettingNames are wantedServerSettings' keys, in the order they are
// read and reported.
var serverSettingNames = []string{"innodb_buffer_pool_size", "innodb_log_file_size"}

// serverSettingsBelow reads the wanted settings from the server and returns
// those it has less of. It only reads.
func serverSettingsBelow(ctx context.Context, db *sql.DB, wanted map[string]int64) ([]serverSetting, error) {
	var below []serverSetting
	for _, name := range serverSettingNames {
		want, ok := wanted[name]
		if !ok {
			continue
		}
		var have int64
		if err := db.QueryRowContext(ctx, "SELECT @@"+name).Scan(&have); err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if have < want {
			below = append(below, serverSetting{name: name, have: have, want: want})
		}
	}
	return below, nil
}

// serverSettingsError is loadgen's refusal to measure a server with less
// than the wanted settings (addr: the server's, from -mysql).
func serverSettingsError(addr string, below []serverSetting) error {
	var parts []string
	for _, s := range below {
		parts = append(parts, fmt.Sprintf("%s is %d MB, below the %d MB the benchmark wants", s.name, s.have>>20, s.want>>20))
	}
	return fmt.Errorf("MariaDB at %s: %s. loadgen does not change a server's settings: "+
		"make bench and make bench-scale measure a MariaDB of their own that has them (scripts/bench-db.sh); "+
		"-server-settings=false measures this one as it is", addr, strings.Join(parts, "; "))
}

// checkServerSettings refuses a server with less than the wanted
// settings, unless -server-settings=false; then it warns, and reports
// whether the server had less.
func (b *bench) checkServerSettings(ctx context.Context, db *sql.DB, addr string, wanted map[string]int64) (below bool, err error) {
	short, err := serverSettingsBelow(ctx, db, wanted)
	if err != nil || len(short) == 0 {
		return false, err
	}
	if b.o.serverSettings {
		return true, serverSettingsError(addr, short)
	}
	for _, s := range short {
		b.logf("WARNING: measuring MariaDB as it is (-server-settings=false): %s %d MB, below the %d MB make bench's server has", s.name, s.have>>20, s.want>>20)
	}
	return true, nil
}

// checkServer runs checkServerSettings on -mysql's server, before the
// benchmark creates anything there.
func (b *bench) checkServer(ctx context.Context) (below bool, err error) {
	c, err := mysql.ParseDSN(b.o.mysqlDSN)
	if err != nil {
		return false, err
	}
	c.DBName = ""
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return false, err
	}
	defer db.Close()
	return b.checkServerSettings(ctx, db, c.Addr, wantedServerSettings())
}
