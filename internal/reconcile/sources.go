package reconcile

import (
	"context"
	"errors"
	"net/http"

	"callgate/internal/ingest"
	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/source"
)

// ForSource decides whether source s (its preset plat) is asked, and builds
// what asks it, with the settings cfg: a nil Source says why not. Its
// querier's client is callgate's outbound client (internal/outbound) over
// the source's gate (gate.go): its rate, pause and circuit.
func ForSource(ctx context.Context, s source.Config, plat platform.Platform, cfg Config) (*Source, string, error) {
	switch {
	case s.Preset == "":
		return nil, "a configured source: no platform to ask", nil
	case s.Disabled():
		return nil, "disabled", nil
	}
	build, ok := builders[s.Preset]
	if !ok {
		return nil, notAsked(s.Preset), nil
	}
	if !s.Reconcile.Configured() {
		return nil, build.unset, nil
	}
	answers, _ := plat.(platform.Answerer)
	if answers == nil {
		return nil, "", errors.New("preset " + s.Preset + " reads no query answers")
	}
	cfg = cfg.WithDefaults()
	g := newGate(s.Name, cfg)
	hc := outbound.Client(outbound.Options{Timeout: cfg.QueryTimeout, MaxAnswerBytes: maxAnswerBytes})
	hc.Transport = g.wrap(hc.Transport)
	src, err := build.new(ctx, s, plat, hc)
	if err != nil {
		return nil, "", err
	}
	src.Name, src.Kind, src.Answers, src.Headers, src.gate = s.Name, s.Kind, answers, ingest.KeptHeaders(plat.Headers()), g
	return src, "", nil
}

// builder builds what asks one preset's platform; unset says why a source
// with no credentials is not asked.
type builder struct {
	unset string
	new   func(ctx context.Context, s source.Config, plat platform.Platform, hc *http.Client) (*Source, error)
}

// builders are the presets whose platform callgate asks.
var builders = map[string]builder{
	"wechatpay-v3": {"WECHATPAY_MCH_PRIVATE_KEY_FILE and WECHATPAY_MCH_SERIAL not set", newWeChatPaySource},
	"alipay":       {"ALIPAY_APP_PRIVATE_KEY_FILE not set", newAlipaySource},
	"kuaidi100":    {"KUAIDI100_CUSTOMER and KUAIDI100_KEY not set", newKuaidi100Source},
	"stripe":       {"STRIPE_API_KEY not set", newStripeSource},
}

func newWeChatPaySource(ctx context.Context, s source.Config, plat platform.Platform, hc *http.Client) (*Source, error) {
	verifier, _ := plat.(platform.AnswerVerifier)
	if verifier == nil {
		return nil, errors.New("preset " + s.Preset + " verifies no query answers")
	}
	q, err := NewWeChatPay(ctx, WeChatPayConfig{MchID: s.Platform.MchID, PrivateKeyFile: s.Reconcile.PrivateKeyFile,
		Serial: s.Reconcile.Serial, APIBase: s.Reconcile.APIBase, Verifier: verifier, HTTP: hc})
	if err != nil {
		return nil, err
	}
	return &Source{Querier: q}, nil
}

// notAsked says why a preset's platform is not asked (yet).
func notAsked(preset string) string {
	switch preset {
	case "adyen":
		return "Adyen offers settlement reports, not a per-payment query"
	case "shopify":
		return "Shopify's orders are read back through the Admin API, which callgate does not use"
	}
	return "its platform has no query callgate uses"
}

// apiBase checks a platform's API URL (env names its setting): https, or
// http to a loopback address only (a local simulator): an answer is
// believed only from the platform, and Kuaidi100's are not even signed.
func apiBase(env, raw, def string) (string, error) { return outbound.Base(env, raw, def) }
