package platformsim

import (
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Kuaidi100 is Kuaidi100's real-time query (实时快递查询, POST
// /poll/query.do). A request is a form with customer, param (JSON: com,
// num, phone, ...) and sign = UPPER(hex(MD5(param + key + customer))); a
// wrong customer or sign is answered returnCode 503 (验证签名失败), a
// waybill with no checkpoint 500 (查询无结果), a found one with its
// snapshot (message ok, status 200, nu, com, state, data newest first).
// Kuaidi100 signs no answer.
type Kuaidi100 struct {
	URL string
	misbehaving

	customer, key string

	state
	waybills map[string]map[string]any
	params   []map[string]string
	anyCom   bool
}

// AnswerAnyCarrier makes a waybill's snapshot the answer whatever carrier
// is asked (true): a server on the path answering what it likes.
func (s *Kuaidi100) AnswerAnyCarrier(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.anyCom = on
}

// StartKuaidi100 serves the query until the test ends for the account
// customer whose key is key.
func StartKuaidi100(t testing.TB, customer, key string) *Kuaidi100 {
	t.Helper()
	s := &Kuaidi100{customer: customer, key: key, waybills: map[string]map[string]any{}}
	srv := httptest.NewServer(s.wrap(http.HandlerFunc(s.serve)))
	t.Cleanup(srv.Close)
	s.URL = srv.URL
	return s
}

// SetSnapshot makes waybill's answer the snapshot of carrier com in state
// with data (checkpoints, newest first).
func (s *Kuaidi100) SetSnapshot(waybill, com, state string, data []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	check := "0"
	if state == "3" {
		check = "1"
	}
	s.waybills[waybill] = map[string]any{"message": "ok", "nu": waybill, "ischeck": check, "condition": "00", "com": com,
		"status": "200", "state": state, "data": data}
}

// Params are the signed queries' param objects.
func (s *Kuaidi100) Params() []map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]string(nil), s.params...)
}

func (s *Kuaidi100) serve(w http.ResponseWriter, r *http.Request) {
	if s.hungUp(w) {
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/poll/query.do" || r.ParseForm() != nil {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	param := r.PostForm.Get("param")
	sum := md5.Sum([]byte(param + s.key + s.customer))
	if r.PostForm.Get("customer") != s.customer || r.PostForm.Get("sign") != strings.ToUpper(hex.EncodeToString(sum[:])) {
		s.refused()
		writeJSON(w, map[string]any{"result": false, "returnCode": "503", "message": "验证签名失败"})
		return
	}
	var p map[string]string
	if err := json.Unmarshal([]byte(param), &p); err != nil || p["com"] == "" || p["num"] == "" {
		writeJSON(w, map[string]any{"result": false, "returnCode": "400", "message": "找不到对应公司"})
		return
	}
	s.mu.Lock()
	s.count(p["num"])
	s.params = append(s.params, p)
	snap, ok := s.waybills[p["num"]]
	anyCom := s.anyCom
	s.mu.Unlock()
	if !ok || (snap["com"] != p["com"] && !anyCom) {
		writeJSON(w, map[string]any{"result": false, "returnCode": "500", "message": "查询无结果，请隔段时间再查"})
		return
	}
	writeJSON(w, snap)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	_, _ = w.Write(b)
}
