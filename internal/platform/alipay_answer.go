package platform

import (
	"encoding/json"
	"strings"
)

// Alipay's alipay.trade.query answer (opendocs.alipay.com/open/02e7gm,
// 统一收单交易查询): {"alipay_trade_query_response":{...},"sign":"..."},
// signed RSA2 by Alipay's key over the response object's exact text.
const (
	alipayQueryRoot    = "alipay_trade_query_response"
	alipayCodeSuccess  = "10000"
	alipayCodeBusiness = "40004"
	// AlipayTradeNotExist is the sub_code of a trade Alipay does not know
	// (nothing was paid yet).
	AlipayTradeNotExist = "ACQ.TRADE_NOT_EXIST"
)

// AlipaySignedAnswer splits an alipay.trade.query answer into what Alipay
// signed (the response object's exact bytes, as its SDKs take them) and
// the signature. The querier verifies that, and ReadAnswer reads the same
// bytes: one split, so what is read is what was verified.
func AlipaySignedAnswer(body []byte) (content []byte, sign string, err error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, "", badRequest("the answer is not a JSON object")
	}
	content = top[alipayQueryRoot]
	if len(content) == 0 || content[0] != '{' {
		return nil, "", badRequest("the answer has no %s object", alipayQueryRoot)
	}
	if raw := top["sign"]; len(raw) > 0 {
		if err := json.Unmarshal(raw, &sign); err != nil {
			return nil, "", badRequest("the answer's sign is not a string")
		}
	}
	return content, sign, nil
}

// AlipayAnswerCode returns an answer's code and sub_code (code 10000: the
// trade was found; 40004 with sub_code ACQ.TRADE_NOT_EXIST: Alipay knows
// no such trade).
func AlipayAnswerCode(content []byte) (code, subCode string, err error) {
	f, err := alipayAnswerForm(content)
	if err != nil {
		return "", "", err
	}
	return f["code"], f["sub_code"], nil
}

// alipayAnswerForm reads a response object's string fields (one parse for
// the code and for the trade: what is read is one reading of what was
// verified).
func alipayAnswerForm(content []byte) (Form, error) {
	var r map[string]any
	if err := json.Unmarshal(content, &r); err != nil {
		return nil, badRequest("%s: %v", alipayQueryRoot, err)
	}
	f := Form{}
	for k, v := range r {
		if s, ok := v.(string); ok {
			f[k] = s
		}
	}
	return f, nil
}

// Alipay may sign a response whose slashes it then sends escaped ("\/",
// the same JSON string): as its own SDKs do (alipay-sdk-java's
// checkResponseSign), a sign that fails over the text as sent is checked
// again over it with "\/" as "/". The two texts read the same.
func (p *alipay) VerifyAnswer(_, message, sig string) error {
	if sig == "" {
		return errAlipayNoSign
	}
	err := p.keys.VerifyAny([]byte(message), sig)
	if err != nil && strings.Contains(message, `\/`) {
		if p.keys.VerifyAny([]byte(strings.ReplaceAll(message, `\/`, "/")), sig) == nil {
			return nil
		}
	}
	return err
}

// ReadAnswer maps Alipay's answer to callgate's query about order into the
// callback a notification of that trade gives, through the same
// alipayEvent: the answer's fields are those of the notification
// (out_trade_no, trade_no, trade_status, total_amount, trans_currency),
// and send_pay_date is gmt_payment. TRADE_SUCCESS and TRADE_FINISHED pay;
// TRADE_CLOSED never paid closes the order; WAIT_BUYER_PAY says nothing
// happened: no callback. TRADE_CLOSED after a payment (send_pay_date set:
// fully refunded since, by how much the answer does not say) is
// ErrRefundedAnswer: nothing is applied. The answer must be about order;
// it names no app (Alipay answers the app that asked, whose app_id the
// query carries). Event id: "query:<order>:<trade_status>[:<trade_no>]", so
// asking again stores nothing twice and a late notification of the same
// payment finds it applied (by trade_no).
func (p *alipay) ReadAnswer(order string, answer []byte) ([]Callback, error) {
	content, _, err := AlipaySignedAnswer(answer)
	if err != nil {
		return nil, err
	}
	f, err := alipayAnswerForm(content)
	if err != nil {
		return nil, err
	}
	if f["code"] != alipayCodeSuccess {
		return nil, badRequest("the answer's code is %q (%s), not %s", truncate(f["code"]), truncate(f["sub_code"]), alipayCodeSuccess)
	}
	if f["out_trade_no"] != order {
		return nil, badRequest("the answer is about out_trade_no %q, not %q", truncate(f["out_trade_no"]), truncate(order))
	}
	// The notification's fields only: refund_fee is never in a query
	// answer, and nothing else may steer alipayEvent.
	paidAt := f["send_pay_date"]
	f = Form{"out_trade_no": order, "trade_no": f["trade_no"], "trade_status": f["trade_status"],
		"total_amount": f["total_amount"], "trans_currency": f["trans_currency"], "gmt_payment": paidAt}
	for k, v := range f {
		if v == "" {
			delete(f, k)
		}
	}
	status := f["trade_status"]
	id := "query:" + order + ":" + status
	if txn := f["trade_no"]; txn != "" {
		id += ":" + txn
	}
	switch status {
	case "WAIT_BUYER_PAY", "":
		return nil, nil
	case alipayTradeClosed:
		if paidAt != "" {
			return nil, ErrRefundedAnswer
		}
	}
	ev, err := alipayEvent(f)
	if err != nil {
		return []Callback{unreadable(id, order, err)}, nil
	}
	if ev.Ignored != "" {
		return nil, nil
	}
	return []Callback{{EventID: id, BusinessKey: order, Event: ev}}, nil
}

// AlipayRequestContent is what an app signs on a request to Alipay's
// gateway: every parameter but sign, empty ones left out, sorted by name,
// k=v joined with '&' (sign_type included, unlike a notification's).
func AlipayRequestContent(params map[string]string) []byte {
	f := Form{}
	for k, v := range params {
		if v != "" {
			f[k] = v
		}
	}
	return alipayContent(f, "sign")
}
