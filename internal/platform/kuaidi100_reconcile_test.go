package platform_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/platform"
	"callgate/internal/reconcile"
	"callgate/internal/store"
	"callgate/internal/testenv"
	"callgate/test/platformsim"
)

const (
	kuaidiCustomer = "3564B6CBE0A1B2C3D4E5F6A7B8C9D0E1"
	kuaidiKey      = "callgate-kuaidi100-key"
)

// kuaidiReconcile is a gateway and a worker with the kuaidi100 source
// asking a Kuaidi100 simulator about waybills silent for a minute.
type kuaidiReconcile struct {
	*testenv.Platform
	sim     *platformsim.Kuaidi100
	metrics string // the worker's /metrics
}

// startKuaidiReconcile: key is the key the queries are signed with (the
// simulator's account has kuaidiKey).
func startKuaidiReconcile(t *testing.T, key string) *kuaidiReconcile {
	return startKuaidiReconcileWith(t, key, reconcile.Config{Interval: 100 * time.Millisecond})
}

func startKuaidiReconcileWith(t *testing.T, key string, rc reconcile.Config) *kuaidiReconcile {
	t.Helper()
	sim := platformsim.StartKuaidi100(t, kuaidiCustomer, kuaidiKey)
	var metrics string
	p := testenv.StartPlatform(t, "kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}}, func(c *config.Config) {
		metrics = workerMetricsOn(t, c)
		for i := range c.Sources {
			if c.Sources[i].Name == "kuaidi100" {
				c.Sources[i].Reconcile.Customer = kuaidiCustomer
				c.Sources[i].Reconcile.APIKey = key
				c.Sources[i].Reconcile.APIBase = sim.URL
				c.Sources[i].Reconcile.SilentFor = time.Minute
			}
		}
		c.Scheduler.Reconcile = rc.WithDefaults()
	})
	return &kuaidiReconcile{Platform: p, sim: sim, metrics: metrics}
}

// shipment records a shipment as the merchant's system does when it hands
// the parcel over, tracked by source (NULL: "") with carrier com, last
// updated age ago.
func (k *kuaidiReconcile) shipment(t *testing.T, waybill, order, source, status string, seq int64, age time.Duration) {
	t.Helper()
	var src, com any
	if source != "" {
		src, com = source, "yuantong"
	}
	_, err := k.St.SQL.Exec(`INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at, tracking_source, carrier_code)
 VALUES (?, ?, ?, ?, ?, ?, ?)`, waybill, order, status, seq, time.Now().UTC().Add(-age), src, com)
	require.NoError(t, err)
}

func (k *kuaidiReconcile) state(t *testing.T, waybill string, ok func(store.ReconcileState) bool) store.ReconcileState {
	t.Helper()
	var st store.ReconcileState
	require.Eventually(t, func() bool {
		var err error
		st, err = k.St.GetWaybillReconcile(t.Context(), waybill)
		return err == nil && ok(st)
	}, 15*time.Second, 20*time.Millisecond, "reconciliation of %s: last %+v", waybill, st)
	return st
}

// kuaidiData is a snapshot's data, as Kuaidi100 gives it with resultv2=1.
func kuaidiData(cps ...checkpoint) []map[string]any {
	data := make([]map[string]any, len(cps))
	for i, c := range cps {
		data[i] = map[string]any{"context": c.Context, "time": c.Time, "ftime": c.Time, "status": c.Status, "areaCode": "310000000000", "areaName": c.AreaName}
	}
	return data
}

// TestReconcileAsksKuaidi100AboutASilentWaybill: a waybill silent past
// silent_for is asked about; the snapshot it shows (delivered, a push
// that never came) is stored as a callback of the kuaidi100 source with
// origin reconcile and the push's own event id, and processed by the same
// rules: the shipment DELIVERED, shipment.updated and order.delivered
// published. The push of that snapshot, late, is an exact duplicate.
// Waybills not silent long enough, delivered, or tracked by no source are
// never asked.
func TestReconcileAsksKuaidi100AboutASilentWaybill(t *testing.T) {
	k := startKuaidiReconcile(t, kuaidiKey)
	down := testenv.Downstream(t, k.Cfg)
	const waybill, order = "YT-RC-SILENT-1", "ORD-KD-RC-1"
	k.sim.SetSnapshot(waybill, "yuantong", "3", kuaidiData(cpDelivered, cpTransit, cpPickedUp))
	k.shipment(t, waybill, order, "kuaidi100", callback.CarrierInTransit, 2, 2*time.Minute)
	k.shipment(t, "YT-RC-RECENT", "ORD-KD-RC-2", "kuaidi100", callback.CarrierInTransit, 2, 0)
	k.shipment(t, "YT-RC-DELIVERED", "ORD-KD-RC-3", "kuaidi100", callback.CarrierDelivered, 3, 2*time.Minute)
	k.shipment(t, "YT-RC-UNTRACKED", "ORD-KD-RC-4", "", callback.CarrierInTransit, 2, 2*time.Minute)

	st := k.state(t, waybill, func(s store.ReconcileState) bool { return s.FoundLogID != 0 })
	require.Equal(t, reconcile.OutcomeFound, st.LastOutcome)
	require.WithinDuration(t, time.Now().Add(time.Minute), st.NextAt, 30*time.Second, "asked again after silent_for if still silent")
	row := k.St.WaitStatus(t, st.FoundLogID, callback.StatusSuccess)
	require.Equal(t, "kuaidi100", row.Source)
	require.Equal(t, callback.OriginReconcile, row.Origin)
	require.Equal(t, waybill+":3:3", row.EventID, "the push's own event id")
	require.Contains(t, string(row.Payload), `"nu":"`+waybill+`"`, "the raw answer is kept")
	require.Equal(t, shipment{ptr(order), callback.CarrierDelivered, 3}, shipmentOf(t, k.Platform, waybill))
	msgs := downstream(t, down, 2)
	require.Equal(t, callback.CarrierDelivered, msgs["shipment.updated"]["status"])
	require.Equal(t, map[string]any{"orderCode": order, "waybillNo": waybill}, msgs["order.delivered"])
	require.Equal(t, []map[string]string{{"com": "yuantong", "num": waybill, "phone": "", "resultv2": "1", "show": "0", "order": "desc"}},
		k.sim.Params(), "asked as Kuaidi100 documents, once")

	late := kuaidiSigned(kuaidiParam(waybill, "3", cpDelivered, cpTransit, cpPickedUp))
	require.Equal(t, kuaidiOK, string(k.Post(t, "kuaidi100", late, formHeader()).Body))
	require.Equal(t, 1, k.Callbacks(t, "kuaidi100"), "the late push of the same snapshot is a duplicate")

	require.Equal(t, 1, found(t, k.metrics, "kuaidi100", "shipment"), "counted")
	require.Equal(t, 1, queries(t, k.metrics, "kuaidi100", reconcile.OutcomeFound))

	// Due again (as after silent_for), but delivered now: not asked.
	_, err := k.St.SQL.Exec(`UPDATE reconcile_waybills SET next_at = ?`, time.Now().UTC().Add(-time.Second))
	require.NoError(t, err)
	_, err = k.St.SQL.Exec(`UPDATE shipments SET updated_at = ? WHERE waybill_no = ?`, time.Now().UTC().Add(-2*time.Minute), waybill)
	require.NoError(t, err)
	time.Sleep(time.Second) // several runs
	for _, w := range []string{"YT-RC-RECENT", "YT-RC-DELIVERED", "YT-RC-UNTRACKED"} {
		require.Zero(t, k.sim.Asked(w), w)
	}
	require.Equal(t, 1, k.sim.Asked(waybill), "delivered now: not asked again")
}

// TestReconcileKuaidi100BindsAndGivesUp: an answer about another carrier,
// or another waybill, is not ours and stores nothing (Kuaidi100 signs
// nothing: the answer must be about what was asked); a waybill still
// silent silent_for + give_up after its last change is given up on
// (counted, never asked again until a new checkpoint comes); the API is
// asked over https only.
func TestReconcileKuaidi100BindsAndGivesUp(t *testing.T) {
	k := startKuaidiReconcileWith(t, kuaidiKey, reconcile.Config{Interval: 100 * time.Millisecond, After: time.Minute, GiveUp: 2 * time.Minute})
	k.sim.AnswerAnyCarrier(true)
	k.sim.SetSnapshot("YT-RC-OTHER-COM", "shunfeng", "3", kuaidiData(cpDelivered, cpTransit, cpPickedUp))
	k.shipment(t, "YT-RC-OTHER-COM", "ORD-KD-RC-8", "kuaidi100", callback.CarrierInTransit, 2, 2*time.Minute)
	st := k.state(t, "YT-RC-OTHER-COM", func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeNotOurs, st.LastOutcome, "a snapshot of shunfeng's answers a yuantong query: %s", st.LastError)
	require.Zero(t, k.Callbacks(t, "kuaidi100"), "stored nothing")
	require.Equal(t, callback.CarrierInTransit, shipmentOf(t, k.Platform, "YT-RC-OTHER-COM").Status)
	q, err := reconcile.NewKuaidi100(reconcile.Kuaidi100Config{Customer: kuaidiCustomer, Key: kuaidiKey, APIBase: k.sim.URL})
	require.NoError(t, err)
	_, err = q.QueryWaybill(t.Context(), store.SilentWaybill{WaybillNo: "YT-RC-OTHER-COM", Carrier: "SHUNFENG"})
	require.NoError(t, err, "the carrier's code compares without case")

	p, err := platform.New("kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}})
	require.NoError(t, err)
	answer := []byte(`{"message":"ok","nu":"YT-OTHER","com":"yuantong","status":"200","state":"3","data":[{"context":"x","time":"2024-05-03 10:12:45"}]}`)
	_, err = p.(platform.Answerer).ReadAnswer("YT-ASKED", answer)
	require.ErrorContains(t, err, `not "YT-ASKED"`, "an answer about another waybill")

	for _, base := range []string{"http://poll.kuaidi100.com", "ftp://127.0.0.1"} {
		_, err := reconcile.NewKuaidi100(reconcile.Kuaidi100Config{Customer: "c", Key: "k", APIBase: base})
		require.ErrorContains(t, err, "KUAIDI100_API_BASE", base)
	}
	_, err = reconcile.NewKuaidi100(reconcile.Kuaidi100Config{Customer: "c", Key: "k", APIBase: "https://poll.kuaidi100.com"})
	require.NoError(t, err)

	// Silent for 4 minutes: past silent_for (1m) + give_up (2m).
	k.shipment(t, "YT-RC-LOST", "ORD-KD-RC-9", "kuaidi100", callback.CarrierInTransit, 2, 4*time.Minute)
	st = k.state(t, "YT-RC-LOST", func(s store.ReconcileState) bool { return s.GaveUpAt != nil })
	require.Equal(t, reconcile.OutcomeNothing, st.LastOutcome)
	_, err = k.St.SQL.Exec(`UPDATE reconcile_waybills SET next_at = ? WHERE waybill_no = 'YT-RC-LOST'`, time.Now().UTC().Add(-time.Second))
	require.NoError(t, err)
	time.Sleep(time.Second)
	require.Equal(t, 1, k.sim.Asked("YT-RC-LOST"), "given up: not asked again")
	require.Equal(t, 1, counterAt(t, k.metrics, "callgate_reconcile_gave_up_total", `process="worker",source="kuaidi100"`))
}

func ptr(s string) *string { return &s }

// TestReconcileKuaidi100AnswersThatChangeNothing: no checkpoint yet
// (returnCode 500), a snapshot callgate already has, a query Kuaidi100
// refuses (signed with the wrong key), and Kuaidi100 down store nothing
// and are recorded.
func TestReconcileKuaidi100AnswersThatChangeNothing(t *testing.T) {
	refused := startKuaidiReconcile(t, "not-the-key")
	refused.shipment(t, "YT-RC-REFUSED", "ORD-KD-RC-5", "kuaidi100", callback.CarrierInTransit, 2, 2*time.Minute)
	st := refused.state(t, "YT-RC-REFUSED", func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeRefused, st.LastOutcome)
	require.Contains(t, st.LastError, "503")
	require.Equal(t, 1, refused.sim.Refusals())

	k := startKuaidiReconcile(t, kuaidiKey)
	k.sim.Down(true)
	k.shipment(t, "YT-RC-NONE", "ORD-KD-RC-6", "kuaidi100", callback.CarrierPickedUp, 1, 2*time.Minute)
	k.sim.SetSnapshot("YT-RC-SAME", "yuantong", "0", kuaidiData(cpTransit, cpPickedUp))
	k.shipment(t, "YT-RC-SAME", "ORD-KD-RC-7", "kuaidi100", callback.CarrierInTransit, 2, 2*time.Minute)
	// The snapshot was pushed and stored already.
	require.Equal(t, kuaidiOK, string(k.Post(t, "kuaidi100", kuaidiSigned(kuaidiParam("YT-RC-SAME", "0", cpTransit, cpPickedUp)), formHeader()).Body))
	k.Settled(t, "kuaidi100", "YT-RC-SAME:2:0")
	_, err := k.St.SQL.Exec(`UPDATE shipments SET updated_at = ? WHERE waybill_no = 'YT-RC-SAME'`, time.Now().UTC().Add(-2*time.Minute))
	require.NoError(t, err)
	st = k.state(t, "YT-RC-NONE", func(s store.ReconcileState) bool { return s.Queries >= 1 })
	require.Equal(t, reconcile.OutcomeUnreachable, st.LastOutcome)
	_, err = k.St.SQL.Exec(`UPDATE reconcile_waybills SET next_at = ?`, time.Now().UTC().Add(-time.Second))
	require.NoError(t, err)

	k.sim.Down(false)
	st = k.state(t, "YT-RC-NONE", func(s store.ReconcileState) bool { return s.LastOutcome == reconcile.OutcomeNothing })
	require.Zero(t, st.FoundLogID, "no checkpoint yet stores nothing")
	st = k.state(t, "YT-RC-SAME", func(s store.ReconcileState) bool { return s.LastOutcome == reconcile.OutcomeNothing })
	require.Zero(t, st.FoundLogID)
	require.Equal(t, 1, k.Callbacks(t, "kuaidi100"), "only the push is stored")
	require.Zero(t, k.sim.Refusals())
}
