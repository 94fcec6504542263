package main

// TestHostileRoutes drives every operation of api/openapi.yaml with hostile
// variants of a valid request, generated from the operation's parameters
// and body (removed, null, wrong type, empty, huge, boundary numbers, odd
// unicode and control characters, times at and past the years the wire can
// show, ticks far ahead, hostile schedules, duplicate keys, extra fields,
// deep nesting, odd path segments and query strings, wrong content types,
// Idempotency-Key variants), over the real server (serveWith) on Postgres
// and on the embedded SQLite store, as the configured admin and as scoped
// lease and read credentials. Every answer must be:
//
//   - never a 5xx (the database is up), and no panic in the server's log;
//   - valid against the closed form of the spec (apitest.ClosedSpec:
//     kin-openapi's ValidateResponse, and the strict reader of package
//     apitest for bodies); a request the spec has
//     no operation for gets a 400, 404 or 405 problem; a request line that
//     net/http itself refuses gets its plain 400;
//
// and at the end every stored lease is still listed and read back by every
// client of this project: the generated Go client, leasectl (ls, get) and
// the Python client, with every time of every lease representable.
//
// The generator is deterministic (a fixed seed); the requests are sent one
// at a time, each on its own connection, as raw HTTP/1.1.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/leaseapi/leaseapi/api/apitest"
	apiclient "github.com/leaseapi/leaseapi/api/client"
)

// hostileSeed makes the generated variants and their order reproducible.
const hostileSeed = 39

// hostileMaxPerStore bounds the requests of one store's run.
const hostileMaxPerStore = 3000

// Credentials of the run. The scoped ones are created through the API.
const (
	routesAdminToken = "routes-admin-secret"
	routesScope      = "team-a:"
	// routesAcquireGroup is the concurrency group of the acquires' bodies.
	routesAcquireGroup = "team-a:acquires"
)

func init() {
	// Bodies that are not JSON (the console's files, /metrics, the spec)
	// are validated as strings, like the handler tests do.
	for _, ct := range []string{"text/html", "text/javascript", "text/css", "text/plain", "application/openmetrics-text"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
	}
}

func TestHostileRoutes(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"Postgres", "SQLite"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			runHostileRoutes(t, store)
		})
	}
}

// routesEnv is one server of the run, its contract and its credentials.
type routesEnv struct {
	t         *testing.T
	store     string
	srv       *server
	addr      string
	doc       *openapi3.T
	router    routers.Router
	strict    *apitest.Contract
	creds     map[string]string // name → bearer token: admin, lease, read
	credID    string            // the credential of /credentials/{id}
	hookID    string            // the webhook of /webhooks/{id}
	group     string            // the concurrency group of /groups/{name}
	heldTok   int64             // token of the held job
	fresh     int               // counter of fresh job ids
	createdBy map[string]string // job id → the variant that created it
	requests  map[string]string // X-Request-Id → the case's key
	failures  []string
	statuses  map[int]int // answers by status
}

func runHostileRoutes(t *testing.T, store string) {
	cfg := serveConfig(t)
	if store == "Postgres" {
		cfg.DatabaseURL = newDatabase(t)
	}
	cfg.LogLevel = "info"
	cfg.AdminTokens = []string{routesAdminToken}
	srv := startServer(t, func(ctx context.Context, stderr io.Writer) error {
		logger, err := newLogger(cfg, stderr)
		if err != nil {
			return err
		}
		return serveWith(ctx, cfg, logger, defaultServerLimits())
	})
	e := &routesEnv{t: t, store: store, srv: srv, addr: strings.TrimPrefix(srv.url, "http://"),
		creds: map[string]string{"admin": routesAdminToken}, createdBy: map[string]string{}, requests: map[string]string{}, statuses: map[int]int{}}
	e.loadContract()
	e.setUp()

	ops := e.operations()
	var cases []hostileCase
	for _, op := range ops {
		cases = append(cases, e.variants(op)...)
	}
	rng := rand.New(rand.NewPCG(hostileSeed, uint64(len(store))))
	rng.Shuffle(len(cases), func(i, j int) { cases[i], cases[j] = cases[j], cases[i] })
	if len(cases) > hostileMaxPerStore {
		cases = cases[:hostileMaxPerStore]
	}
	// The deletions last, so that the ids they delete serve the others first.
	sort.SliceStable(cases, func(i, j int) bool {
		return cases[i].op.method != http.MethodDelete && cases[j].op.method == http.MethodDelete
	})
	// Three in four cases go as the credential of the role the operation
	// needs (its x-required-role), so that their input gets past the
	// authorization; the others as any credential.
	creds := []string{"admin", "lease", "read"}
	for i, c := range cases {
		c.cred = creds[rng.IntN(len(creds))]
		if role := requiredRole(c.op.op); role != "" && rng.IntN(4) > 0 {
			c.cred = role
		}
		if c.forceCred != "" {
			c.cred = c.forceCred
		}
		e.send(c, i)
	}
	t.Logf("%s: %d operations, %d requests, answers by status %v", store, len(ops), len(cases), e.statuses)

	e.checkLog()
	e.checkClients()
	for _, f := range e.failures {
		t.Error(f)
	}
}

// requiredRole is the x-required-role of op, "" when it names none (the
// public routes).
func requiredRole(op *openapi3.Operation) string {
	role, _ := op.Extensions["x-required-role"].(string)
	return role
}

// fail records a failure of the case named key.
func (e *routesEnv) fail(key, format string, args ...any) {
	if len(e.failures) < 200 {
		e.failures = append(e.failures, e.store+": "+key+": "+fmt.Sprintf(format, args...))
	}
}

func (e *routesEnv) loadContract() {
	t := e.t
	closed, err := apitest.ClosedSpec()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := openapi3.NewLoader().LoadFromData(closed)
	if err != nil {
		t.Fatal(err)
	}
	if e.router, err = gorillamux.NewRouter(doc); err != nil {
		t.Fatal(err)
	}
	if e.strict, err = apitest.Strict(); err != nil {
		t.Fatal(err)
	}
	e.doc = doc
}

// setUp creates the scoped credentials, a held, a paused and a done job,
// and the credential and webhook of the {id} routes (which their DELETE
// variants may remove: they run last).
func (e *routesEnv) setUp() {
	for _, c := range []struct{ name, role string }{{"lease", "lease"}, {"read", "read"}} {
		body := fmt.Sprintf(`{"name":"routes-%s","role":%q,"scopes":[%q],"ratePerSecond":0}`, c.name, c.role, routesScope)
		resp := e.mustOK(http.MethodPost, "/credentials", body)
		e.creds[c.name] = resp["token"].(string)
		who, err := e.roundTrip(rawRequest(http.MethodGet, "/whoami", "", "", http.Header{"Authorization": {"Bearer " + e.creds[c.name]}}))
		if err != nil || who.status != http.StatusOK || !strings.Contains(string(who.body), `"routes-`+c.name+`"`) {
			e.t.Fatalf("the %s credential does not authenticate: %v %v", c.name, who, err)
		}
	}
	resp := e.mustOK(http.MethodPost, "/credentials", fmt.Sprintf(`{"name":"routes-victim","role":"read","scopes":[%q]}`, routesScope))
	e.credID = resp["id"].(string)
	resp = e.mustOK(http.MethodPost, "/webhooks", `{"url":"https://hooks.example.invalid/x","events":["run.failed"],"scopes":["team-a:"]}`)
	e.hookID = resp["id"].(string)
	e.group = "team-a:grp"
	e.mustOK(http.MethodPut, "/groups/"+e.group, `{"limit":1}`)
	// The group the acquires join: too large to be full.
	e.mustOK(http.MethodPut, "/groups/"+routesAcquireGroup, `{"limit":10000}`)
	l := e.mustOK(http.MethodPost, "/leases/team-a:held/acquire", `{"owner":"a","ttlMs":3600000,"schedule":"*/5 * * * *"}`)
	e.heldTok = int64(l["token"].(float64))
	e.mustOK(http.MethodPost, "/leases/team-a:paused/acquire", `{"owner":"a","tick":"2026-01-01T00:00:00Z"}`)
	e.mustOK(http.MethodPost, "/leases/team-a:paused/pause", `{"reason":"hostile"}`)
	e.mustOK(http.MethodPost, "/leases/team-a:done/acquire", `{"owner":"a","tick":"2026-01-01T00:00:00Z"}`)
	e.mustOK(http.MethodPost, "/leases/team-a:done/release", `{"owner":"a","token":1}`)
}

// mustOK sends a valid request as the admin and wants a 2xx JSON object.
func (e *routesEnv) mustOK(method, path, body string) map[string]any {
	e.t.Helper()
	resp, err := e.roundTrip(rawRequest(method, path, body, "application/json", http.Header{"Authorization": {"Bearer " + routesAdminToken}}))
	if err != nil || resp.status/100 != 2 {
		e.t.Fatalf("set up %s %s: %v %v", method, path, err, resp)
	}
	var out map[string]any
	if err := json.Unmarshal(resp.body, &out); err != nil {
		e.t.Fatalf("set up %s %s: %v", method, path, err)
	}
	return out
}

// operation is one operation of the spec.
type operation struct {
	method, path string // path as the spec writes it, {params} included
	op           *openapi3.Operation
	query        []string // its query parameters
	headers      []string // its header parameters
	hasBody      bool
}

func (o operation) String() string { return o.method + " " + o.path }

// operations are the spec's operations in a fixed order.
func (e *routesEnv) operations() []operation {
	var ops []operation
	for _, path := range e.doc.Paths.InMatchingOrder() {
		item := e.doc.Paths.Find(path)
		for method, op := range item.Operations() {
			o := operation{method: method, path: path, op: op, hasBody: op.RequestBody != nil}
			params := append(openapi3.Parameters{}, item.Parameters...)
			params = append(params, op.Parameters...)
			for _, p := range params {
				switch p.Value.In {
				case openapi3.ParameterInQuery:
					o.query = append(o.query, p.Value.Name)
				case openapi3.ParameterInHeader:
					o.headers = append(o.headers, p.Value.Name)
				}
			}
			ops = append(ops, o)
		}
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i].String() < ops[j].String() })
	return ops
}

// field is one member of a JSON body, its value as raw JSON.
type field struct{ key, raw string }

// hostileCase is one request of the run.
type hostileCase struct {
	op      operation
	variant string
	// pathFn gives the request target (path and query) when sent; it may
	// create a fresh job id.
	pathFn      func(e *routesEnv) string
	body        string
	noBody      bool
	contentType string
	header      http.Header
	cred        string
	forceCred   string
	// fresh: the case acquires a fresh job, whose stored values the
	// clients must read back.
	fresh bool
}

// basePath is op's path with valid parameters; jobId is fresh for an
// acquire (so that its body's values are stored), else a job in scope.
func (e *routesEnv) basePath(op operation, jobID string) string {
	p := op.path
	p = strings.ReplaceAll(p, "{jobId}", jobID)
	p = strings.ReplaceAll(p, "{name}", e.group)
	if strings.HasPrefix(op.path, "/credentials/") {
		p = strings.ReplaceAll(p, "{id}", e.credID)
	} else {
		p = strings.ReplaceAll(p, "{id}", e.hookID)
	}
	return strings.ReplaceAll(p, "{asset}", "app.js")
}

// baseJob is the job of op's valid request.
func baseJob(op operation) string {
	switch {
	case strings.HasSuffix(op.path, "/acquire"):
		return "" // fresh
	case strings.HasSuffix(op.path, "/resume"):
		return "team-a:paused"
	}
	return "team-a:held"
}

// baseBody is a valid body of op.
func (e *routesEnv) baseBody(op operation) []field {
	switch op.op.OperationID {
	case "acquireLease":
		return []field{{"owner", `"replica-a"`}, {"ttlMs", `60000`}, {"tick", `"2026-11-30T07:00:00Z"`}, {"schedule", `"*/5 * * * *"`}, {"graceMs", `30000`},
			{"group", `"` + routesAcquireGroup + `"`}, {"minIntervalMs", `60000`}}
	case "acquireBatch":
		return []field{{"owner", `"replica-a"`}, {"ttlMs", `60000`}, {"tick", `"2026-11-30T07:00:00Z"`}, {"schedule", `"*/5 * * * *"`}, {"graceMs", `30000`},
			{"group", `"` + routesAcquireGroup + `"`}, {"minIntervalMs", `60000`},
			{"items", `[{"jobId":"team-a:batch-1"},{"jobId":"team-a:batch-2","owner":"replica-b","nearestTick":true,"minIntervalMs":0}]`}}
	case "heartbeatBatch":
		return []field{{"owner", `"a"`}, {"ttlMs", `3600000`}, {"items", fmt.Sprintf(`[{"jobId":"team-a:held","token":%d}]`, e.heldTok)}}
	case "putGroup":
		return []field{{"limit", `2`}}
	case "heartbeatLease":
		return []field{{"owner", `"a"`}, {"token", strconv.FormatInt(e.heldTok, 10)}, {"ttlMs", `3600000`}}
	case "releaseLease":
		return []field{{"owner", `"a"`}, {"token", strconv.FormatInt(e.heldTok, 10)}, {"outcome", `"failed"`}}
	case "pauseJob", "triggerJob":
		return []field{{"reason", `"maintenance"`}}
	case "resumeJob":
		return nil
	case "owedTicks":
		return []field{{"jobs", `["team-a:held","team-a:paused"]`}}
	case "createCredential":
		return []field{{"name", `"routes-new"`}, {"role", `"read"`}, {"scopes", `["team-a:"]`}, {"ratePerSecond", `5`}}
	case "createWebhook":
		return []field{{"url", `"https://hooks.example.invalid/y"`}, {"events", `["run.failed","run.missed"]`}, {"scopes", `["team-a:"]`}, {"format", `"standard"`},
			{"name", `"routes-hook"`}}
	case "putPolicy":
		return []field{{"consecutiveFailures", `3`}, {"failureRate", `{"threshold":0.5,"runs":10}`}, {"maxRuntimeMs", `60000`},
			{"minRuntimeMs", `1000`}, {"missedTicks", `2`}, {"recoveryThreshold", `2`}, {"realertAfterMs", `3600000`}}
	}
	// An operation added since: a body from its schema's examples (the
	// valid request's check says when it is not valid; then add one above).
	return schemaBody(op.op)
}

// schemaBody is a body of op's JSON request schema: each property with its
// example, else a value of its type.
func schemaBody(op *openapi3.Operation) []field {
	mt := op.RequestBody.Value.Content.Get("application/json")
	if mt == nil || mt.Schema == nil {
		return nil
	}
	var fields []field
	for _, name := range slices.Sorted(maps.Keys(mt.Schema.Value.Properties)) {
		prop := mt.Schema.Value.Properties[name].Value
		v := prop.Example
		if v == nil {
			switch {
			case prop.Type.Is("string"):
				v = "x"
			case prop.Type.Is("integer"), prop.Type.Is("number"):
				v = 1
			case prop.Type.Is("boolean"):
				v = false
			case prop.Type.Is("array"):
				v = []any{}
			default:
				v = map[string]any{}
			}
		}
		raw, err := json.Marshal(v)
		if err != nil {
			continue
		}
		fields = append(fields, field{name, string(raw)})
	}
	return fields
}

func renderBody(fields []field) string {
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = strconv.Quote(f.key) + ":" + f.raw
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Hostile values.
var (
	hugeString = `"` + strings.Repeat("x", 70<<10) + `"`
	longString = `"` + strings.Repeat("é", 300) + `"`
	deepArray  = strings.Repeat("[", 10000) + strings.Repeat("]", 10000)
	deepObject = strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)

	// anyValues replace any field's value.
	anyValues = []string{
		`null`, `""`, `0`, `-1`, `9223372036854775807`, `9223372036854775808`, `-9223372036854775808`,
		`1e308`, `-1e308`, `1.5`, `1e3`, `"NaN"`, `"Infinity"`, `"-0"`, `true`, `[]`, `{}`, `[1,2]`,
		`{"a":1}`, `"x"`, hugeString, longString, `"\u0000"`, `"a\u0000b"`, `"\u202etxt"`, `"\ud800"`,
		`"😀"`, "\"\x01\"", `"\n"`, `"  padded  "`, `"../../etc"`, `"team-b:x"`, deepArray, deepObject,
	}
	// timeValues replace a time field.
	timeValues = []string{
		`"0000-01-01T00:00:00Z"`, `"0000-12-31T23:59:59.999Z"`, `"0001-01-01T00:00:00Z"`, `"0001-01-01T00:00:00+00:01"`,
		`"0001-01-01T00:30:00+01:00"`, `"9999-12-31T23:59:59.999Z"`, `"9999-12-31T23:59:59-00:01"`,
		`"9999-12-31T23:30:00-01:00"`, `"10000-01-01T00:00:00Z"`, `"2026-06-30T23:59:60Z"`, `"2026-12-31T23:59:60Z"`,
		`"2026-01-01T00:00:00+24:00"`, `"2026-01-01T00:00:00-23:59"`, `"2026-01-01T00:00:00+99:99"`,
		`"2099-01-01T00:00:00Z"`, `"2026-11-30T07:00:00.123456789+05:30"`, `"2026-11-30 07:00:00Z"`,
		`"2026-11-30t07:00:00z"`, `"2026-02-30T00:00:00Z"`, `"-0001-01-01T00:00:00Z"`, `"2026-11-30"`, `"1764486000"`,
	}
	// scheduleValues replace a schedule field.
	scheduleValues = []string{
		`"TZ=UTC"`, `"CRON_TZ=Europe/Berlin"`, `"CRON_TZ=Europe/Berlin "`, `"TZ="`, `"@every 1ms"`, `"@every 0s"`,
		`"@every -1s"`, `"@every 999ms"`, `"@every 2562047h"`, `"* * * * 7"`, `"0 0 * * 7"`, `"* * * * * *"`,
		`"*/1 * * * * *"`, `"CRON_TZ=Nowhere/Zone * * * * *"`, `"TZ=UTC TZ=UTC * * * * *"`, `"60 * * * *"`,
		`"0 0 30 2 *"`, `"@yearly"`, `"@reboot"`, `"@every 1s"`, `"` + strings.Repeat("1,", 200) + `1 * * * *"`,
		`"TZ=../../../etc/passwd * * * * *"`, `"CRON_TZ=Local * * * * *"`,
	}
	// arrayValues replace an array field.
	arrayValues = []string{
		`[]`, `[""]`, `[null]`, `[1]`, `["*"]`, `["team-a:","team-a:"]`, `["team-b:"]`, `["team-a:held","team-a:held"]`,
		`[` + strings.Repeat(`"team-a:x",`, 1000) + `"team-a:y"]`, `["` + strings.Repeat("a", 200) + `"]`, `[[]]`, `["\u0000"]`,
	}
	// itemValues replace the items of a batch.
	itemValues = []string{
		`[{}]`, `[null]`, `[{"jobId":""}]`, `[{"jobId":"team-b:x","token":1}]`, `[{"jobId":"team-a:x","zz":1}]`,
		`[{"jobId":"team-a:x","jobId":"team-a:y"}]`, `[{"jobId":"team-a:held","token":-1}]`, `[{"jobId":"team-a:held","token":1.5}]`,
		`[{"jobId":"team-a:x","tick":"10000-01-01T00:00:00Z"}]`, `[{"jobId":"team-a:x","tick":"2026-11-30T07:00:00Z","nearestTick":true}]`,
		`[{"jobId":"team-a:x","ttlMs":0,"owner":"\u0000"}]`, `[{"jobId":"team-a:x","group":"team-b.g"}]`,
		`[{"jobId":"team-a:x"},{"jobId":"team-a:x"}]`, `[` + strings.Repeat(`{"jobId":"team-a:x"},`, 1000) + `{"jobId":"team-a:y"}]`,
		`[{"jobId":"` + strings.Repeat("a", 129) + `"}]`, `[[]]`,
	}
	// urlValues replace a URL field.
	urlValues = []string{
		`"http://127.0.0.1/x"`, `"http://[::1]/x"`, `"http://2130706433/x"`, `"http://0x7f.1/x"`, `"http://10.0.0.1/x"`,
		`"http://169.254.169.254/latest"`, `"http://[::ffff:127.0.0.1]/x"`, `"http://[64:ff9b::a00:1]/x"`,
		`"https://example.com:0/x"`, `"https://example.com:65536/x"`, `"ftp://example.com/x"`, `"javascript:alert(1)"`,
		`"https://user:pass@example.com/x"`, `"https:///x"`, `"//example.com"`, `"https://exa mple.com/"`,
		`"http://localhost/x"`, `"http://100.64.0.1/x"`, `"http://192.0.2.1/x"`, `"http://[2001:db8::1]/x"`,
	}
	// pathValues replace a path parameter; they are written as sent.
	pathValues = []string{
		".", "..", "a.b", "a/b", "a%2Fb", "%2e%2e", "%00", "a%00b", "%", "%zz", "%C3%A9", "a%20b",
		"team-b:x", "team-a:..", "-lead", "*", strings.Repeat("a", 129), strings.Repeat("a", 5000),
		"team-a:" + strings.Repeat("b", 121), "%E2%80%AE", "team-a%3Aheld", "lk_abcdefghijkl", "wh_", "0",
	}
	// queryValues replace a query parameter's value; written as sent.
	queryValues = []string{
		"", "-1", "0", "1", "1000", "1001", "9223372036854775808", "NaN", "1e3", "+1", "true", "TRUE",
		"%00", "%C3%A9", strings.Repeat("q", 5000), "held,held", "a%26b%3Dc", "team-a:",
		base64.RawURLEncoding.EncodeToString([]byte("team-b:x")), base64.RawURLEncoding.EncodeToString(bytes.Repeat([]byte("j"), 10<<10)),
		"====", base64.RawURLEncoding.EncodeToString([]byte("-1.1")), base64.RawURLEncoding.EncodeToString([]byte("253402300800000000.1")),
	}
	// idempotencyKeys are the Idempotency-Key variants; written as sent.
	idempotencyKeys = []string{
		"", "k", `"k"`, `"unterminated`, strings.Repeat("k", 256), strings.Repeat("k", 257), strings.Repeat("k", 8000),
		"a b", "a,b", "\xc3\xa9", ":cmF3:", "k\t", "?1", "1",
	}
)

// valuesFor are the hostile values of a body field.
func valuesFor(key string) []string {
	vals := slices.Clone(anyValues)
	switch key {
	case "tick":
		vals = append(vals, timeValues...)
	case "schedule":
		vals = append(vals, scheduleValues...)
	case "jobs", "scopes", "events":
		vals = append(vals, arrayValues...)
	case "items":
		vals = append(vals, itemValues...)
	case "url":
		vals = append(vals, urlValues...)
	case "ttlMs", "graceMs", "catchUpWindowMs", "minIntervalMs", "token", "ratePerSecond", "limit":
		vals = append(vals, `999`, `3600001`, `86400001`, `2678400001`, `1e-300`, `0.0001`, `1000000000000`)
	case "role", "outcome", "format", "catchUp":
		vals = append(vals, `"admin"`, `"ADMIN"`, `"running"`, `"expired"`, `"slack"`, `"latest"`, `"none "`)
	}
	return vals
}

// variants generates the cases of op.
func (e *routesEnv) variants(op operation) []hostileCase {
	job := baseJob(op)
	pathOf := func(jobID string) func(e *routesEnv) string {
		return func(e *routesEnv) string {
			if strings.Contains(op.path, "{jobId}") && jobID == "" {
				e.fresh++
				return e.basePath(op, fmt.Sprintf("team-a:v%d", e.fresh))
			}
			return e.basePath(op, jobID)
		}
	}
	var fields []field
	if op.hasBody {
		fields = e.baseBody(op)
	}
	base := hostileCase{op: op, pathFn: pathOf(job), noBody: !op.hasBody, fresh: job == "" && strings.Contains(op.path, "{jobId}")}
	if op.hasBody {
		base.body, base.contentType = renderBody(fields), "application/json"
	}
	var out []hostileCase
	add := func(variant string, mod func(c *hostileCase)) {
		c := base
		c.variant = variant
		c.header = http.Header{}
		mod(&c)
		out = append(out, c)
	}
	for _, cred := range []string{"admin", "lease", "read"} {
		add("valid as "+cred, func(c *hostileCase) { c.forceCred = cred })
	}

	// The body: each field, then the whole.
	if op.hasBody {
		for i, f := range fields {
			add("body without "+f.key, func(c *hostileCase) {
				c.body = renderBody(slices.Delete(slices.Clone(fields), i, i+1))
			})
			for _, v := range valuesFor(f.key) {
				add(fmt.Sprintf("body %s=%.40s", f.key, v), func(c *hostileCase) {
					fs := slices.Clone(fields)
					fs[i].raw = v
					c.body = renderBody(fs)
				})
			}
			add("body duplicate "+f.key, func(c *hostileCase) { c.body = renderBody(append(slices.Clone(fields), f)) })
			add("body escaped key "+f.key, func(c *hostileCase) {
				fs := slices.Clone(fields)
				fs[i].key = "\x00" // placeholder, replaced below
				c.body = strings.Replace(renderBody(fs), `"\u0000"`, fmt.Sprintf(`"\u%04x%s"`, f.key[0], f.key[1:]), 1)
			})
			add("body key case "+f.key, func(c *hostileCase) {
				fs := slices.Clone(fields)
				fs[i].key = strings.ToUpper(f.key[:1]) + f.key[1:]
				c.body = renderBody(fs)
			})
		}
		rendered := renderBody(fields)
		for name, body := range map[string]string{
			"extra field": renderBody(append(slices.Clone(fields), field{"zz", "1"})),
			"empty":       "", "null": "null", "array": "[" + rendered + "]", "string": `"x"`, "number": "1",
			"two objects": rendered + rendered, "truncated": rendered[:len(rendered)-1], "bom": "\ufeff" + rendered,
			"deep array": deepArray, "deep object": deepObject, "padded 70 KiB": rendered + strings.Repeat(" ", 70<<10),
			"nul after": rendered + "\x00", "invalid utf-8": strings.Replace(rendered, "{", "{\"\xff\":1,", 1),
			"empty object": "{}",
		} {
			add("body "+name, func(c *hostileCase) { c.body = body })
		}
		for _, ct := range []string{"", "text/plain", "application/json; charset=latin1", "application/x-www-form-urlencoded",
			"application/json, text/plain", "application/jsonx", "APPLICATION/JSON", "application/merge-patch+json", "multipart/form-data; boundary=x"} {
			add("content-type "+ct, func(c *hostileCase) { c.contentType = ct })
		}
		add("content-encoding gzip", func(c *hostileCase) { c.header.Set("Content-Encoding", "gzip") })
	} else {
		add("unexpected body", func(c *hostileCase) { c.noBody, c.body, c.contentType = false, `{"x":1}`, "application/json" })
	}

	// Path parameters.
	if strings.Contains(op.path, "{") {
		for _, v := range pathValues {
			add("path "+clipName(v), func(c *hostileCase) {
				c.pathFn = func(*routesEnv) string {
					p := op.path
					for _, name := range []string{"{jobId}", "{id}", "{asset}", "{name}"} {
						p = strings.ReplaceAll(p, name, v)
					}
					return p
				}
				c.fresh = false
			})
		}
	}

	// Query parameters: each declared one with hostile values and twice,
	// an unknown one, a malformed query.
	for _, q := range op.query {
		for _, v := range queryValues {
			add("query "+q+"="+clipName(v), func(c *hostileCase) { c.pathFn = withQuery(c.pathFn, q+"="+v) })
		}
		add("query "+q+" twice", func(c *hostileCase) { c.pathFn = withQuery(c.pathFn, q+"=1&"+q+"=2") })
	}
	for name, raw := range map[string]string{"unknown": "zz=1", "malformed": "a=%zz", "semicolon": "limit=1;x", "only &": "&&&", "huge": "a=" + strings.Repeat("b", 60<<10)} {
		add("query "+name, func(c *hostileCase) { c.pathFn = withQuery(c.pathFn, raw) })
	}

	// Headers.
	for _, k := range idempotencyKeys {
		add("Idempotency-Key "+clipName(k), func(c *hostileCase) { c.header.Set("Idempotency-Key", k) })
	}
	add("Idempotency-Key twice", func(c *hostileCase) { c.header["Idempotency-Key"] = []string{"a", "b"} })
	add("X-Request-Id hostile", func(c *hostileCase) { c.header.Set("X-Request-Id", strings.Repeat("r", 500)+"\xff") })
	add("Accept odd", func(c *hostileCase) { c.header.Set("Accept", "application/xml;q=2, */*;q=-1") })
	return out
}

func withQuery(pathFn func(*routesEnv) string, raw string) func(*routesEnv) string {
	return func(e *routesEnv) string {
		p := pathFn(e)
		if strings.Contains(p, "?") {
			return p + "&" + raw
		}
		return p + "?" + raw
	}
}

func clipName(s string) string {
	if len(s) > 24 {
		return fmt.Sprintf("%.16s…(%d)", s, len(s))
	}
	return strconv.Quote(s)
}

// rawRequest writes one HTTP/1.1 request with Connection: close.
func rawRequest(method, target, body, contentType string, header http.Header) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: leaseapi\r\nConnection: close\r\n", method, target)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range header {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range keys {
		for _, v := range header[k] {
			fmt.Fprintf(&b, "%s: %s\r\n", k, v)
		}
	}
	if contentType != "" {
		fmt.Fprintf(&b, "Content-Type: %s\r\n", contentType)
	}
	if body != "" || method == http.MethodPost {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n")
	b.WriteString(body)
	return b.String()
}

// routesResponse is one answer.
type routesResponse struct {
	status int
	header http.Header
	body   []byte
}

func (r routesResponse) String() string {
	return fmt.Sprintf("%d %.300s", r.status, r.body)
}

// roundTrip sends raw on a new connection and reads the answer.
func (e *routesEnv) roundTrip(raw string) (routesResponse, error) {
	conn, err := net.DialTimeout("tcp", e.addr, waitTimeout)
	if err != nil {
		return routesResponse{}, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(waitTimeout))
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.WriteString(conn, raw) })
	defer wg.Wait()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return routesResponse{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return routesResponse{}, err
	}
	return routesResponse{status: resp.StatusCode, header: resp.Header, body: body}, nil
}

// send sends case c and checks its answer.
func (e *routesEnv) send(c hostileCase, i int) {
	target := c.pathFn(e)
	header := c.header.Clone()
	header.Set("Authorization", "Bearer "+e.creds[c.cred])
	key := fmt.Sprintf("%s %s %s", c.op.method, c.op.path, c.variant)
	if header.Get("X-Request-Id") == "" {
		// So that what the server logs for it names the case.
		id := "hostile-" + strconv.Itoa(i)
		header.Set("X-Request-Id", id)
		e.requests[id] = key
	}
	ct := c.contentType
	body := c.body
	if c.noBody {
		body, ct = "", ""
	}
	raw := rawRequest(c.op.method, target, body, ct, header)
	if c.fresh {
		if id, ok := jobOfTarget(target); ok {
			e.createdBy[id] = key
		}
	}
	resp, err := e.roundTrip(raw)
	if err != nil {
		e.fail(key, "request %d (as %s) got no answer: %v", i, c.cred, err)
		return
	}
	e.statuses[resp.status]++
	if resp.status >= 500 {
		e.fail(key, "as %s: %s", c.cred, resp)
		return
	}
	if strings.HasPrefix(c.variant, "valid as admin") && resp.status/100 != 2 && !slices.Contains([]int{302, 404, 409}, resp.status) {
		e.fail(key, "the valid request as admin: %s", resp)
	}
	if err := e.validate(raw, resp); err != nil {
		e.fail(key, "as %s: answer not in the spec: %v\n%s", c.cred, err, resp)
	}
}

// jobOfTarget is the job id of a /leases/{jobId}/acquire target.
func jobOfTarget(target string) (string, bool) {
	rest, ok := strings.CutPrefix(target, "/leases/")
	if !ok {
		return "", false
	}
	id, _, ok := strings.Cut(rest, "/")
	return id, ok
}

// validate checks resp against the spec, for the request as the server
// parsed it.
func (e *routesEnv) validate(raw string, resp routesResponse) error {
	head, _, _ := strings.Cut(raw, "\r\n\r\n")
	if len(head) > maxHeaderBytes && resp.status == http.StatusRequestHeaderFieldsTooLarge &&
		strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") {
		return nil // net/http's own refusal of a head over the server's limit
	}
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		// net/http refuses the request itself, before any handler: its
		// plain 400 (or 431 for huge headers), which no spec describes.
		if (resp.status == http.StatusBadRequest || resp.status == http.StatusRequestHeaderFieldsTooLarge) &&
			strings.HasPrefix(resp.header.Get("Content-Type"), "text/plain") {
			return nil
		}
		return fmt.Errorf("net/http cannot parse the request (%v), yet the answer is not its plain 400", err)
	}
	req.Body = http.NoBody
	vreq := req.Clone(context.Background())
	vreq.URL.Scheme, vreq.URL.Host = "", ""
	if vreq.URL.Path == "/ui/" {
		vreq.URL.Path, vreq.URL.RawPath = "/ui/index.html", ""
	}
	route, params, err := e.router.FindRoute(vreq)
	if err != nil {
		if !slices.Contains([]int{400, 404, 405}, resp.status) {
			return fmt.Errorf("status %d for a request with no operation in the spec (%v)", resp.status, err)
		}
		return e.strict.ValidateJSON(apitest.SchemaPointer("Problem"), resp.body)
	}
	opts := &openapi3filter.Options{
		IncludeResponseStatus: true,
		AuthenticationFunc:    func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: vreq, PathParams: params, Route: route, Options: opts},
		Status:                 resp.status,
		Header:                 resp.header,
		Options:                opts,
	}
	in.SetBodyBytes(resp.body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return err
	}
	return e.strict.ValidateResponse(route.Path, req.Method, resp.status, resp.header, resp.body)
}

// checkLog fails on any panic or internal error the server logged.
func (e *routesEnv) checkLog() {
	sc := bufio.NewScanner(strings.NewReader(e.srv.logs.String()))
	sc.Buffer(nil, 4<<20)
	for sc.Scan() {
		line := sc.Text()
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			e.fail("log", "a log line is not JSON: %.300s", line)
			continue
		}
		msg, _ := rec["msg"].(string)
		if rec["level"] == "ERROR" || strings.Contains(strings.ToLower(msg), "panic") {
			id, _ := rec["request_id"].(string)
			key, ok := e.requests[id]
			if !ok {
				key = "log " + msg
			}
			e.fail(key, "the server logged: %.300s", line)
		}
	}
}

// checkClients lists every lease with every client, reads each back, and
// fails on any value a client cannot represent.
func (e *routesEnv) checkClients() {
	t := e.t
	ids := e.checkGoClient()
	if len(ids) == 0 {
		t.Fatal("the Go client listed no lease")
	}
	e.checkLeasectl(ids)
	e.checkPython(ids)
}

// storedKey names the variant that stored job id's lease.
func (e *routesEnv) storedKey(id string) string {
	if v, ok := e.createdBy[id]; ok {
		return "stored " + v
	}
	return "stored " + id
}

// checkGoClient lists every lease with the generated client, gets each, and
// returns the ids.
func (e *routesEnv) checkGoClient() []string {
	t := e.t
	c, err := apiclient.NewClientWithResponses(e.srv.url, apiclient.WithBearerToken(routesAdminToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	var ids []string
	params := &apiclient.ListLeasesParams{}
	for range 1000 {
		resp, err := c.ListLeasesWithResponse(ctx, params)
		if err != nil || resp.JSON200 == nil {
			e.fail("Go client list", "%v %v", err, resp)
			// The page as JSON, lease by lease, to name what it cannot read.
			if resp != nil {
				var page struct {
					Leases     []json.RawMessage `json:"leases"`
					NextCursor *string           `json:"nextCursor"`
				}
				if json.Unmarshal(resp.Body, &page) == nil {
					for _, raw := range page.Leases {
						var l struct {
							JobID string `json:"jobId"`
						}
						_ = json.Unmarshal(raw, &l)
						ids = append(ids, l.JobID)
						var cl apiclient.Lease
						if err := json.Unmarshal(raw, &cl); err != nil {
							e.fail(e.storedKey(l.JobID), "the Go client cannot read the lease: %v", err)
						}
					}
					if page.NextCursor != nil {
						params.Cursor = page.NextCursor
						continue
					}
				}
			}
			break
		}
		for _, l := range resp.JSON200.Leases {
			ids = append(ids, l.JobId)
		}
		if resp.JSON200.NextCursor == nil {
			break
		}
		params.Cursor = resp.JSON200.NextCursor
	}
	for _, id := range ids {
		resp, err := c.GetLeaseWithResponse(ctx, id)
		if err != nil || resp.JSON200 == nil {
			e.fail(e.storedKey(id), "the Go client cannot get the lease: %v %v", err, resp)
		}
	}
	return ids
}

// buildLeasectl builds leasectl into the test's directory.
func buildLeasectl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "leasectl")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "../leasectl").CombinedOutput(); err != nil {
		t.Fatalf("go build leasectl: %v\n%s", err, out)
	}
	return bin
}

func (e *routesEnv) checkLeasectl(ids []string) {
	t := e.t
	bin := buildLeasectl(t)
	run := func(args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = append(os.Environ(), "LEASEAPI_URL="+e.srv.url, "LEASEAPI_TOKEN="+routesAdminToken)
		return cmd.CombinedOutput()
	}
	out, err := run("ls")
	if err != nil {
		e.fail("leasectl ls", "%v\n%.2000s", err, out)
	} else {
		for _, id := range ids {
			if !bytes.Contains(out, []byte(id+" ")) {
				e.fail(e.storedKey(id), "leasectl ls does not list it")
			}
		}
	}
	for _, id := range ids {
		if out, err := run("get", id); err != nil {
			e.fail(e.storedKey(id), "leasectl get: %v\n%.500s", err, out)
		}
	}
}

// pythonLister lists every lease with the Python client, gets each, and
// prints {"ids": [...], "errors": {jobId: [message]}}: a field the client
// could not read is an error of its lease (field_errors), never the list's.
const pythonLister = `
import json, sys
sys.path.insert(0, sys.argv[1])
import leaseapi
c = leaseapi.Client(sys.argv[2], token=sys.argv[3], retry_for=0)
ids, errors = [], {}
for lease in c.leases(page_size=1000):
    ids.append(lease.job_id)
    for k, v in lease.field_errors.items():
        errors.setdefault(lease.job_id, []).append("list: %s: %s" % (k, v))
    got = c.get(lease.job_id)
    for k, v in got.field_errors.items():
        errors.setdefault(lease.job_id, []).append("get: %s: %s" % (k, v))
print(json.dumps({"ids": ids, "errors": errors}))
`

func (e *routesEnv) checkPython(ids []string) {
	t := e.t
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatal("python3 is needed for the Python client's check: ", err)
	}
	pkg, err := filepath.Abs("../../clients/python")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), waitTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, "-c", pythonLister, pkg, e.srv.url, routesAdminToken)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.fail("python client list", "%v\n%.3000s", err, stderr.String())
		return
	}
	var got struct {
		IDs    []string            `json:"ids"`
		Errors map[string][]string `json:"errors"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		e.fail("python client list", "%v: %.500s", err, out)
		return
	}
	if !slices.Equal(got.IDs, ids) {
		e.fail("python client list", "listed %d leases, the Go client %d", len(got.IDs), len(ids))
	}
	for _, id := range slices.Sorted(func(yield func(string) bool) {
		for id := range got.Errors {
			if !yield(id) {
				return
			}
		}
	}) {
		e.fail(e.storedKey(id), "the Python client cannot represent: %s", strings.Join(got.Errors[id], "; "))
	}
}
