package platform_test

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/callback"
	"callgate/internal/config"
	"callgate/internal/kinds"
	"callgate/internal/platform"
	"callgate/internal/signature"
	"callgate/internal/testenv"
)

const (
	kuaidiSalt    = "callgate-kuaidi100-salt"
	kuaidiWaybill = "YT7465203485112"
	// kuaidiOK is Kuaidi100's success answer, byte for byte.
	kuaidiOK = `{"result":true,"returnCode":"200","message":"成功"}`
)

// checkpoint is one entry of lastResult.data.
type checkpoint struct{ Context, Time, AreaName, Status string }

// A yuantong parcel from Hangzhou to Shanghai, newest checkpoint first.
var (
	cpDelivered = checkpoint{"【上海市】您的快件已签收，签收人：本人，如有疑问请联系派件员", "2024-05-03 10:12:45", "上海市,上海市", "签收"}
	cpTransit   = checkpoint{"【上海市】快件已到达 上海转运中心，下一站 上海市浦东新区公司", "2024-05-02 08:15:20", "上海市", "在途"}
	cpPickedUp  = checkpoint{"【杭州市】浙江省杭州市余杭区公司 已揽收", "2024-05-01 18:02:11", "浙江省,杭州市", "揽收"}
)

// kuaidiParam is a status-polling push of a snapshot, as Kuaidi100 sends
// it (state is the raw JSON of lastResult.state).
func kuaidiParam(nu string, state any, cps ...checkpoint) string {
	data := make([]map[string]any, len(cps))
	for i, c := range cps {
		data[i] = map[string]any{"context": c.Context, "time": c.Time, "ftime": c.Time, "status": c.Status, "areaCode": "310000000000"}
		if c.AreaName != "" {
			data[i]["areaName"] = c.AreaName
		}
	}
	check := "0"
	if state == "3" {
		check = "1"
	}
	b, err := json.Marshal(map[string]any{
		"status": "polling", "billstatus": "got", "message": "", "autoCheck": "0", "comOld": "", "comNew": "",
		"lastResult": map[string]any{"message": "ok", "nu": nu, "ischeck": check, "condition": "00", "com": "yuantong",
			"status": "200", "state": state, "data": data},
	})
	if err != nil {
		panic(err)
	}
	return string(b)
}

// kuaidiSign is the test's own oracle: UPPER(hex(MD5(param + salt))).
func kuaidiSign(param, salt string) string {
	sum := md5.Sum([]byte(param + salt))
	return strings.ToUpper(hex.EncodeToString(sum[:]))
}

// kuaidiForm is the form body Kuaidi100 posts.
func kuaidiForm(param, sign string) []byte {
	return []byte("param=" + url.QueryEscape(param) + "&sign=" + sign)
}

func kuaidiSigned(param string) []byte { return kuaidiForm(param, kuaidiSign(param, kuaidiSalt)) }

func formHeader() http.Header {
	h := http.Header{}
	h.Set("Content-Type", "application/x-www-form-urlencoded")
	return h
}

func newKuaidi100(t testing.TB, salts ...string) platform.Platform {
	t.Helper()
	p, err := platform.New("kuaidi100", platform.Config{Secrets: salts})
	require.NoError(t, err)
	return p
}

// kuaidiAnswer is Kuaidi100's answer shape.
type kuaidiAnswer struct {
	Result     bool   `json:"result"`
	ReturnCode string `json:"returnCode"`
	Message    string `json:"message"`
}

func TestKuaidi100Vector(t *testing.T) {
	t.Parallel()
	require.Equal(t, "B218F90555A22945EC35A666B2C7B040", signature.SignMD5Salt(`{"a":1}`, "salt"), "the block")
	require.Equal(t, "B218F90555A22945EC35A666B2C7B040", kuaidiSign(`{"a":1}`, "salt"), "the test's oracle")
	_, err := newKuaidi100(t, "salt").Read(platform.Request{Body: kuaidiForm(`{"a":1}`, "B218F90555A22945EC35A666B2C7B040")})
	require.ErrorContains(t, err, "lastResult is missing", "the vector verifies through the preset; its param is no push")
}

// shipmentEvent is a shipment_events row.
type shipmentEvent struct {
	Seq        int64
	Status     string
	Location   string
	OccurredAt time.Time
}

func shipmentEvents(t *testing.T, p *testenv.Platform, waybill string) []shipmentEvent {
	t.Helper()
	var out []shipmentEvent
	require.NoError(t, p.St.DB.Raw(`SELECT seq, status, location, occurred_at FROM shipment_events WHERE waybill_no = ? ORDER BY seq`,
		waybill).Scan(&out).Error)
	return out
}

// shipment is a shipments row.
type shipment struct {
	OrderCode *string
	Status    string
	LastSeq   int64
}

func shipmentOf(t *testing.T, p *testenv.Platform, waybill string) shipment {
	t.Helper()
	var s shipment
	require.NoError(t, p.St.DB.Raw(`SELECT order_code, status, last_seq FROM shipments WHERE waybill_no = ?`, waybill).Scan(&s).Error)
	return s
}

// downstream reads n messages and returns their payloads by routing key.
func downstream(t *testing.T, q *testenv.Queue, n int) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	for range n {
		d, ok := q.Get(20 * time.Second)
		require.True(t, ok, "a downstream message")
		var m map[string]any
		require.NoError(t, json.Unmarshal(d.Body, &m))
		out[d.RoutingKey] = m
	}
	return out
}

func TestKuaidi100RecordsTheShipment(t *testing.T) {
	p := testenv.StartPlatform(t, "kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}})
	down := testenv.Downstream(t, p.Cfg)
	// The merchant's system recorded the shipment when it handed the
	// parcel over; Kuaidi100 does not know the order.
	_, err := p.St.SQL.Exec(`INSERT INTO shipments (waybill_no, order_code, status, last_seq, updated_at) VALUES (?, ?, ?, 0, ?)`,
		kuaidiWaybill, "ORD-KD-1", callback.CarrierPickedUp, time.Now().UTC())
	require.NoError(t, err)

	body := kuaidiSigned(kuaidiParam(kuaidiWaybill, "0", cpTransit, cpPickedUp))
	a := p.Post(t, "kuaidi100", body, formHeader())
	require.Equal(t, http.StatusOK, a.Status, string(a.Body))
	require.Equal(t, kuaidiOK, string(a.Body), "Kuaidi100's success answer, exactly")
	require.Equal(t, "application/json", a.Header.Get("Content-Type"))

	row := p.Settled(t, "kuaidi100", kuaidiWaybill+":2:0")
	require.Equal(t, kuaidiWaybill, row.BusinessKey)
	require.Equal(t, body, row.Payload, "the raw form body is stored byte for byte")
	var ev callback.CarrierEvent
	require.NoError(t, json.Unmarshal(row.Normalized, &ev))
	transitAt := time.Date(2024, 5, 2, 0, 15, 20, 0, time.UTC) // 08:15:20 in China
	require.Equal(t, callback.CarrierEvent{WaybillNo: kuaidiWaybill, Seq: 2, Status: callback.CarrierInTransit,
		Location: "上海市", OccurredAt: transitAt}, ev)
	require.Equal(t, []shipmentEvent{{2, callback.CarrierInTransit, "上海市", transitAt}}, shipmentEvents(t, p, kuaidiWaybill))
	order := "ORD-KD-1"
	require.Equal(t, shipment{&order, callback.CarrierInTransit, 2}, shipmentOf(t, p, kuaidiWaybill))
	msgs := downstream(t, down, 1)
	require.Equal(t, map[string]any{"waybillNo": kuaidiWaybill, "seq": 2.0, "status": callback.CarrierInTransit, "orderCode": order},
		msgs["shipment.updated"], "the order code comes from the shipment already known")

	again := p.Post(t, "kuaidi100", body, formHeader())
	require.Equal(t, kuaidiOK, string(again.Body), "a re-push is acknowledged")
	require.Equal(t, 1, p.Callbacks(t, "kuaidi100"), "a re-push of the same snapshot is a duplicate")

	newer := kuaidiSigned(kuaidiParam(kuaidiWaybill, "3", cpDelivered, cpTransit, cpPickedUp))
	require.Equal(t, kuaidiOK, string(p.Post(t, "kuaidi100", newer, formHeader()).Body))
	p.Settled(t, "kuaidi100", kuaidiWaybill+":3:3")
	deliveredAt := time.Date(2024, 5, 3, 2, 12, 45, 0, time.UTC)
	require.Equal(t, []shipmentEvent{{2, callback.CarrierInTransit, "上海市", transitAt}, {3, callback.CarrierDelivered, "上海市,上海市", deliveredAt}},
		shipmentEvents(t, p, kuaidiWaybill))
	require.Equal(t, shipment{&order, callback.CarrierDelivered, 3}, shipmentOf(t, p, kuaidiWaybill))
	msgs = downstream(t, down, 2)
	require.Equal(t, callback.CarrierDelivered, msgs["shipment.updated"]["status"])
	require.Equal(t, map[string]any{"orderCode": order, "waybillNo": kuaidiWaybill}, msgs["order.delivered"])
	require.Equal(t, 2, p.Callbacks(t, "kuaidi100"))
}

func TestKuaidi100WithoutKnownOrder(t *testing.T) {
	p := testenv.StartPlatform(t, "kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}})
	down := testenv.Downstream(t, p.Cfg)
	const waybill = "YT0000000000001"

	// Nothing tracked yet: seq 0, no location, the time received.
	empty := kuaidiSigned(kuaidiParam(waybill, "0"))
	require.Equal(t, kuaidiOK, string(p.Post(t, "kuaidi100", empty, formHeader()).Body))
	row := p.Settled(t, "kuaidi100", waybill+":0:0")
	got := shipmentEvents(t, p, waybill)
	require.Len(t, got, 1)
	require.Equal(t, shipmentEvent{0, callback.CarrierInTransit, "", row.ReceivedAt.UTC()}, got[0])

	delivered := kuaidiSigned(kuaidiParam(waybill, "3", cpDelivered, cpTransit, cpPickedUp))
	require.Equal(t, kuaidiOK, string(p.Post(t, "kuaidi100", delivered, formHeader()).Body))
	p.Settled(t, "kuaidi100", waybill+":3:3")
	require.Equal(t, shipment{nil, callback.CarrierDelivered, 3}, shipmentOf(t, p, waybill), "recorded without an order")

	msgs := down.Drain(2 * time.Second)
	require.Len(t, msgs, 2, "two shipment.updated, no order.delivered without an order")
	for _, m := range msgs {
		require.Equal(t, "shipment.updated", m.RoutingKey)
		require.NotContains(t, string(m.Body), "orderCode")
	}
}

func TestKuaidi100Refusals(t *testing.T) {
	p := testenv.StartPlatform(t, "kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}})
	param := kuaidiParam(kuaidiWaybill, "0", cpTransit, cpPickedUp)
	sign := kuaidiSign(param, kuaidiSalt)
	cases := map[string][]byte{
		"wrong sign":     kuaidiForm(param, kuaidiSign(param+"x", kuaidiSalt)),
		"tampered param": kuaidiForm(strings.Replace(param, `"state":"0"`, `"state":"3"`, 1), sign),
		"wrong salt":     kuaidiForm(param, kuaidiSign(param, "another-salt")),
		"no sign":        []byte("param=" + url.QueryEscape(param)),
	}
	for name, body := range cases {
		a := p.Post(t, "kuaidi100", body, formHeader())
		require.Equal(t, http.StatusUnauthorized, a.Status, "%s: %s", name, a.Body)
		var ans kuaidiAnswer
		require.NoError(t, json.Unmarshal(a.Body, &ans), name)
		require.False(t, ans.Result, name)
		require.Equal(t, "400", ans.ReturnCode, name)
		require.Contains(t, ans.Message, "invalid signature", name)
		require.NotContains(t, ans.Message, kuaidiSalt, name)
	}
	require.Zero(t, p.Callbacks(t, "kuaidi100"), "nothing refused is stored")
	require.Empty(t, shipmentEvents(t, p, kuaidiWaybill))
}

func TestKuaidi100Answers(t *testing.T) {
	t.Parallel()
	p := newKuaidi100(t, kuaidiSalt)
	ok := p.Accepted([]platform.Stored{{LogID: 1}})
	require.Equal(t, http.StatusOK, ok.Status)
	require.Equal(t, kuaidiOK, string(ok.Body))
	for status, code := range map[int]string{400: "400", 401: "400", 413: "400", 429: "400", 503: "500"} {
		a := p.Refused(status, "why")
		require.Equal(t, status, a.Status, "the intake's HTTP status is kept")
		var ans kuaidiAnswer
		require.NoError(t, json.Unmarshal(a.Body, &ans))
		require.Equal(t, kuaidiAnswer{false, code, "why"}, ans)
	}
}

// TestKuaidi100StatusMapping: every lastResult.state Kuaidi100 documents,
// sent as a string (as Kuaidi100 does) or as a number.
func TestKuaidi100StatusMapping(t *testing.T) {
	t.Parallel()
	p := newKuaidi100(t, kuaidiSalt)
	for state, want := range map[string]string{
		"0": callback.CarrierInTransit, "1": callback.CarrierPickedUp, "2": callback.CarrierException,
		"3": callback.CarrierDelivered, "4": callback.CarrierException, "5": callback.CarrierOutForDelivery,
		"8": callback.CarrierInTransit, "14": callback.CarrierException, "6": callback.CarrierException, "99": callback.CarrierException,
	} {
		var asNumber json.RawMessage = []byte(state)
		for _, raw := range []any{state, asNumber} {
			cbs, err := p.Read(platform.Request{Body: kuaidiSigned(kuaidiParam(kuaidiWaybill, raw, cpTransit))})
			require.NoError(t, err, state)
			ev := cbs[0].Event.(callback.CarrierEvent)
			require.Equal(t, want, ev.Status, "state %s", state)
			require.Equal(t, kuaidiWaybill+":1:"+state, cbs[0].EventID)
		}
	}
}

// TestKuaidi100ReadsTheSnapshot: location, time, rotation, without the
// gateway.
func TestKuaidi100ReadsTheSnapshot(t *testing.T) {
	t.Parallel()
	p := newKuaidi100(t, "", "old-salt", kuaidiSalt) // an unset variable, then old and new
	read := func(param, salt string) callback.CarrierEvent {
		t.Helper()
		cbs, err := p.Read(platform.Request{Body: kuaidiForm(param, kuaidiSign(param, salt))})
		require.NoError(t, err)
		require.Len(t, cbs, 1)
		require.Equal(t, kuaidiWaybill, cbs[0].BusinessKey)
		return cbs[0].Event.(callback.CarrierEvent)
	}
	noArea := cpTransit
	noArea.AreaName = ""
	ev := read(kuaidiParam(kuaidiWaybill, "0", noArea, cpPickedUp), "old-salt")
	require.Equal(t, cpTransit.Context, ev.Location, "without areaName, the checkpoint's context")
	require.Empty(t, ev.OrderCode, "Kuaidi100 does not know the order")

	onlyTime := strings.Replace(kuaidiParam(kuaidiWaybill, "0", cpTransit), `"ftime":"2024-05-02 08:15:20"`, `"ftime":""`, 1)
	require.Equal(t, time.Date(2024, 5, 2, 0, 15, 20, 0, time.UTC), read(onlyTime, kuaidiSalt).OccurredAt, "time when ftime is empty")
	noTime := strings.ReplaceAll(kuaidiParam(kuaidiWaybill, "0", cpTransit), "2024-05-02 08:15:20", "yesterday")
	require.True(t, read(noTime, kuaidiSalt).OccurredAt.IsZero(), "no time that reads: the handler uses the time received")

	long := cpTransit
	long.AreaName = strings.Repeat("上", 200)
	require.LessOrEqual(t, len(read(kuaidiParam(kuaidiWaybill, "0", long), kuaidiSalt).Location), 255, "fits shipment_events.location")

	ev = read(kuaidiParam(kuaidiWaybill, "1"), kuaidiSalt)
	require.Equal(t, callback.CarrierEvent{WaybillNo: kuaidiWaybill, Seq: 0, Status: callback.CarrierPickedUp}, ev, "an empty snapshot")
}

// TestKuaidi100Configuration: the shipped source reads KUAIDI100_SALT (or
// KUAIDI100_SALT_FILE); a salt with surrounding whitespace is refused.
func TestKuaidi100Configuration(t *testing.T) {
	shipped := filepath.Join(testenv.RepoRoot(), "configs", "callgate.yaml")
	t.Setenv("KUAIDI100_SALT", "")
	file := filepath.Join(t.TempDir(), "salt")
	require.NoError(t, os.WriteFile(file, []byte(kuaidiSalt+"\n"), 0o600))
	t.Setenv("KUAIDI100_SALT_FILE", file)
	cfg, err := config.Load(shipped, kinds.Names())
	require.NoError(t, err)
	n := -1
	for i, s := range cfg.Sources {
		if s.Name == "kuaidi100" {
			n = i
		}
	}
	require.NotEqual(t, -1, n)
	require.Equal(t, "logistics", cfg.Sources[n].Kind)
	require.Equal(t, []string{kuaidiSalt}, cfg.Sources[n].Platform.Secrets)

	t.Setenv("KUAIDI100_SALT", " "+kuaidiSalt)
	_, err = config.Load(shipped, kinds.Names())
	require.ErrorContains(t, err, "(kuaidi100).platform.secrets[0]: salt has leading or trailing whitespace")
	require.NotContains(t, err.Error(), kuaidiSalt)
}

func BenchmarkKuaidi100Read(b *testing.B) {
	p := newKuaidi100(b, kuaidiSalt)
	req := platform.Request{Body: kuaidiSigned(kuaidiParam(kuaidiWaybill, "3", cpDelivered, cpTransit, cpPickedUp)),
		Header: formHeader(), Now: time.Now()}
	benchRead(b, p, req)
}

// FuzzKuaidi100Read: Read never panics on any body, nor on any param
// signed with the right salt, and what it accepts is one carrier event
// the handler can apply.
func FuzzKuaidi100Read(f *testing.F) {
	f.Add([]byte("param=%zz&sign=&param="), kuaidiParam(kuaidiWaybill, "0", cpTransit, cpPickedUp))
	f.Add(kuaidiSigned(kuaidiParam(kuaidiWaybill, "3")), kuaidiParam(kuaidiWaybill, "3"))
	f.Add([]byte("\xff=\xfe"), `{"lastResult":{"nu":"1","state":5,"data":[null]}}`)
	f.Add(kuaidiSigned(`{}`), `{"lastResult":{"nu":" ","state":"x","data":{}}}`)
	f.Add([]byte("sign=1"), `{"lastResult":{"nu":"1","state":"-1","data":[{"ftime":"0000-00-00 00:00:00","time":7}]}}`)
	p := newKuaidi100(f, kuaidiSalt)
	valid := map[string]bool{callback.CarrierPickedUp: true, callback.CarrierInTransit: true, callback.CarrierOutForDelivery: true,
		callback.CarrierDelivered: true, callback.CarrierException: true}
	f.Fuzz(func(t *testing.T, body []byte, param string) {
		for _, b := range [][]byte{body, kuaidiSigned(param)} {
			cbs, err := p.Read(platform.Request{Body: b, Header: formHeader(), Now: time.Now()})
			if err != nil {
				continue
			}
			require.Len(t, cbs, 1)
			ev := cbs[0].Event.(callback.CarrierEvent)
			require.NotEmpty(t, ev.WaybillNo)
			require.LessOrEqual(t, len(ev.WaybillNo), platform.Kuaidi100MaxWaybillLen)
			require.True(t, valid[ev.Status], ev.Status)
			require.GreaterOrEqual(t, ev.Seq, int64(0))
			require.LessOrEqual(t, len(ev.Location), 255)
			require.Equal(t, ev.WaybillNo, cbs[0].BusinessKey)
		}
	})
}

// TestKuaidi100Hostile: broken and hostile pushes are refused with
// Kuaidi100's failure answer, nothing is stored, and the gateway still
// takes a valid push.
func TestKuaidi100Hostile(t *testing.T) {
	p := testenv.StartPlatform(t, "kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}})
	param := kuaidiParam(kuaidiWaybill, "0", cpTransit, cpPickedUp)
	good := kuaidiSigned(param)
	sign := kuaidiSign(param, kuaidiSalt)
	swap := func(old, new string) []byte {
		require.Contains(t, param, old)
		return kuaidiSigned(strings.Replace(param, old, new, 1))
	}
	cases := []struct {
		name   string
		body   []byte
		status int
		reason string
	}{
		{"empty body", nil, 400, "no parameters"},
		{"JSON instead of a form", []byte(param), 400, "the body is JSON, not a form"},
		{"no param", []byte("sign=" + sign), 400, "parameter param is missing"},
		{"duplicate param", []byte(string(good) + "&param=" + url.QueryEscape(param)), 400, `"param" appears twice`},
		{"duplicate sign", []byte(string(good) + "&sign=" + sign), 400, `"sign" appears twice`},
		{"invalid % escape", []byte("param=%7B%zz&sign=" + sign), 400, "not form-encoded"},
		{"non-UTF-8 escaped", kuaidiSigned(strings.Replace(param, "上海市", "\xff\xfe", 1)), 400, "not UTF-8"},
		{"non-UTF-8 raw", []byte("param=\xff&sign=" + sign), 400, "not UTF-8"},
		{"param not JSON", kuaidiSigned("status=polling"), 400, "not a Kuaidi100 push"},
		{"param truncated", kuaidiSigned(param[:len(param)/2]), 400, "not a Kuaidi100 push"},
		{"param a JSON array", kuaidiSigned(`[` + param + `]`), 400, "not a Kuaidi100 push"},
		{"lastResult missing", kuaidiSigned(`{"status":"polling","message":""}`), 400, "lastResult is missing"},
		{"lastResult not an object", kuaidiSigned(`{"lastResult":"ok"}`), 400, "lastResult has the wrong JSON type"},
		{"nu missing", swap(`"nu":"`+kuaidiWaybill+`"`, `"nu":""`), 400, "lastResult.nu is missing"},
		{"state missing", swap(`"state":"0"`, `"state":null`), 400, "lastResult.state is missing"},
		{"state not a number", swap(`"state":"0"`, `"state":"在途"`), 400, "lastResult.state is not a number"},
		{"state a boolean", swap(`"state":"0"`, `"state":true`), 400, "lastResult.state is not a number"},
		{"data not an array", kuaidiSigned(`{"lastResult":{"nu":"YT1","state":"0","data":{}}}`), 400, "data has the wrong JSON type"},
		{"data[0] not an object", kuaidiSigned(`{"lastResult":{"nu":"YT1","state":"0","data":[1]}}`), 400, "data[0] is not a checkpoint"},
		{"huge waybill", swap(`"nu":"`+kuaidiWaybill+`"`, `"nu":"`+strings.Repeat("9", 100)+`"`), 400, "longer than 64"},
		{"huge state", swap(`"state":"0"`, `"state":"12345678"`), 400, "lastResult.state is not a number"},
		{"huge number", swap(`"state":"0"`, `"state":1`+strings.Repeat("0", 60)), 400, "JSON number longer"},
		{"deep nesting", swap(`"message":""`, `"message":`+strings.Repeat("[", 100)+strings.Repeat("]", 100)), 400, "nesting"},
		{"over the size limit", []byte(string(good) + "&pad=" + strings.Repeat("x", 2<<20)), 413, "size limit"},
	}
	for _, c := range cases {
		a := p.Post(t, "kuaidi100", c.body, formHeader())
		require.Equal(t, c.status, a.Status, "%s: %s", c.name, a.Body)
		var ans kuaidiAnswer
		require.NoError(t, json.Unmarshal(a.Body, &ans), "%s: Kuaidi100's failure answer", c.name)
		require.False(t, ans.Result, c.name)
		require.Equal(t, "400", ans.ReturnCode, c.name)
		require.Contains(t, ans.Message, c.reason, c.name)
	}
	require.Zero(t, p.Callbacks(t, "kuaidi100"), "nothing refused is stored")

	require.Equal(t, kuaidiOK, string(p.Post(t, "kuaidi100", good, formHeader()).Body))
	p.Settled(t, "kuaidi100", kuaidiWaybill+":2:0")
	require.Len(t, shipmentEvents(t, p, kuaidiWaybill), 1)
}
