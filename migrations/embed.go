// Package migrations holds callgate's versioned SQL schema, embedded in the
// binaries so that `gateway migrate` needs no files on disk.
//
// Files are named NNN_name.up.sql / NNN_name.down.sql and applied in order by
// golang-migrate (see internal/store/migrate.go). Never edit a migration that
// has shipped: add a new one.
package migrations

import "embed"

// FS holds every *.sql file of this folder.
//
//go:embed *.sql
var FS embed.FS
