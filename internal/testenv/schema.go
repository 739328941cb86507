package testenv

import (
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"

	"callgate/internal/store"
)

// A test database is a copy of one migrated per test process: running the
// migrations (25 of them, ALTERs included, and 30 day partitions since
// migration 025) took about 0.28 s per database, a copy of their result
// about 0.1 s, and make test makes hundreds. The copy is the migrated
// schema's own SHOW CREATE TABLE text and its rows (schema_migrations,
// the seeded singletons), so what a test gets is what the migrations
// make; internal/store's migrate tests still run the migrations
// themselves. The schema is made again on a new UTC day, as the
// partitions are named after the day the migrations ran.
type schema struct {
	day string
	// charset and collation: the database's defaults, as the migrations'
	// CREATE DATABASE gave them (tests create tables of their own).
	charset, collation string
	tables             []schemaTable
}

type schemaTable struct {
	name, create string
	rows         [][]any
}

var (
	schemasMu sync.Mutex
	schemas   = map[string]*schema{} // by server DSN
)

// migratedSchema is the schema the migrations make on server, read from
// a database migrated for the purpose and dropped afterwards.
func migratedSchema(server string) (*schema, error) {
	schemasMu.Lock()
	defer schemasMu.Unlock()
	day := time.Now().UTC().Format(time.DateOnly)
	if s := schemas[server]; s != nil && s.day == day {
		return s, nil
	}
	c, err := mysql.ParseDSN(server)
	if err != nil {
		return nil, err
	}
	c.DBName = "callgate_tmpl_" + Suffix()
	// Values are copied as the server prints them, never as time.Time.
	c.ParseTime = false
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, err
	}
	defer func() {
		_, _ = db.Exec("DROP DATABASE IF EXISTS `" + c.DBName + "`")
		_ = db.Close()
	}()
	if _, err := store.CreateAndMigrate(c.FormatDSN(), 2*time.Second); err != nil {
		return nil, err
	}
	s, err := readSchema(db)
	if err != nil {
		return nil, err
	}
	s.day = day
	schemas[server] = s
	return s, nil
}

func readSchema(db *sql.DB) (*schema, error) {
	names, err := tableNames(db)
	if err != nil {
		return nil, err
	}
	s := &schema{}
	if err := db.QueryRow("SELECT default_character_set_name, default_collation_name FROM information_schema.schemata WHERE schema_name = DATABASE()").Scan(&s.charset, &s.collation); err != nil {
		return nil, fmt.Errorf("reading the database's character set: %w", err)
	}
	// Only tables are copied: anything else the migrations made would be
	// lost without a word.
	var others int
	if err := db.QueryRow(`SELECT (SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type <> 'BASE TABLE')
		+ (SELECT COUNT(*) FROM information_schema.triggers WHERE trigger_schema = DATABASE())
		+ (SELECT COUNT(*) FROM information_schema.routines WHERE routine_schema = DATABASE())
		+ (SELECT COUNT(*) FROM information_schema.events WHERE event_schema = DATABASE())`).Scan(&others); err != nil {
		return nil, err
	}
	if others > 0 {
		return nil, fmt.Errorf("the migrations made %d views, triggers, routines or events, which testenv does not copy: copy them in schema.go", others)
	}
	for _, n := range names {
		t := schemaTable{name: n}
		var ignored string
		if err := db.QueryRow("SHOW CREATE TABLE `"+n+"`").Scan(&ignored, &t.create); err != nil {
			return nil, fmt.Errorf("SHOW CREATE TABLE %s: %w", n, err)
		}
		if t.rows, err = tableRows(db, n); err != nil {
			return nil, err
		}
		s.tables = append(s.tables, t)
	}
	return s, nil
}

func tableNames(db *sql.DB) ([]string, error) {
	rows, err := db.Query("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE' ORDER BY table_name")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, err
		}
		names = append(names, n)
	}
	return names, rows.Err()
}

func tableRows(db *sql.DB, table string) ([][]any, error) {
	rows, err := db.Query("SELECT * FROM `" + table + "`")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rows.Next() {
		raw := make([]sql.RawBytes, len(cols))
		ptrs := make([]any, len(cols))
		for i := range raw {
			ptrs[i] = &raw[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			return nil, err
		}
		row := make([]any, len(cols))
		for i, b := range raw {
			if b != nil {
				row[i] = string(b)
			}
		}
		out = append(out, row)
	}
	return out, rows.Err()
}

// createFrom creates database c.DBName on its server with s's tables and rows.
func createFrom(c mysql.Config, s *schema) error {
	c.MultiStatements = false
	name := c.DBName
	c.DBName = ""
	root, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	defer root.Close()
	if _, err := root.Exec("CREATE DATABASE `" + name + "` CHARACTER SET " + s.charset + " COLLATE " + s.collation); err != nil {
		return err
	}
	c.DBName = name
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, t := range s.tables {
		if _, err := db.Exec(t.create); err != nil {
			return fmt.Errorf("creating %s: %w", t.name, err)
		}
		for _, r := range t.rows {
			q := "INSERT INTO `" + t.name + "` VALUES (?" + strings.Repeat(",?", len(r)-1) + ")"
			if _, err := db.Exec(q, r...); err != nil {
				return fmt.Errorf("copying a row of %s: %w", t.name, err)
			}
		}
	}
	return nil
}
