package store

import (
	"context"
	"crypto/rand"
	"fmt"
)

// Random keys of the deployment (migration 022): made once, by whichever
// process asks first, and read by every gateway and worker, so that what
// one process MACs another accepts without a secret in the configuration.

// DeploymentKeySSOFlow names the key of single sign-on's flow cookie.
const DeploymentKeySSOFlow = "sso_flow"

// DeploymentKeyBytes is the length of a key made here.
const DeploymentKeyBytes = 32

// maxDeploymentKeyName is the width of deployment_keys.name.
const maxDeploymentKeyName = 64

// DeploymentKey returns the key named name, making a random one of
// DeploymentKeyBytes if there is none yet. Processes asking at once get
// the same key: each offers a random one with INSERT IGNORE (the first to
// commit wins, the others' inserts wait on its row and are ignored), then
// reads the row that won. A stored key shorter than DeploymentKeyBytes
// (a row edited by hand) is an error, not a weak key.
func (s *Store) DeploymentKey(ctx context.Context, name string) ([]byte, error) {
	if name == "" || len(name) > maxDeploymentKeyName {
		// INSERT IGNORE would store a truncated name without a word.
		return nil, fmt.Errorf("deployment key name %q: want 1 to %d characters", name, maxDeploymentKeyName)
	}
	offer := make([]byte, DeploymentKeyBytes)
	_, _ = rand.Read(offer) // crypto/rand.Read never fails (Go 1.24+)
	err := retryTransient(ctx, func() error {
		_, err := s.sql.ExecContext(ctx, `INSERT IGNORE INTO deployment_keys (name, key_bytes, created_at)
VALUES (?, ?, UTC_TIMESTAMP(6))`, name, offer)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("error making deployment key %s: %w", name, translate(err))
	}
	var key []byte
	if err := s.sql.QueryRowContext(ctx, `SELECT key_bytes FROM deployment_keys WHERE name = ?`, name).Scan(&key); err != nil {
		return nil, fmt.Errorf("error reading deployment key %s: %w", name, translate(err))
	}
	if len(key) < DeploymentKeyBytes {
		return nil, fmt.Errorf("deployment key %s holds %d bytes, want %d: delete its row of deployment_keys to make a new one", name, len(key), DeploymentKeyBytes)
	}
	return key, nil
}
