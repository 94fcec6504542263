package handlers_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi"
	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/webhook"
)

// testWebhookKey is a LEASEAPI_WEBHOOK_KEY of the tests.
const testWebhookKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

func testSealer(t *testing.T) *webhook.Sealer {
	t.Helper()
	s, err := webhook.NewSealer(testWebhookKey)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func (b *testBundle) webhooks(t *testing.T, h http.Header) []api.Webhook {
	t.Helper()
	resp := b.do(t, request{method: http.MethodGet, path: "/webhooks", header: h})
	if resp.status != http.StatusOK {
		t.Fatalf("GET /webhooks: %d %s", resp.status, resp.body)
	}
	var l api.WebhookList
	if err := json.Unmarshal(resp.body, &l); err != nil {
		t.Fatal(err)
	}
	return l.Webhooks
}

func webhookIDs(hooks []api.Webhook) []string {
	var ids []string
	for _, w := range hooks {
		ids = append(ids, w.ID)
	}
	return ids
}

// TestWebhookBadInput: every malformed subscription is a 400 that says
// what to change, and nothing is created.
func TestWebhookBadInput(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, admin := mint(t, store, "a-admin", leaseapi.RoleAdmin, "team-a:")
		opts := defaultOptions()
		opts.WebhookSealer = testSealer(t)
		b := setup(t, store, opts)
		valid := `"events":["run.failed"],"scopes":["team-a:"]`
		for _, tc := range []struct {
			name, body, detail string
		}{
			{"UnknownEvent", `{"url":"https://hooks.example.com/x","events":["run.started"],"scopes":["team-a:"]}`, `events[0] must be one of run.failed, run.expired, run.missed, job.overdue, run.succeeded, job.recovered, job.missed, job.alerting, job.ok, not "run.started"`},
			{"RepeatedEvent", `{"url":"https://hooks.example.com/x","events":["run.failed","job.overdue","run.failed"],"scopes":["team-a:"]}`, `events[2] repeats "run.failed"`},
			{"TooManyEvents", `{"url":"https://hooks.example.com/x","events":["run.failed","run.expired","run.missed","job.overdue","run.succeeded","job.recovered","job.missed","job.alerting","job.ok","run.failed"],"scopes":["team-a:"]}`, "events must list 1 to 9 distinct events"},
			{"NoEvents", `{"url":"https://hooks.example.com/x","events":[],"scopes":["team-a:"]}`, "events must list 1 to 9 distinct events"},
			{"MissingEvents", `{"url":"https://hooks.example.com/x","scopes":["team-a:"]}`, "events must list 1 to 9 distinct events"},
			{"BadFormat", `{"url":"https://hooks.example.com/x",` + valid + `,"format":"teams"}`, `format must be "standard" or "slack"`},
			{"EmptyFormat", `{"url":"https://hooks.example.com/x",` + valid + `,"format":""}`, `format must be "standard" or "slack"`},
			{"Scheme", `{"url":"ftp://hooks.example.com/x",` + valid + `}`, `url must use http or https, not "ftp"`},
			{"SchemeJavascript", `{"url":"javascript:alert(1)",` + valid + `}`, "url must be an absolute http or https URL"},
			{"Relative", `{"url":"/hooks/x",` + valid + `}`, "url must be an absolute http or https URL"},
			{"MissingURL", `{` + valid + `}`, "url must be an absolute http or https URL"},
			{"NoHost", `{"url":"https:///x",` + valid + `}`, "url must name a host"},
			{"UserInfo", `{"url":"https://user:pw@hooks.example.com/x",` + valid + `}`, "url must not carry a user name or password"},
			{"TooLong", `{"url":"https://hooks.example.com/` + strings.Repeat("x", 2048) + `",` + valid + `}`, "url must be at most 2048 characters"},
			{"Loopback", `{"url":"http://127.0.0.1:8080/x",` + valid + `}`, "url's host 127.0.0.1 is not a public address"},
			{"LoopbackV6", `{"url":"http://[::1]/x",` + valid + `}`, "url's host ::1 is not a public address"},
			{"Metadata", `{"url":"http://169.254.169.254/latest/meta-data",` + valid + `}`, "url's host 169.254.169.254 is not a public address"},
			{"Private", `{"url":"https://10.1.2.3/x",` + valid + `}`, "url's host 10.1.2.3 is not a public address"},
			{"MappedPrivate", `{"url":"http://[::ffff:192.168.1.1]/x",` + valid + `}`, "is not a public address"},
			{"Multicast", `{"url":"http://224.0.0.1/x",` + valid + `}`, "url's host 224.0.0.1 is not a public address"},
			{"Documentation", `{"url":"http://192.0.2.7/x",` + valid + `}`, "192.0.2.7 is in 192.0.2.0/24 (Documentation (TEST-NET-1), RFC 5737), which is not globally reachable"},
			{"NAT64Loopback", `{"url":"http://[64:ff9b::7f00:1]/x",` + valid + `}`, "64:ff9b::7f00:1 embeds 127.0.0.1, which is in 127.0.0.0/8 (Loopback"},
			{"Decimal", `{"url":"http://2130706433/x",` + valid + `}`, `host "2130706433" is the IPv4 address 127.0.0.1 written in another form; write it as 127.0.0.1`},
			{"Hex", `{"url":"http://0x7f000001/x",` + valid + `}`, `host "0x7f000001" is the IPv4 address 127.0.0.1`},
			{"Octal", `{"url":"http://0177.0.0.1/x",` + valid + `}`, `host "0177.0.0.1" is the IPv4 address 127.0.0.1`},
			{"Short", `{"url":"http://127.1/x",` + valid + `}`, `host "127.1" is the IPv4 address 127.0.0.1`},
			{"Zero", `{"url":"http://0/x",` + valid + `}`, `host "0" is the IPv4 address 0.0.0.0`},
			{"BadIPv4", `{"url":"http://1.2.3.256/x",` + valid + `}`, `host "1.2.3.256" ends in a number`},
			{"PortZero", `{"url":"http://hooks.example.com:0/x",` + valid + `}`, `url's port must be 1 to 65535, not "0"`},
			{"PortTooHigh", `{"url":"http://hooks.example.com:65536/x",` + valid + `}`, `url's port must be 1 to 65535, not "65536"`},
			{"BadScope", `{"url":"https://hooks.example.com/x","events":["run.failed"],"scopes":["team-a"]}`, "scopes[0] must be * or a job id prefix"},
			{"NoScopes", `{"url":"https://hooks.example.com/x","events":["run.failed"],"scopes":[]}`, "scopes must be 1 to 32 scopes"},
			{"UnknownField", `{"url":"https://hooks.example.com/x",` + valid + `,"secret":"whsec_mine"}`, `unknown field "secret"`},
		} {
			t.Run(tc.name, func(t *testing.T) {
				resp := b.doInvalid(t, request{method: http.MethodPost, path: "/webhooks", body: tc.body, header: admin})
				p := wantProblem(t, resp, http.StatusBadRequest, api.CodeInvalidRequest)
				if !strings.Contains(p.Detail, tc.detail) {
					t.Errorf("detail %q, want it to say %q", p.Detail, tc.detail)
				}
			})
		}
		if hooks := b.webhooks(t, admin); len(hooks) != 0 {
			t.Errorf("bad input created webhooks: %+v", hooks)
		}
	})
}

// TestWebhookScopes: a scoped admin creates webhooks only within its own
// scopes (wider is 403), lists only those, and finds another team's as
// not found; the secret is shown once, the URL only redacted, and neither
// is stored in the clear (with a key) nor logged.
func TestWebhookScopes(t *testing.T) {
	t.Parallel()
	forEachFreshStore(t, func(t *testing.T, store leaseapi.Store, _ func(*testing.T) leaseapi.Store) {
		_, root := mint(t, store, "root", leaseapi.RoleAdmin, "*")
		aAdminCred, aAdmin := mint(t, store, "a-admin", leaseapi.RoleAdmin, "team-a:")
		_, aLease := mint(t, store, "a-lease", leaseapi.RoleLease, "team-a:")
		_, bAdmin := mint(t, store, "b-admin", leaseapi.RoleAdmin, "team-b.")
		sealer := testSealer(t)
		opts := defaultOptions()
		opts.WebhookSealer = sealer
		b := setup(t, store, opts)
		create := func(h http.Header, body string) response {
			return b.do(t, request{method: http.MethodPost, path: "/webhooks", body: body, header: h})
		}

		for _, scopes := range []string{`["*"]`, `["team-ab:"]`, `["team-a:","team-b."]`} {
			p := wantProblem(t, create(aAdmin, `{"url":"https://hooks.example.com/x","events":["run.failed"],"scopes":`+scopes+`}`),
				http.StatusForbidden, api.CodeForbidden)
			if !strings.Contains(p.Detail, "within its own scopes") {
				t.Errorf("wider scopes %s: detail %q", scopes, p.Detail)
			}
		}
		wantProblem(t, create(aLease, `{"url":"https://hooks.example.com/x","events":["run.failed"],"scopes":["team-a:"]}`),
			http.StatusForbidden, api.CodeForbidden)
		if hooks := b.webhooks(t, root); len(hooks) != 0 {
			t.Fatalf("refused creations created webhooks: %+v", hooks)
		}

		const slackURL = "https://hooks.slack.example/services/T000/B000/XXXXSECRET"
		resp := create(aAdmin, `{"url":"`+slackURL+`","events":["run.failed","job.overdue"],"scopes":["team-a:sub.","team-a:"],"format":"slack"}`)
		if resp.status != http.StatusCreated {
			t.Fatalf("create within scope: %d %s", resp.status, resp.body)
		}
		var created api.CreatedWebhook
		if err := json.Unmarshal(resp.body, &created); err != nil {
			t.Fatal(err)
		}
		if loc := resp.header.Get("Location"); loc != "/webhooks/"+created.ID {
			t.Errorf("Location %q, want /webhooks/%s", loc, created.ID)
		}
		if !strings.HasPrefix(created.Secret, "whsec_") || created.URL != "https://hooks.slack.example/…" ||
			!slices.Equal(created.Scopes, []string{"team-a:"}) || created.Format != "slack" ||
			created.CreatedBy == nil || *created.CreatedBy != "a-admin ("+aAdminCred.ID+")" || created.LastDelivery != nil || strings.Contains(string(resp.body), "lastDelivery") {
			t.Errorf("created: %s, want a whsec_ secret, the URL redacted, the scopes normalized, format slack, by a-admin and its id", resp.body)
		}
		resp = create(bAdmin, `{"url":"https://hooks.example.com/b","events":["run.succeeded"],"scopes":["team-b."]}`)
		if resp.status != http.StatusCreated {
			t.Fatalf("create within scope: %d %s", resp.status, resp.body)
		}
		var other api.CreatedWebhook
		if err := json.Unmarshal(resp.body, &other); err != nil {
			t.Fatal(err)
		}
		if other.Format != "standard" {
			t.Errorf("format without one: %q, want standard", other.Format)
		}

		if ids := webhookIDs(b.webhooks(t, aAdmin)); !slices.Equal(ids, []string{created.ID}) {
			t.Errorf("a-admin GET /webhooks: %q, want only %s", ids, created.ID)
		}
		all := b.webhooks(t, root)
		if ids := webhookIDs(all); len(ids) != 2 {
			t.Errorf("root GET /webhooks: %q, want both", ids)
		}
		listed := b.do(t, request{method: http.MethodGet, path: "/webhooks", header: root})
		for _, secret := range []string{created.Secret, other.Secret, "XXXXSECRET", "/services/"} {
			if strings.Contains(string(listed.body), secret) {
				t.Errorf("GET /webhooks shows %q", secret)
			}
		}

		// Another team's webhook is not found, exactly as one that does not exist.
		missing := b.do(t, request{method: http.MethodDelete, path: "/webhooks/wh_000000000000", header: aAdmin})
		wantProblem(t, missing, http.StatusNotFound, api.CodeNotFound)
		for _, req := range []request{
			{method: http.MethodDelete, path: "/webhooks/" + other.ID, header: aAdmin},
			{method: http.MethodGet, path: "/webhooks/" + other.ID + "/deliveries", header: aAdmin},
			{method: http.MethodGet, path: "/webhooks/nonsense/deliveries", header: aAdmin},
		} {
			resp := b.do(t, req)
			wantProblem(t, resp, http.StatusNotFound, api.CodeNotFound)
			if string(resp.body) != string(missing.body) {
				t.Errorf("%s: %s, want the body of a webhook that does not exist: %s", req, resp.body, missing.body)
			}
		}
		if n := len(b.webhooks(t, root)); n != 2 {
			t.Errorf("after refused deletes: %d webhooks, want 2", n)
		}

		// The URL and the secret are stored encrypted: the store gives them
		// back sealed, and they open with the key, bound to their webhook.
		job := "team-a:sub.job"
		l := wantLease(t, b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/acquire", body: `{"owner":"r"}`, header: aAdmin}))
		b.do(t, request{method: http.MethodPost, path: "/leases/" + job + "/release",
			body: `{"owner":"r","token":` + jsonBody(t, l.Token) + `,"outcome":"failed"}`, header: aAdmin})
		events, err := store.(leaseapi.WebhookStore).ClaimWebhookEvents(t.Context(), &leaseapi.ClaimWebhookParams{Limit: 10, Claim: time.Minute})
		if err != nil || len(events) != 1 {
			t.Fatalf("ClaimWebhookEvents: %+v, %v; want the run.failed of %s", events, err, job)
		}
		e := events[0]
		if e.WebhookID != created.ID || e.Type != "run.failed" || !strings.HasPrefix(e.URL, "aesgcm1:") || !strings.HasPrefix(e.Secret, "aesgcm1:") {
			t.Errorf("claimed event: webhook %s type %s, url %.12q secret %.12q; want %s's run.failed, both sealed", e.WebhookID, e.Type, e.URL, e.Secret, created.ID)
		}
		if u, err := sealer.Open(e.URL, webhook.AAD(created.ID, webhook.FieldURL)); err != nil || u != slackURL {
			t.Errorf("sealed URL opens to %q, %v", u, err)
		}
		if s, err := sealer.Open(e.Secret, webhook.AAD(created.ID, webhook.FieldSecret)); err != nil || s != created.Secret {
			t.Errorf("sealed secret opens to %q, %v", s, err)
		}
		if _, err := sealer.Open(e.Secret, webhook.AAD(other.ID, webhook.FieldSecret)); err == nil {
			t.Error("the sealed secret opens as another webhook's")
		}

		deliveries := b.do(t, request{method: http.MethodGet, path: "/webhooks/" + created.ID + "/deliveries", header: aAdmin})
		if deliveries.status != http.StatusOK || string(deliveries.body) != `{"deliveries":[]}` {
			t.Errorf("deliveries before any attempt: %d %s", deliveries.status, deliveries.body)
		}
		if r := b.do(t, request{method: http.MethodDelete, path: "/webhooks/" + created.ID, header: aAdmin}); r.status != http.StatusNoContent {
			t.Fatalf("delete within scope: %d %s", r.status, r.body)
		}
		wantProblem(t, b.do(t, request{method: http.MethodDelete, path: "/webhooks/" + created.ID, header: aAdmin}), http.StatusNotFound, api.CodeNotFound)
		if ids := webhookIDs(b.webhooks(t, root)); !slices.Equal(ids, []string{other.ID}) {
			t.Errorf("after delete: %q, want only %s", ids, other.ID)
		}

		// The audit names the credential; no log line holds a secret or the URL.
		by := "a-admin (" + aAdminCred.ID + ")"
		if len(b.logs.lines(t, map[string]any{"msg": "webhook created", "credential": by})) == 0 &&
			len(b.logs.lines(t, map[string]any{"msg": "request", "method": "POST", "credential": by})) == 0 {
			t.Error("no log line names the credential that created the webhook")
		}
		for _, secret := range []string{created.Secret, other.Secret, "XXXXSECRET", "hooks.example.com/b"} {
			if strings.Contains(b.logs.buf.String(), secret) {
				t.Errorf("the log holds %q", secret)
			}
		}
	})
}

// TestWebhookOpenModeAndPrivateTargets: in open mode anyone may manage
// webhooks (as every admin operation); a server that allows private
// targets accepts a loopback URL.
func TestWebhookOpenModeAndPrivateTargets(t *testing.T) {
	t.Parallel()
	opts := defaultOptions()
	opts.WebhookAllowPrivate = true
	b := setup(t, openSQLite(t), opts)
	resp := b.do(t, request{method: http.MethodPost, path: "/webhooks",
		body: `{"url":"http://127.0.0.1:9/hook","events":["run.missed"],"scopes":["*"]}`})
	if resp.status != http.StatusCreated {
		t.Fatalf("create in open mode, private allowed: %d %s", resp.status, resp.body)
	}
	var created api.CreatedWebhook
	if err := json.Unmarshal(resp.body, &created); err != nil {
		t.Fatal(err)
	}
	if created.CreatedBy != nil || created.URL != "http://127.0.0.1:9/…" {
		t.Errorf("created: %s, want createdBy null and the URL redacted", resp.body)
	}
}
