package callback

import (
	"crypto/sha256"
	"encoding/hex"
)

// BodyDigest is the event id of a notification that carries none in its
// signed bytes: "sha256:" and the hex SHA-256 of the raw body, so that the
// same signed body sent again, under any unsigned header, is a duplicate
// (docs/security.md, "Replays"). 71 characters.
func BodyDigest(body []byte) string {
	sum := sha256.Sum256(body)
	return "sha256:" + hex.EncodeToString(sum[:])
}
