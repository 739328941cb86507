package platform

import (
	"time"

	"callgate/internal/callback"
)

// When things happened, by the platforms' clocks: each preset dates the
// event it maps (callback.PaymentEvent.OccurredAt) so that an order's
// facts are taken in the order they happened, whatever order they came
// in (docs/guarantees.md, "Facts"). A time that is missing or unreadable
// leaves the event undated (taken when it was received): a date is never
// a reason to refuse a notification.

// unixAt reads the Unix seconds at path (Stripe's created, Shopify's
// created_at is RFC 3339: rfc3339At).
func unixAt(obj callback.Object, path string) *time.Time {
	s, err := obj.Scalar(path)
	if err != nil || s == "" {
		return nil
	}
	sec, err := MinorUnits(s, 0)
	if err != nil || sec <= 0 {
		return nil
	}
	t := time.Unix(sec, 0).UTC()
	return &t
}

// rfc3339At reads an RFC 3339 time at path (WeChat Pay, Adyen, Shopify).
func rfc3339At(obj callback.Object, path string) *time.Time {
	s, err := obj.Scalar(path)
	if err != nil {
		return nil
	}
	return parseRFC3339(s)
}

func parseRFC3339(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}

// chinaAt reads Alipay's "2006-01-02 15:04:05" in Beijing time.
func chinaAt(s string) *time.Time {
	if s == "" {
		return nil
	}
	t, err := time.ParseInLocation(chinaTimeLayout, s, chinaTime)
	if err != nil {
		return nil
	}
	t = t.UTC()
	return &t
}
