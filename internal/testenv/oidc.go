package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// OIDCProvider is test/oidcprovider running as a process of its own: a
// real OpenID provider (discovery, published keys, PKCE, RS256 ID tokens)
// whose next sign-in the test chooses.
type OIDCProvider struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	base         string
}

// OIDCUser is who signs in next at the provider, and how their ID token
// is spoiled: another audience, or expired.
type OIDCUser struct {
	Subject  string   `json:"sub"`
	Email    string   `json:"email,omitempty"`
	Name     string   `json:"name,omitempty"`
	Groups   []string `json:"groups"`
	Audience string   `json:"audience,omitempty"`
	Expired  bool     `json:"expired,omitempty"`
	// Nonce, when set, replaces the nonce the client sent.
	Nonce string `json:"nonce,omitempty"`
	// EmailUnverified sends email_verified false (else true with an
	// e-mail).
	EmailUnverified bool `json:"email_unverified,omitempty"`
}

// StartOIDCProvider builds and starts the provider for client id
// "callgate"; it is killed when the test ends. Its issuer is
// http://localhost:<port>/oidc: another site than a console on
// 127.0.0.1, as a real provider is (SameSite cookies behave as in
// production).
func StartOIDCProvider(t testing.TB) *OIDCProvider { return StartOIDCProviderOn(t, "127.0.0.1:0") }

// StartOIDCProviderOn is StartOIDCProvider listening on addr.
func StartOIDCProviderOn(t testing.TB, addr string) *OIDCProvider {
	t.Helper()
	root := RepoRoot()
	bin := filepath.Join(t.TempDir(), "oidcprovider")
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = "/usr/local/go/bin/go"
	}
	build := exec.Command(goBin, "build", "-trimpath", "-o", bin, "./test/oidcprovider")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, "go build ./test/oidcprovider: %s", out)

	p := &OIDCProvider{ClientID: "callgate", ClientSecret: "oidc-test-client-secret-0123"}
	cmd := exec.Command(bin, "-addr", addr, "-issuer-host", "localhost", "-client-id", p.ClientID, "-client-secret", p.ClientSecret)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr SyncBuffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if issuer, ok := strings.CutPrefix(sc.Text(), "issuer "); ok {
				lines <- issuer
			}
		}
		close(lines)
	}()
	select {
	case issuer, ok := <-lines:
		require.True(t, ok, "the provider exited: %s", stderr.String())
		p.Issuer = issuer
	case <-time.After(30 * time.Second):
		t.Fatalf("the provider did not start: %s", stderr.String())
	}
	p.base = strings.TrimSuffix(p.Issuer, "/oidc")
	return p
}

func (p *OIDCProvider) control(t testing.TB, method, path string, body any) string {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		require.NoError(t, err)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, p.base+path, rd)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	require.Less(t, resp.StatusCode, 300, "%s %s: %s", method, path, b)
	return string(b)
}

// Next makes u the one who signs in at the next authorization request.
func (p *OIDCProvider) Next(t testing.TB, u OIDCUser) {
	p.control(t, http.MethodPost, "/control/next", u)
}

// NonsenseToken makes the next token request answer JSON that is no
// token response.
func (p *OIDCProvider) NonsenseToken(t testing.TB) {
	p.control(t, http.MethodPost, "/control/nonsense-token", nil)
}

// TamperState makes the next redirect back to the client carry an
// altered state.
func (p *OIDCProvider) TamperState(t testing.TB) {
	p.control(t, http.MethodPost, "/control/tamper-state", nil)
}

// Exchanges is how many distinct codes the provider's token endpoint was
// asked to exchange, refused or not.
func (p *OIDCProvider) Exchanges(t testing.TB) int {
	n, err := strconv.Atoi(p.control(t, http.MethodGet, "/control/exchanges", nil))
	require.NoError(t, err)
	return n
}

// Logouts is how many RP-initiated logouts the provider saw.
func (p *OIDCProvider) Logouts(t testing.TB) int {
	n, err := strconv.Atoi(p.control(t, http.MethodGet, "/control/logouts", nil))
	require.NoError(t, err)
	return n
}
