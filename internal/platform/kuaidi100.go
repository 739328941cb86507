package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"callgate/internal/callback"
	"callgate/internal/signature"
)

// Kuaidi100 (preset kuaidi100, 快递100 订阅推送): a form POST with param,
// the push as JSON, and sign = UPPER(hex(MD5(param + salt))), salt being
// the one given when subscribing. lastResult is a full snapshot of the
// waybill, newest checkpoint first, so one push is one carrier event:
//
//   - waybill: lastResult.nu (the business key);
//   - seq: the number of checkpoints, len(lastResult.data), so a newer
//     snapshot is a higher seq;
//   - status: lastResult.state, 1 PICKED_UP, 0 and 8 IN_TRANSIT, 5
//     OUT_FOR_DELIVERY, 3 DELIVERED, 2, 4, 14 and any other EXCEPTION;
//   - location: the newest checkpoint's areaName (the place, present when
//     the subscription asked for area parsing), else its context
//     (Kuaidi100's description of the checkpoint, which names the place in
//     its own words), at most 255 bytes;
//   - occurred at: the newest checkpoint's ftime, else time
//     ("2006-01-02 15:04:05", China time UTC+8); when neither reads as
//     such, the time callgate received the push;
//   - event id: nu:seq:state, so a re-push of the same snapshot is a
//     duplicate;
//   - order code: none (Kuaidi100 does not know it); the logistics handler
//     takes it from the shipment already known for the waybill.
//
// A push with an empty data list (Kuaidi100 polled and found nothing yet,
// or gave up: status abort) is recorded as seq 0 with the state's status,
// no location, at the time received: any later checkpoint outranks it.
// Two pushes with the same number of checkpoints and different states are
// two callbacks, but the handler keeps the first event of a seq.
//
// Keys: secrets, the salts (old and new during a change of subscription).
// Answer: {"result":true,"returnCode":"200","message":"成功"}; refused:
// {"result":false,"returnCode":"400" (any 4xx) or "500" (5xx),
// "message":...} with the intake's HTTP status.
type kuaidi100 struct {
	verifier *signature.MD5Salt
}

// Kuaidi100MaxWaybillLen is the longest lastResult.nu accepted: the
// shipments and shipment_events columns hold 64 characters.
const Kuaidi100MaxWaybillLen = 64

// kuaidi100Location bounds the stored location (shipment_events.location
// is VARCHAR(255)).
const kuaidi100Location = 255

var kuaidi100Accepted = []byte(`{"result":true,"returnCode":"200","message":"成功"}`)

func newKuaidi100(cfg Config) (Platform, error) {
	var salts []string
	var errs []error
	for i, s := range cfg.Secrets {
		switch {
		case s == "":
			continue // an unset variable: one set salt of a pair is enough
		case strings.TrimSpace(s) != s:
			errs = append(errs, fieldErr(fmt.Sprintf("secrets[%d]", i), errors.New("salt has leading or trailing whitespace")))
			continue
		}
		salts = append(salts, s)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	v, err := signature.NewMD5Salt("sign", salts)
	if err != nil {
		return nil, fieldErr("secrets", err)
	}
	return &kuaidi100{verifier: v}, nil
}

// kuaidi100Push is what callgate reads of param.
type kuaidi100Push struct {
	LastResult *kuaidi100Result `json:"lastResult"`
}

// kuaidi100Result is a waybill's snapshot: a push's lastResult, and the
// real-time query's whole answer.
type kuaidi100Result struct {
	State json.RawMessage   `json:"state"`
	Nu    string            `json:"nu"`
	Data  []json.RawMessage `json:"data"`
}

// kuaidi100Checkpoint is one entry of lastResult.data.
type kuaidi100Checkpoint struct {
	Context  string `json:"context"`
	Time     string `json:"time"`
	FTime    string `json:"ftime"`
	AreaName string `json:"areaName"`
}

func (p *kuaidi100) Kind() string      { return callback.KindLogistics }
func (p *kuaidi100) Headers() []string { return nil }

func (p *kuaidi100) Read(req Request) ([]Callback, error) {
	form, param, err := kuaidi100Param(req.Body)
	if err != nil {
		return nil, err
	}
	if err := p.verifier.Verify(param, form["sign"]); err != nil {
		return nil, err
	}
	return p.interpret(param)
}

func (p *kuaidi100) Reread(req Request) ([]Callback, error) {
	_, param, err := kuaidi100Param(req.Body)
	if err != nil {
		return nil, err
	}
	return p.interpret(param)
}

// kuaidi100Param reads the push's form and its param.
func kuaidi100Param(body []byte) (Form, string, error) {
	form, err := ParseForm(body)
	if err != nil {
		return nil, "", err
	}
	param, err := form.Need("param")
	return form, param, err
}

// interpret maps a verified push's param to its carrier event.
func (p *kuaidi100) interpret(param string) ([]Callback, error) {
	raw := []byte(param)
	if err := callback.CheckJSONShape(raw); err != nil {
		return nil, badRequest("param: %v", err)
	}
	var push kuaidi100Push
	if err := json.Unmarshal(raw, &push); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, badRequest("param: %s has the wrong JSON type", te.Field)
		}
		return nil, badRequest("param is not a Kuaidi100 push (a JSON object)")
	}
	r := push.LastResult
	if r == nil {
		return nil, badRequest("param: lastResult is missing")
	}
	return p.result(r)
}

// result maps a waybill's snapshot to its carrier event.
func (p *kuaidi100) result(r *kuaidi100Result) ([]Callback, error) {
	nu := strings.TrimSpace(r.Nu)
	switch {
	case nu == "":
		return nil, badRequest("param: lastResult.nu is missing")
	case len(nu) > Kuaidi100MaxWaybillLen:
		return nil, badRequest("param: lastResult.nu is longer than %d characters", Kuaidi100MaxWaybillLen)
	}
	state, err := kuaidi100State(r.State)
	if err != nil {
		return nil, err
	}
	ev := callback.CarrierEvent{WaybillNo: nu, Seq: int64(len(r.Data)), Status: Kuaidi100Status(state)}
	if len(r.Data) > 0 {
		var cp kuaidi100Checkpoint
		if err := json.Unmarshal(r.Data[0], &cp); err != nil {
			return nil, badRequest("param: lastResult.data[0] is not a checkpoint object")
		}
		ev.Location = cp.location()
		ev.OccurredAt = cp.occurredAt()
	}
	id := nu + ":" + strconv.FormatInt(ev.Seq, 10) + ":" + strconv.Itoa(state)
	return []Callback{{EventID: id, BusinessKey: nu, Event: ev}}, nil
}

// kuaidi100State reads lastResult.state, a number sent as a string ("3")
// or as a number (3).
func kuaidi100State(raw json.RawMessage) (int, error) {
	s := strings.TrimSpace(string(raw))
	if s == "" || s == "null" {
		return 0, badRequest("param: lastResult.state is missing")
	}
	if len(s) >= 2 && s[0] == '"' && s[len(s)-1] == '"' {
		if err := json.Unmarshal(raw, &s); err != nil {
			return 0, badRequest("param: lastResult.state is not a number")
		}
		s = strings.TrimSpace(s)
	}
	if len(s) == 0 || len(s) > 6 || strings.Trim(s, "0123456789") != "" {
		return 0, badRequest("param: lastResult.state is not a number")
	}
	n, _ := strconv.Atoi(s)
	return n, nil
}

// Kuaidi100Status maps a lastResult.state to a carrier status.
func Kuaidi100Status(state int) string {
	switch state {
	case 1: // 揽收
		return callback.CarrierPickedUp
	case 0, 8: // 在途, 清关
		return callback.CarrierInTransit
	case 5: // 派件
		return callback.CarrierOutForDelivery
	case 3: // 签收
		return callback.CarrierDelivered
	default: // 2 疑难, 4 退签, 14 拒签, and states this mapping does not know
		return callback.CarrierException
	}
}

// location is where the checkpoint happened: see [kuaidi100].
func (c kuaidi100Checkpoint) location() string {
	loc := strings.TrimSpace(c.AreaName)
	if loc == "" {
		loc = strings.TrimSpace(c.Context)
	}
	return callback.Truncate(loc, kuaidi100Location)
}

// occurredAt is the checkpoint's time in UTC, or zero when it has none
// that reads (the handler then uses the time received).
func (c kuaidi100Checkpoint) occurredAt() time.Time {
	for _, s := range []string{c.FTime, c.Time} {
		t, err := time.ParseInLocation(chinaTimeLayout, strings.TrimSpace(s), chinaTime)
		if err == nil && t.Year() >= 1970 {
			return t.UTC()
		}
	}
	return time.Time{}
}

func (p *kuaidi100) Accepted([]Stored) Answer { return jsonAnswer(http.StatusOK, kuaidi100Accepted) }

// Refused keeps the intake's HTTP status and says it in Kuaidi100's form.
func (p *kuaidi100) Refused(status int, reason string) Answer {
	code := "400"
	if status >= 500 {
		code = "500"
	}
	b, _ := json.Marshal(struct {
		Result     bool   `json:"result"`
		ReturnCode string `json:"returnCode"`
		Message    string `json:"message"`
	}{false, code, reason})
	return jsonAnswer(status, b)
}
