package main

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/prometheus/procfs"
)

// machineBusyNow measures how busy the machine is over d, in % of one core.
func machineBusyNow(d time.Duration) float64 {
	b0, _, _ := machineCPU()
	time.Sleep(d)
	b1, _, _ := machineCPU()
	return round(100*(b1-b0)/d.Seconds(), 1)
}

// machineInfo fills what the report says about the machine.
func machineInfo() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version(), Date: time.Now().UTC().Format(time.RFC3339)}
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
			m.CPUModel = cpus[0].ModelName
		}
		if mem, err := fs.Meminfo(); err == nil && mem.MemTotal != nil {
			m.MemoryGB = round(float64(*mem.MemTotal)/1024/1024, 1) // kB
		}
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(raw))
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.Commit += "+dirty"
		}
	}
	return m
}

// dbStatusVars are the MariaDB counters each window reports the increase of.
var dbStatusVars = []string{"Questions", "Com_begin", "Com_commit", "Com_select", "Com_insert", "Com_update", "Com_delete",
	"Com_set_option", "Innodb_data_fsyncs", "Rows_read",
	"Handler_read_rnd_next", "Innodb_buffer_pool_reads", "Innodb_row_lock_waits", "Innodb_row_lock_time"}

// dbStatus reads MariaDB's global counters (nil on error).
func (b *bench) dbStatus() map[string]float64 { return readStatus(b.db, dbStatusVars) }

// foreignQueries names the other databases with a query running in MariaDB
// right now (not ours, not idle connections).
func (b *bench) foreignQueries() []string {
	rows, err := b.db.Query(`SELECT DISTINCT DB FROM information_schema.PROCESSLIST
		WHERE COMMAND = 'Query' AND DB IS NOT NULL AND DB <> ? AND ID <> CONNECTION_ID()`, b.dbName)
	if err != nil {
		return nil
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if rows.Scan(&d) == nil {
			out = append(out, d)
		}
	}
	if rows.Err() != nil {
		return nil
	}
	return out
}
