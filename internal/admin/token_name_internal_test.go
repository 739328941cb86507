package admin

import "testing"

// TestSSOActorForm: the names a single sign-on user's audit actor takes,
// an e-mail or "sso:<subject>" in any case, are no token's; ParseTokens
// never makes a name with a colon, so the "sso:" form is checked here.
func TestSSOActorForm(t *testing.T) {
	t.Parallel()
	for name, refused := range map[string]bool{
		"alice@example.com": true, "@": true, "ops@": true,
		"sso:alice": true, "SSO:alice": true, "Sso:": true,
		"sso": false, "ssobot": false, "sso-bot": false, "ops": false, "alice.example.com": false,
	} {
		if got := ssoActorForm(name) != ""; got != refused {
			t.Errorf("%q: refused %v, want %v", name, got, refused)
		}
	}
}
