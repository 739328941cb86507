package platform_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"callgate/internal/config"
	"callgate/internal/platform"
	"callgate/internal/testenv"
)

// signedRequest is one request ready to send: a source and what to post.
type signedRequest struct {
	body []byte
	h    http.Header
}

// intakeCase builds the i-th distinct, correctly signed request of a
// source (distinct event ids, so each is a new row).
type intakeCase struct {
	source string
	build  func(t testing.TB, cfg *config.Config, i int) signedRequest
}

// intakeCases are the sources BenchmarkIntake compares: the JSON HMAC
// sources configured field by field (paydemo, shipdemo), and the presets.
var intakeCases = []intakeCase{
	{"paydemo", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		body := testenv.PaymentBody(fmt.Sprintf("ORD-B-%d", i), fmt.Sprintf("PAY-B-%d", i), 1000)
		return signedRequest{body, testenv.PaydemoHeaders(t, cfg, fmt.Sprintf("msg_b_%d", i), time.Now(), body)}
	}},
	{"shipdemo", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		body := testenv.ShipmentBody(fmt.Sprintf("WB-B-%d", i), "ORD-B", 1, "IN_TRANSIT")
		return signedRequest{body, testenv.ShipdemoHeaders(t, cfg, body)}
	}},
	{"stripe", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		body := stripeEvent(fmt.Sprintf("evt_b_%d", i), "payment_intent.succeeded", fmt.Sprintf("ORD-B-%d", i), fmt.Sprintf("pi_b_%d", i), 1000)
		return signedRequest{body, stripeSigned(body, stripeSecret, time.Now())}
	}},
	{"alipay", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		n := fmt.Sprint(i)
		body := alipayExample("notify_id", "nid-b-"+n, "out_trade_no", "ORD-B-"+n, "trade_no", "T-B-"+n).signed(testenv.RSAKeys()[0])
		return signedRequest{body, alipayHeader()}
	}},
	{"wechatpay", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		n := fmt.Sprint(i)
		body := wechatPaid("EV-B-"+n, "ORD-B-"+n, "TX-B-"+n, "SUCCESS", 1000)
		return signedRequest{body, wechatSigned(testenv.RSAKeys()[0], wechatPubKeyID, body, time.Now())}
	}},
	{"adyen", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		n := fmt.Sprint(i)
		return signedRequest{adyenSigned(adyenKey, authorisation("PSP-B-"+n, "ORD-B-"+n, 1000, "true")), jsonHeader()}
	}},
	{"kuaidi100", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		return signedRequest{kuaidiSigned(kuaidiParam(fmt.Sprintf("YT-B-%d", i), "0", cpTransit, cpPickedUp)), formHeader()}
	}},
	{"shopify", func(t testing.TB, cfg *config.Config, i int) signedRequest {
		body := shopifyOrder(fmt.Sprintf("#B%d", i), int64(i), "10.00")
		return signedRequest{body, shopifySigned(body, shopifySecret, fmt.Sprintf("wh-b-%d", i), "orders/paid")}
	}},
}

// intakePlatforms enables every preset source of intakeCases.
func intakePlatforms() []func(*config.Config) {
	return []func(*config.Config){
		testenv.WithPlatform("stripe", stripeConfig(stripeSecret)),
		testenv.WithPlatform("shopify", shopifyConfig(shopifySecret)),
		testenv.WithPlatform("alipay", platform.Config{PublicKeys: []platform.PublicKey{{Key: bareBase64(testenv.RSAKeys()[0])}}, AppID: alipayAppID}),
		testenv.WithPlatform("wechatpay", wechatKeyConfig()),
		testenv.WithPlatform("adyen", adyenConfig(adyenKey)),
		testenv.WithPlatform("kuaidi100", platform.Config{Secrets: []string{kuaidiSalt}}),
	}
}

// BenchmarkIntake is one callback through the running gateway, as shipped
// (group commit, announcements), per source: 16 clients post distinct,
// correctly signed callbacks over loopback HTTP to the real MariaDB and
// RabbitMQ. ns/op is wall time per callback at that concurrency;
// cpu-us/op is this process's CPU per callback (the gateway's handler,
// verification, parsing, storage driver and announcer, plus the test's
// HTTP client, which is the same for every source). Signing happens before
// the timer. Run: go test -run XXX -bench Intake -benchtime 2000x ./internal/platform/
func BenchmarkIntake(b *testing.B) {
	cfg := testenv.Config(b, intakePlatforms()...)
	gw := testenv.StartGateway(b, cfg)
	gw.WaitReady(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for n, c := range intakeCases {
		b.Run(c.source, func(b *testing.B) {
			reqs := make([]signedRequest, b.N)
			for i := range reqs {
				reqs[i] = c.build(b, cfg, n*10_000_000+i)
			}
			var next atomic.Int64
			b.SetParallelism(8) // 16 clients on 2 cores
			b.ReportAllocs()
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					r := reqs[next.Add(1)-1]
					req, _ := http.NewRequest(http.MethodPost, gw.URL+"/callbacks/"+c.source, bytes.NewReader(r.body))
					req.Header = r.h
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode/100 != 2 {
						b.Errorf("%s: status %d", c.source, resp.StatusCode)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(processCPU()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
		})
	}
	require.NoError(b, gw.Stop())
}

// processCPU is this process's user+system CPU time.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
