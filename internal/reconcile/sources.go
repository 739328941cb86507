package reconcile

import (
	"context"
	"errors"

	"callgate/internal/outbound"
	"callgate/internal/platform"
	"callgate/internal/source"
)

// ForSource decides whether source s (its preset plat) is asked, and builds
// what asks it: a nil Source says why not.
func ForSource(ctx context.Context, s source.Config, plat platform.Platform) (*Source, string, error) {
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
	src, err := build.new(ctx, s, plat)
	if err != nil {
		return nil, "", err
	}
	src.Name, src.Kind, src.Answers, src.Headers = s.Name, s.Kind, answers, plat.Headers()
	return src, "", nil
}

// builder builds what asks one preset's platform; unset says why a source
// with no credentials is not asked.
type builder struct {
	unset string
	new   func(ctx context.Context, s source.Config, plat platform.Platform) (*Source, error)
}

// builders are the presets whose platform callgate asks.
var builders = map[string]builder{
	"wechatpay-v3": {"WECHATPAY_MCH_PRIVATE_KEY_FILE and WECHATPAY_MCH_SERIAL not set", newWeChatPaySource},
	"alipay":       {"ALIPAY_APP_PRIVATE_KEY_FILE not set", newAlipaySource},
	"kuaidi100":    {"KUAIDI100_CUSTOMER and KUAIDI100_KEY not set", newKuaidi100Source},
	"stripe":       {"STRIPE_API_KEY not set", newStripeSource},
}

func newWeChatPaySource(ctx context.Context, s source.Config, plat platform.Platform) (*Source, error) {
	verifier, _ := plat.(platform.AnswerVerifier)
	if verifier == nil {
		return nil, errors.New("preset " + s.Preset + " verifies no query answers")
	}
	q, err := NewWeChatPay(ctx, WeChatPayConfig{MchID: s.Platform.MchID, PrivateKeyFile: s.Reconcile.PrivateKeyFile,
		Serial: s.Reconcile.Serial, APIBase: s.Reconcile.APIBase, Verifier: verifier})
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
