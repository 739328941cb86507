package ingest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/ingest"
	"callgate/internal/platform"
)

// TestKeptHeaders: a source keeps the common headers and its scheme's
// own, each once, in their canonical form.
func TestKeptHeaders(t *testing.T) {
	t.Parallel()
	want := []string{"Content-Type", "User-Agent", "Traceparent", "Tracestate", "X-Request-Id", "X-Forwarded-For", "Wechatpay-Signature"}
	if d := cmp.Diff(want, ingest.KeptHeaders([]string{"wechatpay-signature", "content-type"})); d != "" {
		t.Errorf("(-want +got)\n%s", d)
	}
}

// TestStoredHeaders: only the kept headers are stored, one given twice
// joined.
func TestStoredHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Add("Content-Type", "application/json")
	h.Add("X-Forwarded-For", "198.51.100.1")
	h.Add("X-Forwarded-For", "10.0.0.1")
	h.Add("Authorization", "Bearer secret")
	got := ingest.StoredHeaders(h, ingest.KeptHeaders(nil))
	require.JSONEq(t, `{"Content-Type":"application/json","X-Forwarded-For":"198.51.100.1, 10.0.0.1"}`, string(got))
}

// TestPresetRows: one row per callback, the template's fields with the
// callback's ids and event; an unreadable one is kept with its reason
// and reported; ids the columns cannot hold refuse them all.
func TestPresetRows(t *testing.T) {
	t.Parallel()
	template := &callback.Log{Source: "wechatpay", Kind: "payment", Status: callback.StatusPending, Payload: []byte(`{}`),
		Origin: callback.OriginReconcile}
	paid := callback.PaymentEvent{OrderCode: "O-1", Status: callback.PaymentSuccess}
	var reported []string
	rows, err := ingest.PresetRows(template, []platform.Callback{
		{EventID: "E-1", BusinessKey: "O-1", Event: paid},
		{EventID: "E-2", BusinessKey: "O-1", Unreadable: "no amount"},
	}, func(cb platform.Callback) { reported = append(reported, cb.EventID) })
	require.NoError(t, err)
	require.Len(t, rows, 2)
	for i, id := range []string{"E-1", "E-2"} {
		require.Equal(t, id, rows[i].EventID)
		require.Equal(t, "O-1", rows[i].BusinessKey)
		require.Equal(t, "wechatpay", rows[i].Source)
		require.Equal(t, callback.OriginReconcile, rows[i].Origin)
	}
	reason, ok := callback.UnreadableReason(rows[1].Normalized)
	require.True(t, ok)
	require.Equal(t, "no amount", reason)
	require.Equal(t, []string{"E-2"}, reported)
	require.Empty(t, template.EventID, "the template is copied, not changed")

	for _, tc := range []struct {
		cb   platform.Callback
		want string
	}{
		{platform.Callback{BusinessKey: "O-1", Event: paid}, "no event id"},
		{platform.Callback{EventID: strings.Repeat("e", callback.MaxEventIDLen+1), BusinessKey: "O-1", Event: paid}, "event id is longer"},
		{platform.Callback{EventID: "E-1", Event: paid}, "no order or waybill number"},
		{platform.Callback{EventID: "E-1", BusinessKey: strings.Repeat("k", callback.MaxBusinessKeyLen+1), Event: paid}, "business key is longer"},
	} {
		_, err := ingest.PresetRows(template, []platform.Callback{{EventID: "E-0", BusinessKey: "O-0", Event: paid}, tc.cb}, nil)
		require.ErrorContains(t, err, tc.want)
	}
}
