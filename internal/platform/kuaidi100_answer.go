package platform

import (
	"encoding/json"
	"strings"
)

// Kuaidi100's real-time query (实时快递查询, POST poll.kuaidi100.com/poll/query.do,
// api.kuaidi100.com/document/5f0ffb5ebc8da837cbd8aefc) answers a found
// waybill with the snapshot a push carries in lastResult ("message":"ok",
// "status":"200", nu, state, data newest first), and anything else with
// {"result":false,"returnCode":...,"message":...}.
type kuaidi100Answer struct {
	kuaidi100Result
	Message    string `json:"message"`
	Status     string `json:"status"`
	Com        string `json:"com"`
	Result     *bool  `json:"result"`
	ReturnCode string `json:"returnCode"`
}

// Kuaidi100NoResult is the returnCode of a waybill Kuaidi100 has no
// checkpoint of yet (查询无结果): nothing happened.
const Kuaidi100NoResult = "500"

// ok reports whether a is a snapshot.
func (a *kuaidi100Answer) ok() bool {
	return (a.Result == nil || *a.Result) && a.Status == "200" && strings.EqualFold(a.Message, "ok")
}

// Kuaidi100AnswerCode reads whether an answer is a snapshot (ok, and then
// com, the carrier it is about) and, when not, its returnCode and message.
func Kuaidi100AnswerCode(answer []byte) (ok bool, com, code, message string, err error) {
	var a kuaidi100Answer
	if err := json.Unmarshal(answer, &a); err != nil {
		return false, "", "", "", badRequest("the answer is not a Kuaidi100 JSON object")
	}
	return a.ok(), a.Com, a.ReturnCode, a.Message, nil
}

// ReadAnswer maps Kuaidi100's answer to callgate's query about waybill
// into the callback a push of the same snapshot gives, through the same
// result mapping: the same event id (nu:seq:state), so a push of that
// snapshot later is an exact duplicate, and the same carrier event. The
// answer must be about waybill. Kuaidi100 does not sign its answers: the
// query goes over HTTPS to the configured API, with the customer's key.
func (p *kuaidi100) ReadAnswer(waybill string, answer []byte) ([]Callback, error) {
	var a kuaidi100Answer
	if err := json.Unmarshal(answer, &a); err != nil {
		return nil, badRequest("the answer is not a Kuaidi100 snapshot")
	}
	if !a.ok() {
		return nil, badRequest("the answer is not a snapshot: status %q, message %q", truncate(a.Status), truncate(a.Message))
	}
	if got := strings.TrimSpace(a.Nu); got != waybill {
		return nil, badRequest("the answer is about waybill %q, not %q", truncate(got), truncate(waybill))
	}
	if len(a.Data) == 0 {
		return nil, nil // no checkpoint yet: nothing happened
	}
	return p.result(&a.kuaidi100Result)
}
