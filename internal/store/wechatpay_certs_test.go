package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/store"
	"callgate/internal/testenv"
)

func wechatCert(serial string, expires time.Time) store.WeChatPayCertificate {
	return store.WeChatPayCertificate{Serial: serial, PEM: "pem of " + serial,
		EffectiveAt: expires.Add(-5 * 365 * 24 * time.Hour), ExpiresAt: expires}
}

func serials(t *testing.T, st *testenv.TestStore, mchID string, now time.Time) []string {
	t.Helper()
	rows, err := st.WeChatPayCertificates(t.Context(), mchID, now)
	require.NoError(t, err)
	out := []string{}
	for _, r := range rows {
		out = append(out, r.Serial)
	}
	return out
}

// TestWeChatPayCertificatesExpiredNotLoaded: a certificate expired when
// its download is saved is not stored; one that expires later is loaded
// until its expiry, and not after; another merchant's are not loaded; a
// serial differing only by a trailing space is another serial.
func TestWeChatPayCertificatesExpiredNotLoaded(t *testing.T) {
	t.Parallel()
	st := testenv.Store(t, testenv.Config(t))
	now := time.Now().UTC().Truncate(time.Second)
	certs := []store.WeChatPayCertificate{wechatCert("A1", now.Add(5*24*time.Hour)), wechatCert("B2", now.Add(time.Hour)),
		wechatCert("C3", now.Add(-time.Hour)), wechatCert("A1 ", now.Add(5*24*time.Hour))}
	require.NoError(t, st.SaveWeChatPayCertificates(t.Context(), "1230000109", certs, now))
	require.NoError(t, st.SaveWeChatPayCertificates(t.Context(), "1900000001", certs[:1], now))

	var stored int
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM wechatpay_certificates WHERE mchid = '1230000109'`).Scan(&stored))
	require.Equal(t, 3, stored, "C3, expired, is not stored")
	require.Equal(t, []string{"A1", "A1 ", "B2"}, serials(t, st, "1230000109", now))
	rows, err := st.WeChatPayCertificates(t.Context(), "1230000109", now)
	require.NoError(t, err)
	require.Equal(t, "pem of B2", rows[2].PEM)
	require.True(t, rows[2].ExpiresAt.Equal(now.Add(time.Hour)))
	require.True(t, rows[2].DownloadedAt.Equal(now))
	require.Equal(t, []string{"A1", "A1 ", "B2"}, serials(t, st, "1230000109", now.Add(time.Hour)), "valid through its expiry")
	require.Equal(t, []string{"A1", "A1 "}, serials(t, st, "1230000109", now.Add(time.Hour+time.Second)), "B2 expired: not loaded")
	require.Equal(t, []string{"A1"}, serials(t, st, "1900000001", now))
	require.Empty(t, serials(t, st, "1230000110", now))

	// The next save deletes the rows expired by then.
	later := now.Add(2 * time.Hour)
	require.NoError(t, st.SaveWeChatPayCertificates(t.Context(), "1230000109", certs[:2], later))
	require.NoError(t, st.SQL.QueryRow(`SELECT COUNT(*) FROM wechatpay_certificates WHERE mchid = '1230000109'`).Scan(&stored))
	require.Equal(t, 1, stored, "B2 expired and A1 with a space no longer listed: deleted")
}

// TestWeChatPayCertificatesSharedByProcesses: two processes (two stores
// on one database) see each other's downloads; a later download's list
// replaces the stored one; an earlier download saved late deletes nothing
// the later one stored; saves at once from both processes all succeed.
func TestWeChatPayCertificatesSharedByProcesses(t *testing.T) {
	t.Parallel()
	cfg := testenv.Config(t)
	gateway, worker := testenv.Store(t, cfg), testenv.Store(t, cfg)
	const mch = "1230000109"
	t0 := time.Now().UTC().Truncate(time.Second)
	exp := t0.Add(30 * 24 * time.Hour)

	require.NoError(t, gateway.SaveWeChatPayCertificates(t.Context(), mch, []store.WeChatPayCertificate{wechatCert("A", exp), wechatCert("B", exp)}, t0))
	require.Equal(t, []string{"A", "B"}, serials(t, worker, mch, t0))

	// WeChat Pay drops A and lists C: the worker's download replaces the list.
	t2 := t0.Add(2 * time.Minute)
	require.NoError(t, worker.SaveWeChatPayCertificates(t.Context(), mch, []store.WeChatPayCertificate{wechatCert("B", exp), wechatCert("C", exp)}, t2))
	require.Equal(t, []string{"B", "C"}, serials(t, gateway, mch, t2))

	// A download of the gateway's from before (t1 < t2), saved only now:
	// it deletes nothing stored at t2 and keeps t2 as B's time.
	t1 := t0.Add(time.Minute)
	require.NoError(t, gateway.SaveWeChatPayCertificates(t.Context(), mch, []store.WeChatPayCertificate{wechatCert("A", exp), wechatCert("B", exp)}, t1))
	rows, err := worker.WeChatPayCertificates(t.Context(), mch, t2)
	require.NoError(t, err)
	require.Len(t, rows, 3)
	require.Equal(t, []string{"A", "B", "C"}, []string{rows[0].Serial, rows[1].Serial, rows[2].Serial})
	require.True(t, rows[0].DownloadedAt.Equal(t1))
	require.True(t, rows[1].DownloadedAt.Equal(t2), "the later download's time stays")
	// The next download removes it again.
	t3 := t0.Add(3 * time.Minute)
	require.NoError(t, gateway.SaveWeChatPayCertificates(t.Context(), mch, []store.WeChatPayCertificate{wechatCert("B", exp), wechatCert("C", exp)}, t3))
	require.Equal(t, []string{"B", "C"}, serials(t, worker, mch, t3))

	// Both processes saving at once, many times (the gaps they lock can
	// deadlock: retried).
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 20 {
		for _, st := range []*testenv.TestStore{gateway, worker} {
			wg.Go(func() {
				at := t3.Add(time.Duration(i+1) * time.Second)
				errs <- st.SaveWeChatPayCertificates(t.Context(), mch, []store.WeChatPayCertificate{wechatCert("C", exp), wechatCert("D", exp)}, at)
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	require.Equal(t, []string{"C", "D"}, serials(t, gateway, mch, t3))
}
