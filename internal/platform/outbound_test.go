package platform_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/reconcile"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/test/platformsim"
)

// trap is an address a misbehaving platform redirects to: it answers
// anything with 200 and counts who came.
func trap(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var came atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		came.Add(1)
		_, _ = io.WriteString(w, `{"status":"200","message":"ok","data":[]}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &came
}

// redirected and oversize are the two misbehaviours every outbound client
// meets here: a 307 to another address (never followed: the trap is never
// asked, so neither the request's credentials nor its answer travel), and
// an answer longer than 1 MiB (refused before any SDK reads it).
func misbehaviours(trapURL string) []struct {
	name string
	m    platformsim.Misbehaviour
	want string
} {
	return []struct {
		name string
		m    platformsim.Misbehaviour
		want string
	}{
		{"redirect", platformsim.Misbehaviour{RedirectTo: trapURL}, "redirect"},
		{"oversize", platformsim.Misbehaviour{Oversize: 2 << 20}, "longer than callgate reads"},
	}
}

// TestQueriersFollowNoRedirectAndReadNoOversizeAnswer: every querier (Alipay,
// WeChat Pay, Stripe, Kuaidi100) meets a redirect and an oversize answer as
// an unreachable platform: the order's query fails with the reason, nothing
// is stored, and the redirect's target is never asked.
func TestQueriersFollowNoRedirectAndReadNoOversizeAnswer(t *testing.T) {
	t.Parallel()
	rc := reconcile.Config{After: time.Minute, Backoff: []time.Duration{time.Hour}}
	failed := func(want string) func(store.ReconcileState) bool {
		return func(st store.ReconcileState) bool { return st.Queries >= 1 && strings.Contains(st.LastError, want) }
	}
	t.Run("alipay", func(t *testing.T) {
		t.Parallel()
		a := startAlipayReconcile(t, rc, testenv.RSAKeys()[1])
		srv, came := trap(t)
		for _, m := range misbehaviours(srv.URL) {
			a.sim.Misbehave(m.m)
			order := "AL-OUT-" + m.name
			a.order(t, order, 100, 5*time.Minute)
			st := a.state(t, order, failed(m.want))
			require.Equal(t, reconcile.OutcomeUnreachable, st.LastOutcome, m.name)
		}
		require.Zero(t, came.Load(), "the redirect was followed")
		require.Zero(t, a.Callbacks(t, "alipay"))
	})
	t.Run("wechatpay", func(t *testing.T) {
		t.Parallel()
		w := startWeChatReconcile(t, rc)
		srv, came := trap(t)
		for _, m := range misbehaviours(srv.URL) {
			w.sim.Misbehave(m.m)
			order := "WX-OUT-" + m.name
			w.order(t, order, 100, 5*time.Minute)
			st := w.state(t, order, failed(m.want))
			require.Equal(t, reconcile.OutcomeUnreachable, st.LastOutcome, m.name)
		}
		require.Zero(t, came.Load(), "the redirect was followed")
		require.Zero(t, w.Callbacks(t, "wechatpay"))
	})
	t.Run("stripe", func(t *testing.T) {
		t.Parallel()
		srv, came := trap(t)
		for _, m := range misbehaviours(srv.URL) {
			s := startStripeReconcile(t, rc, func(sim *platformsim.Stripe) { sim.Misbehave(m.m) })
			order := "ST-OUT-" + m.name
			s.order(t, order, 500, 5*time.Minute)
			st := s.state(t, order, failed(m.want))
			require.Equal(t, reconcile.OutcomeUnreachable, st.LastOutcome, m.name)
			require.Zero(t, s.Callbacks(t, "stripe"))
		}
		require.Zero(t, came.Load(), "the redirect was followed: Stripe's secret key went to it")
	})
	t.Run("kuaidi100", func(t *testing.T) {
		t.Parallel()
		k := startKuaidiReconcile(t, kuaidiKey)
		srv, came := trap(t)
		for _, m := range misbehaviours(srv.URL) {
			k.sim.Misbehave(m.m)
			waybill := "YT-OUT-" + m.name
			k.shipment(t, waybill, "ORD-OUT-"+m.name, "kuaidi100", callback.CarrierInTransit, 2, 2*time.Minute)
			st := k.state(t, waybill, failed(m.want))
			require.Equal(t, reconcile.OutcomeUnreachable, st.LastOutcome, m.name)
		}
		require.Zero(t, came.Load(), "the redirect was followed: an unsigned answer from it would be believed")
		require.Zero(t, k.Callbacks(t, "kuaidi100"))
	})
}
