package platform

import (
	"errors"
	"fmt"
	"strings"

	"callgate/internal/signature"
)

// publicKeyRing builds the RSA key ring of a preset from its public_keys
// and certificates. An entry whose key is empty (an unset environment
// variable) is skipped, even if its id is set; needID says the platform
// names each public key (WeChat Pay's PUB_KEY_ID_...), so an id is
// required. Each problem names its field.
func publicKeyRing(keys []PublicKey, certs []string, needID bool) (*signature.KeyRing, []error) {
	ring := signature.NewKeyRing()
	var errs []error
	for i, k := range keys {
		field := fmt.Sprintf("public_keys[%d]", i)
		if strings.TrimSpace(k.Key) == "" {
			continue
		}
		id := strings.TrimSpace(k.ID)
		if needID && id == "" {
			errs = append(errs, fieldErr(field+".id", errors.New("is required (the platform's key id, e.g. PUB_KEY_ID_...)")))
			continue
		}
		pub, err := signature.ParseRSAPublicKey(k.Key)
		if err != nil {
			errs = append(errs, fieldErr(field+".key", err))
			continue
		}
		if err := ring.Add(id, pub); err != nil {
			errs = append(errs, fieldErr(field, err))
		}
	}
	for i, bundle := range certs {
		if strings.TrimSpace(bundle) == "" {
			continue
		}
		if _, err := ring.AddCertificates(bundle); err != nil {
			errs = append(errs, fieldErr(fmt.Sprintf("certificates[%d]", i), err))
		}
	}
	return ring, errs
}
