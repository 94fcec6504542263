package handlers_test

// Fuzz targets for the bodies of the routes other than acquire, heartbeat
// and release (fuzz_test.go): the batches, pause, resume, trigger, owed,
// credentials, webhooks and alert policies. Each serves its input through handlers.New over the real SQLite
// store and holds the answer to checkFuzzResponse's properties. Run one with
//
//	go test ./handlers -run '^$' -fuzz '^FuzzPauseBody$' -fuzztime 60s

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/handlers"
	"github.com/leaseapi/leaseapi/repo/sqlite"
)

// hostileBodies seed every body target besides its valid bodies: what a
// strict decoder must refuse with a 4xx.
var hostileBodies = []string{
	``, `null`, `[]`, `"x"`, `1`, `{}`, `{"x":1}`, `{} {}`, `{`, "\ufeff{}", `{"a":` + strings.Repeat("[", 1000),
	`{"reason":null}`, `{"reason":1}`, `{"reason":"` + strings.Repeat("r", 300) + `"}`, `{"reason":"a\u0000b"}`,
	`{"reason":"x","reason":"y"}`, `{"Reason":"x"}`, `{"jobs":[]}`, `{"jobs":[""]}`, `{"jobs":null}`,
	`{"jobs":["a","a"]}`, `{"jobs":[1]}`, `{"name":"n","role":"root","scopes":["*"]}`,
	`{"url":"http://127.0.0.1/x","events":["run.failed"],"scopes":["*"]}`,
}

// fuzzBodyOf fuzzes the body of method target (target returns the path of
// each input), sent with the bearer token when not empty.
func fuzzBodyOf(f *testing.F, b *fuzzBundle, method string, target func() string, token string, valid ...string) {
	for _, v := range append(valid, hostileBodies...) {
		f.Add("application/json", "", []byte(v))
	}
	f.Add("text/plain", "", []byte(valid[0]))
	f.Add("application/json; charset=utf-8", "gzip", []byte(valid[0]))
	f.Fuzz(func(t *testing.T, contentType, contentEncoding string, body []byte) {
		req := httptest.NewRequest(method, target(), bytes.NewReader(body))
		req.Header.Set("Content-Type", contentType)
		req.Header.Set("Content-Encoding", contentEncoding)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		b.serve(t, req, contentType+contentEncoding+string(body))
	})
}

// fuzzAdminBundle is a bundle with an admin token, whose credentials and
// webhooks are kept by the store.
func fuzzAdminBundle(f *testing.F) *fuzzBundle {
	opts := fuzzOptions()
	opts.AdminTokens = []string{fuzzAdminToken}
	return newFuzzBundleWith(f, opts, func(o *handlers.Options, s *sqlite.Store) {
		o.Credentials = s
		o.Webhooks = s
	})
}

func heldPath(suffix string) func() string {
	return func() string { return "/leases/" + fuzzHeld + suffix }
}

func FuzzPauseBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPost, heldPath("/pause"), fuzzAdminToken,
		`{}`, `{"reason":"maintenance until 10:00"}`, `{"reason":""}`, `{"reason":"é\u202e"}`)
}

func FuzzResumeBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPost, heldPath("/resume"), fuzzAdminToken, `{}`)
}

func FuzzTriggerBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPost, heldPath("/trigger"), fuzzAdminToken,
		`{}`, `{"reason":"rerun after the fix"}`, `{"reason":""}`)
}

func FuzzOwedBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPost, func() string { return "/owed" }, fuzzAdminToken,
		`{"jobs":["`+fuzzHeld+`"]}`, `{"jobs":["`+fuzzHeld+`","`+fuzzFresh+`","team-a:x"]}`,
		`{"jobs":[`+strings.Repeat(`"j",`, 1000)+`"k"]}`)
}

func FuzzCredentialBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPost, func() string { return "/credentials" }, fuzzAdminToken,
		`{"name":"ci","role":"lease","scopes":["team-a:"]}`,
		`{"name":"reader","role":"read","scopes":["*"],"ratePerSecond":0}`,
		`{"name":"ops","role":"admin","scopes":["team-a:","team-b."],"ratePerSecond":2.5}`,
		`{"name":"x","role":"lease","scopes":["team-a:"],"ratePerSecond":1e308}`,
		`{"name":"x","role":"lease","scopes":["team-a:"],"ratePerSecond":-1}`)
}

func FuzzWebhookBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPost, func() string { return "/webhooks" }, fuzzAdminToken,
		`{"url":"https://hooks.example.com/leaseapi","events":["run.failed"],"scopes":["team-a:"]}`,
		`{"url":"https://hooks.slack.com/services/T/B/x","events":["run.failed","run.missed"],"scopes":["*"],"format":"slack"}`,
		`{"url":"http://2130706433/x","events":["run.failed"],"scopes":["*"]}`,
		`{"url":"http://[::ffff:10.0.0.1]:65536/x","events":["run.failed"],"scopes":["*"]}`)
}

func FuzzPolicyBody(f *testing.F) {
	fuzzBodyOf(f, fuzzAdminBundle(f), http.MethodPut, heldPath("/policy"), fuzzAdminToken,
		`{"consecutiveFailures":3}`,
		`{"consecutiveFailures":100,"failureRate":{"threshold":1,"runs":64},"maxRuntimeMs":604800000,"minRuntimeMs":1,`+
			`"missedTicks":100,"recoveryThreshold":100,"realertAfterMs":2592000000}`,
		`{"failureRate":{"threshold":0.25,"runs":8},"realertAfterMs":60000}`,
		`{"maxRuntimeMs":9223372036854775807}`, `{"minRuntimeMs":-9223372036854775808}`, `{"missedTicks":0}`,
		`{"failureRate":{"threshold":0.5,"runs":4,"runs":4}}`, `{"failureRate":{"threshold":1e-400,"runs":4}}`,
		`{"failureRate":{"threshold":0.5,"runs":4,"x":{}}}`, `{"failureRate":[]}`, `{"failureRate":{}}`)
}

// batchPath is the target of a batch route.
func batchPath(path string) func() string { return func() string { return path } }

// FuzzAcquireBatchBody: a batch of acquires, whose items are each answered
// as a single acquire, never 5xx.
func FuzzAcquireBatchBody(f *testing.F) {
	fuzzBodyOf(f, newFuzzBundle(f, fuzzOptions()), http.MethodPost, batchPath("/acquire"), "",
		`{"owner":"a","items":[{"jobId":"`+fuzzFresh+`"}]}`,
		`{"owner":"a","ttlMs":30000,"tick":"2026-11-30T07:00:00Z","items":[{"jobId":"`+fuzzFresh+`-1"},{"jobId":"`+fuzzHeld+`"},`+
			`{"jobId":"`+fuzzFresh+`-2","owner":"b","ttlMs":1000,"nearestTick":true,"schedule":"*/5 * * * *"}]}`,
		`{"items":[{"jobId":"`+fuzzFresh+`-3","owner":"a","tick":"2099-01-01T00:00:00Z","group":"no-such-group"},{"jobId":"`+fuzzFresh+`-4"}]}`,
		`{"owner":"a","nearestTick":true,"items":[{"jobId":"`+fuzzFresh+`-5","tick":"0001-01-01T00:00:00Z"}]}`,
		`{"owner":"a","minIntervalMs":60000,"items":[{"jobId":"`+fuzzHeld+`"},{"jobId":"`+fuzzFresh+`-6","minIntervalMs":0}]}`,
		`{"owner":"a","items":[{"jobId":"a"},{"jobId":"a"}]}`, `{"owner":"a","items":[{"jobId":"a","zz":1}]}`,
		`{"owner":"a","items":[`+strings.Repeat(`{"jobId":"j"},`, 1000)+`{"jobId":"k"}]}`)
}

// FuzzHeartbeatBatchBody: a batch of heartbeats, likewise.
func FuzzHeartbeatBatchBody(f *testing.F) {
	fuzzBodyOf(f, newFuzzBundle(f, fuzzOptions()), http.MethodPost, batchPath("/heartbeat"), "",
		`{"owner":"a","items":[{"jobId":"`+fuzzHeld+`","token":1}]}`,
		`{"owner":"b","ttlMs":3600000,"items":[{"jobId":"`+fuzzHeld+`","token":1,"owner":"a"},{"jobId":"`+fuzzFresh+`","token":2}]}`,
		`{"items":[{"jobId":"`+fuzzHeld+`","token":1}]}`, `{"owner":"a","items":[{"jobId":"`+fuzzHeld+`","token":0,"ttlMs":1}]}`,
		`{"owner":"a","items":[]}`, `{"owner":"a","items":[{"jobId":"a","token":1},{"jobId":"a","token":1}]}`)
}
