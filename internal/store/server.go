package store

import (
	"context"
	"fmt"
	"strings"
)

// returning reports whether the server can answer an INSERT with its rows
// (INSERT ... RETURNING: MariaDB 10.5 and later; MySQL cannot).
func (s *Store) returning(ctx context.Context) (bool, error) {
	var version string
	if err := s.sql.QueryRowContext(ctx, `SELECT VERSION()`).Scan(&version); err != nil {
		return false, fmt.Errorf("error reading the server's version: %w", translate(err))
	}
	return versionReturns(version), nil
}

// versionReturns reads a VERSION() string such as "10.11.19-MariaDB-0+deb12u1"
// (some builds put "5.5.5-" before it for old clients' sake).
func versionReturns(version string) bool {
	if !strings.Contains(version, "MariaDB") {
		return false
	}
	version = strings.TrimPrefix(version, "5.5.5-")
	var major, minor int
	if _, err := fmt.Sscanf(version, "%d.%d", &major, &minor); err != nil {
		return false
	}
	return major > 10 || major == 10 && minor >= 5
}

// MaxAllowedPacket reads the server's max_allowed_packet: the largest
// statement it takes.
func (s *Store) MaxAllowedPacket(ctx context.Context) (int64, error) {
	var n int64
	if err := s.sql.QueryRowContext(ctx, `SELECT @@max_allowed_packet`).Scan(&n); err != nil {
		return 0, fmt.Errorf("error reading max_allowed_packet: %w", translate(err))
	}
	return n, nil
}
