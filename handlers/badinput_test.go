package handlers_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/leaseapi/leaseapi/api"
)

// badCase is one hostile or malformed request that must be refused with a
// 4xx problem without reaching the store.
type badCase struct {
	name string
	req  request
	// status and code expected; detail, when set, must appear in the detail
	// (the field to change).
	status int
	code   string
	detail string
	// specAllows marks a request the OpenAPI document cannot refuse by
	// itself (configured TTL bounds, body size, duplicate keys, repeated
	// query parameters, integers written as floats...): the spec describes
	// these rules in prose. Every other bad request must also fail the
	// spec's request validation, so the spec and the handlers agree.
	specAllows bool
}

func post(path, body string) request {
	return request{method: http.MethodPost, path: path, body: body}
}

func withHeader(r request, key, value string) request {
	h := http.Header{}
	for k, vs := range r.header {
		h[k] = vs
	}
	h.Set(key, value)
	r.header = h
	return r
}

// badCases targets fresh (a job that does not exist: reaching the store
// would create it) and held (held by owner "a" with token 1 for an hour:
// reaching the store would move its expiresAt or release it).
func badCases(fresh, held string) []badCase {
	acq := "/leases/" + fresh + "/acquire"
	hb := "/leases/" + held + "/heartbeat"
	rel := "/leases/" + held + "/release"
	invalid := func(name string, req request, detail string) badCase {
		return badCase{name: name, req: req, status: 400, code: api.CodeInvalidRequest, detail: detail}
	}
	invalidSpecAllows := func(name string, req request, detail string) badCase {
		c := invalid(name, req, detail)
		c.specAllows = true
		return c
	}
	jobPath := func(id string) string { return "/leases/" + id + "/acquire" }
	owner := func(o string) string { return `{"owner":"` + o + `"}` }
	cases := []badCase{
		// jobId values (path).
		invalid("JobID129", post(jobPath(strings.Repeat("j", 129)), `{"owner":"a"}`), "jobId"),
		invalid("JobID10000", post(jobPath(strings.Repeat("j", 10000)), `{"owner":"a"}`), "jobId"),
		invalid("JobIDNUL", post(jobPath("a%00b"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDCRLF", post(jobPath("a%0D%0Ab"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDTab", post(jobPath("a%09b"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDLeadingSpace", post(jobPath("%20a"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDTrailingSpace", post(jobPath("a%20"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDDotDotEscapedSlash", post(jobPath("..%2Fx"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDDoubleEscapedSlash", post(jobPath("a%2F%2Fb"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDEscapedSlash", post(jobPath("%2F"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDDotDot", post(jobPath(".."), `{"owner":"a"}`), "jobId"),
		invalid("JobIDCyrillic", post(jobPath("%D0%B0"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDRTLOverride", post(jobPath("a%E2%80%AEb"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDEmoji", post(jobPath("%F0%9F%98%80"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDSQLOr", post(jobPath("'%20OR%201=1--"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDSQLDrop", post(jobPath("x')%3B%20DROP%20TABLE%20leases%3B--"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDDollar", post(jobPath("$1"), `{"owner":"a"}`), "jobId"),
		invalid("JobIDGet", request{method: http.MethodGet, path: "/leases/a%2Fb"}, "jobId"),
		invalid("JobIDDelete", request{method: http.MethodDelete, path: "/leases/%00"}, "jobId"),
		invalid("JobIDRuns", request{method: http.MethodGet, path: "/leases/%20/runs"}, "jobId"),
		invalid("JobIDEmpty", post("/leases//acquire", `{"owner":"a"}`), "jobId"),
		{name: "PathDotDot", req: post("/leases/../x/acquire", `{"owner":"a"}`), status: 404, code: api.CodeNotFound},

		// owner values (body).
		invalid("OwnerMissing", post(acq, `{}`), "owner"),
		invalid("OwnerEmpty", post(acq, owner("")), "owner"),
		invalid("Owner129", post(acq, owner(strings.Repeat("o", 129))), "owner"),
		invalid("Owner10000", post(acq, owner(strings.Repeat("o", 10000))), "owner"),
		invalid("OwnerNUL", post(acq, owner(`a\u0000b`)), "owner"),
		invalid("OwnerCRLF", post(acq, owner(`a\r\nb`)), "owner"),
		invalid("OwnerTab", post(acq, owner(`a\tb`)), "owner"),
		invalid("OwnerLeadingSpace", post(acq, owner(" a")), "owner"),
		invalid("OwnerTrailingSpace", post(acq, owner("a ")), "owner"),
		invalid("OwnerCyrillic", post(acq, owner("а")), "owner"),
		invalid("OwnerRTLOverride", post(acq, owner(`a\u202eb`)), "owner"),
		invalid("OwnerEmoji", post(acq, owner("😀")), "owner"),
		invalid("OwnerSQLOr", post(acq, owner("' OR 1=1--")), "owner"),
		invalid("OwnerSQLDrop", post(acq, owner("x'); DROP TABLE leases;--")), "owner"),
		invalid("OwnerNumber", post(acq, `{"owner":7}`), "owner"),
		invalid("OwnerNull", post(acq, `{"owner":null}`), "owner"),
		invalid("HeartbeatOwnerEmpty", post(hb, `{"owner":"","token":1}`), "owner"),
		invalid("ReleaseOwnerSpace", post(rel, `{"owner":"a b","token":1}`), "owner"),

		// ttlMs (configured bounds 1000..3600000).
		invalid("TTLZero", post(acq, `{"owner":"a","ttlMs":0}`), "ttlMs"),
		invalid("TTLNegative", post(acq, `{"owner":"a","ttlMs":-1}`), "ttlMs"),
		invalidSpecAllows("TTLBelowMin", post(acq, `{"owner":"a","ttlMs":999}`), "1000 to 3600000"),
		invalidSpecAllows("TTLAboveMax", post(acq, `{"owner":"a","ttlMs":3600001}`), "1000 to 3600000"),
		invalidSpecAllows("TTLHuge", post(acq, `{"owner":"a","ttlMs":1e18}`), "ttlMs"),
		invalidSpecAllows("TTLExponent", post(acq, `{"owner":"a","ttlMs":3e4}`), "ttlMs"),
		invalid("TTLFloat", post(acq, `{"owner":"a","ttlMs":1500.5}`), "ttlMs"),
		invalid("TTLString", post(acq, `{"owner":"a","ttlMs":"30000"}`), "ttlMs"),
		invalid("TTLDurationString", post(acq, `{"owner":"a","ttlMs":"10s"}`), "ttlMs"),
		invalid("TTLNull", post(acq, `{"owner":"a","ttlMs":null}`), "ttlMs"),
		invalid("TTLOverflow", post(acq, `{"owner":"a","ttlMs":99999999999999999999}`), "ttlMs"),
		invalid("HeartbeatTTLZero", post(hb, `{"owner":"a","token":1,"ttlMs":0}`), "ttlMs"),
		invalidSpecAllows("HeartbeatTTLAboveMax", post(hb, `{"owner":"a","token":1,"ttlMs":3600001}`), "ttlMs"),

		// tick.
		invalid("TickNotRFC3339", post(acq, `{"owner":"a","tick":"2026-11-30 07:00:00"}`), "tick"),
		invalid("TickDate", post(acq, `{"owner":"a","tick":"2026-11-30"}`), "tick"),
		invalid("TickNumber", post(acq, `{"owner":"a","tick":1764486000}`), "tick"),
		invalid("TickEmpty", post(acq, `{"owner":"a","tick":""}`), "tick"),
		invalid("TickNull", post(acq, `{"owner":"a","tick":null}`), "tick"),
		// RFC 3339, but in UTC outside the four-digit years a lease can show
		// (found by FuzzAcquireBody: the lease was stored and unreadable).
		invalidSpecAllows("TickUTCYearMinus1", post(acq, `{"owner":"a","tick":"0000-01-01T00:00:00+01:00"}`), "tick"),
		invalidSpecAllows("TickUTCYear10000", post(acq, `{"owner":"a","tick":"9999-12-31T23:59:59.999-01:00"}`), "tick"),
		// Year 0000 is RFC 3339, but many clients (Python's datetime)
		// cannot represent it: a stored one broke every list of the job.
		invalidSpecAllows("TickYear0", post(acq, `{"owner":"a","tick":"0000-06-01T00:00:00Z"}`), "tick must be a time from year 0001 to 9999"),

		// minIntervalMs (0 to 31 days).
		invalid("MinIntervalNegative", post(acq, `{"owner":"a","minIntervalMs":-1}`), "minIntervalMs"),
		invalid("MinIntervalAboveMax", post(acq, `{"owner":"a","minIntervalMs":2678400001}`), "minIntervalMs must be an integer from 0"),
		invalid("MinIntervalFloat", post(acq, `{"owner":"a","minIntervalMs":1.5}`), "minIntervalMs"),
		invalid("MinIntervalString", post(acq, `{"owner":"a","minIntervalMs":"60000"}`), "minIntervalMs"),
		invalid("MinIntervalNull", post(acq, `{"owner":"a","minIntervalMs":null}`), "minIntervalMs"),
		invalid("MinIntervalOverflow", post(acq, `{"owner":"a","minIntervalMs":99999999999999999999}`), "minIntervalMs"),

		// nearestTick.
		invalidSpecAllows("NearestTickWithTick", post(acq, `{"owner":"a","nearestTick":true,"tick":"2026-11-30T07:00:00Z","schedule":"@hourly"}`),
			"nearestTick cannot be sent with tick"),
		invalidSpecAllows("NearestTickWithoutSchedule", post(jobPath("nearest-unscheduled"), `{"owner":"a","nearestTick":true}`),
			"nearestTick needs the job's schedule"),
		invalid("NearestTickString", post(acq, `{"owner":"a","nearestTick":"true"}`), "nearestTick"),
		invalid("NearestTickNumber", post(acq, `{"owner":"a","nearestTick":1}`), "nearestTick"),
		invalid("NearestTickNull", post(acq, `{"owner":"a","nearestTick":null}`), "nearestTick"),

		// token.
		invalid("TokenMissing", post(hb, `{"owner":"a"}`), "token"),
		invalid("TokenZero", post(hb, `{"owner":"a","token":0}`), "token"),
		invalid("TokenNegative", post(hb, `{"owner":"a","token":-1}`), "token"),
		invalidSpecAllows("TokenOverflow", post(hb, `{"owner":"a","token":9223372036854775808}`), "token"),
		invalid("TokenString", post(hb, `{"owner":"a","token":"1"}`), "token"),
		invalid("TokenFloat", post(hb, `{"owner":"a","token":1.5}`), "token"),
		invalidSpecAllows("TokenOneAsFloat", post(hb, `{"owner":"a","token":1.0}`), "token"),
		invalid("TokenLeadingZero", post(hb, `{"owner":"a","token":01}`), "JSON"),
		invalid("TokenNull", post(hb, `{"owner":"a","token":null}`), "token"),
		invalid("ReleaseTokenMissing", post(rel, `{"owner":"a"}`), "token"),

		// outcome.
		invalid("OutcomeExpired", post(rel, `{"owner":"a","token":1,"outcome":"expired"}`), "outcome"),
		invalid("OutcomeRunning", post(rel, `{"owner":"a","token":1,"outcome":"running"}`), "outcome"),
		invalid("OutcomeEmpty", post(rel, `{"owner":"a","token":1,"outcome":""}`), "outcome"),
		invalid("OutcomeUpper", post(rel, `{"owner":"a","token":1,"outcome":"SUCCEEDED"}`), "outcome"),
		invalidSpecAllows("OutcomeNull", post(rel, `{"owner":"a","token":1,"outcome":null}`), "outcome"),

		// JSON framing.
		invalid("Malformed", post(acq, `{"owner":`), "JSON"),
		invalid("MalformedQuote", post(acq, `{'owner':'a'}`), "JSON"),
		invalid("EmptyBody", request{method: http.MethodPost, path: acq, header: http.Header{"Content-Type": {"application/json"}}}, "empty"),
		invalid("WhitespaceBody", post(acq, " \n\t "), "empty"),
		invalid("Null", post(acq, `null`), "object"),
		invalid("Array", post(acq, `[{"owner":"a"}]`), "object"),
		invalid("String", post(acq, `"owner"`), "object"),
		invalid("Number", post(acq, `42`), "object"),
		invalidSpecAllows("DuplicateKey", post(acq, `{"owner":"a","owner":"b"}`), `"owner" appears more than once`),
		invalidSpecAllows("DuplicateTTL", post(acq, `{"owner":"a","ttlMs":1000,"ttlMs":999999999}`), `"ttlMs" appears more than once`),
		invalidSpecAllows("DuplicateToken", post(hb, `{"owner":"a","token":2,"token":1}`), `"token" appears more than once`),
		invalid("UnknownField", post(acq, `{"owner":"a","ttl":1000}`), `"ttl"`),
		invalid("UnknownFieldCase", post(acq, `{"Owner":"a"}`), `"Owner"`),
		invalid("UnknownFieldNested", post(acq, `{"owner":"a","x":{"y":1}}`), `"x"`),
		invalid("DeeplyNested", post(acq, `{"owner":`+strings.Repeat("[", 60000)), "JSON"),
		invalidSpecAllows("TrailingGarbage", post(acq, `{"owner":"a"} x`), "after the JSON object"),
		invalidSpecAllows("TrailingObject", post(acq, `{"owner":"a"}{"owner":"b"}`), "after the JSON object"),
		invalid("TrailingComma", post(acq, `{"owner":"a",}`), "JSON"),

		// Sizes.
		{name: "BodyJustTooLarge", req: post(acq, `{"owner":"a"}`+strings.Repeat(" ", api.MaxBodyBytes-12)),
			status: 413, code: api.CodePayloadTooLarge, specAllows: true},
		{name: "NestedTooLarge", req: post(acq, `{"owner":`+strings.Repeat("[", 100000)),
			status: 413, code: api.CodePayloadTooLarge, specAllows: true},

		// Media type and encoding.
		{name: "ContentTypeText", req: withHeader(post(acq, `{"owner":"a"}`), "Content-Type", "text/plain"),
			status: 415, code: api.CodeUnsupportedMediaType},
		{name: "ContentTypeAbsent", req: withHeader(post(acq, `{"owner":"a"}`), "Content-Type", ""),
			status: 415, code: api.CodeUnsupportedMediaType},
		{name: "ContentTypeJSONX", req: withHeader(post(acq, `{"owner":"a"}`), "Content-Type", "application/jsonx"),
			status: 415, code: api.CodeUnsupportedMediaType},
		{name: "ContentTypeForm", req: withHeader(post(hb, `owner=a&token=1`), "Content-Type", "application/x-www-form-urlencoded"),
			status: 415, code: api.CodeUnsupportedMediaType},
		{name: "ContentTypeBroken", req: withHeader(post(acq, `{"owner":"a"}`), "Content-Type", "application/json; charset"),
			status: 415, code: api.CodeUnsupportedMediaType, specAllows: true},
		{name: "ContentEncodingGzip", req: withHeader(post(acq, "\x1f\x8b\x08\x00\x00\x00\x00\x00"), "Content-Encoding", "gzip"),
			status: 415, code: api.CodeUnsupportedMediaType, specAllows: true},

		// Batches: what the whole request gets wrong.
		invalid("BatchTruncated", post("/acquire", `{"owner":"a","items":[{"jobId":"`+fresh+`"}`), "JSON"),
		invalid("BatchUnknownField", post("/acquire", `{"owner":"a","item":[{"jobId":"`+fresh+`"}]}`), `"item"`),
		invalid("BatchItemUnknownField", post("/acquire", `{"owner":"a","items":[{"jobId":"`+fresh+`","ownr":"a"}]}`), `items[0]`),
		invalid("BatchItemTokenString", post("/heartbeat", `{"owner":"a","items":[{"jobId":"`+held+`","token":"1"}]}`), `items[0]`),
		invalid("BatchNoItems", post("/acquire", `{"owner":"a","items":[]}`), "items"),
		invalid("BatchItemsNull", post("/heartbeat", `{"owner":"a","items":null}`), "items"),
		invalid("BatchInvalidJobID", post("/heartbeat", `{"owner":"a","items":[{"jobId":"a b","token":1}]}`), "items[0].jobId"),
		invalidSpecAllows("BatchJobTwice", post("/acquire", `{"owner":"a","items":[{"jobId":"`+fresh+`"},{"jobId":"`+fresh+`"}]}`), "items[0] and items[1]"),
		invalidSpecAllows("BatchWithQuery", post("/heartbeat?owner=a", `{"owner":"a","items":[{"jobId":"`+held+`","token":1}]}`), `"owner"`),
		{name: "BatchTooLarge", req: post("/acquire", `{"owner":"a","items":[{"jobId":"`+fresh+`"}]}`+strings.Repeat(" ", api.MaxBatchBodyBytes)),
			status: 413, code: api.CodePayloadTooLarge, specAllows: true},
		{name: "BatchContentTypeText", req: withHeader(post("/heartbeat", `{"owner":"a","items":[{"jobId":"`+held+`","token":1}]}`), "Content-Type", "text/plain"),
			status: 415, code: api.CodeUnsupportedMediaType},

		// Query parameters.
		invalidSpecAllows("AcquireWithQuery", post(acq+"?owner=a", `{"owner":"a"}`), `"owner"`),
		invalid("ListLimitZero", get("/leases?limit=0"), "limit"),
		invalid("ListLimitTooBig", get("/leases?limit=1001"), "limit"),
		invalid("ListLimitNegative", get("/leases?limit=-1"), "limit"),
		invalid("ListLimitWord", get("/leases?limit=ten"), "limit"),
		invalid("ListLimitFloat", get("/leases?limit=1.5"), "limit"),
		invalid("ListLimitEmpty", get("/leases?limit="), "limit"),
		invalidSpecAllows("ListLimitPlus", get("/leases?limit=%2B5"), "limit"),
		invalidSpecAllows("ListLimitTwice", get("/leases?limit=1&limit=2"), "limit"),
		invalid("ListStateUnknown", get("/leases?state=running"), "state"),
		invalid("ListStateEmpty", get("/leases?state="), "state"),
		invalid("ListOwnerEmpty", get("/leases?owner="), "owner"),
		invalid("ListOwnerSpace", get("/leases?owner=a%20b"), "owner"),
		invalid("ListPrefixSlash", get("/leases?prefix=a%2Fb"), "prefix"),
		invalid("ListPrefixPercent", get("/leases?prefix=%25"), "prefix"),
		invalid("ListPrefix129", get("/leases?prefix="+strings.Repeat("p", 129)), "prefix"),
		invalid("ListCursorGarbage", get("/leases?cursor=!!!"), "cursor"),
		invalid("ListCursorPadded", get("/leases?cursor=YQ=="), "cursor"),
		invalidSpecAllows("ListCursorInvalidJobID", get("/leases?cursor=Li4"), "cursor"), // ".."
		invalidSpecAllows("ListCursorNonCanonical", get("/leases?cursor=YR"), "cursor"),
		invalid("ListCursorEmpty", get("/leases?cursor="), "cursor"),
		invalidSpecAllows("ListUnknownParam", get("/leases?sort=desc"), `"sort"`),
		invalid("RunsLimitZero", get("/leases/"+held+"/runs?limit=0"), "limit"),
		invalid("RunsLimitTooBig", get("/leases/"+held+"/runs?limit=5000"), "limit"),
		invalidSpecAllows("RunsUnknownParam", get("/leases/"+held+"/runs?cursor=YQ"), `"cursor"`),
		invalidSpecAllows("QueryMalformed", get("/leases?limit=%zz"), "query"),
	}
	return cases
}

func get(path string) request { return request{method: http.MethodGet, path: path} }

// TestBadInput: every bad request of badCases gets its 4xx problem
// with a small detail that names what to change and leaks nothing, the
// spec refuses it too (unless the rule is prose only), and the store is
// unchanged afterwards.
func TestBadInput(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		held := b.job("held")
		l := wantLease(t, b.acquire(t, held, api.AcquireRequest{Owner: "a", TTLMs: ptr[int64](3_600_000)}))
		if l.Token != 1 {
			t.Fatalf("setup: token %d, want 1", l.Token)
		}
		before := b.snapshot(t)

		for _, tc := range badCases(b.job("fresh"), held) {
			t.Run(tc.name, func(t *testing.T) {
				if !tc.specAllows {
					req := tc.req.build(t, b.server.URL)
					if _, err := b.contract.validateRequest(req, []byte(tc.req.body)); err == nil {
						t.Errorf("the spec accepts this bad request; tighten openapi.yaml or mark the case specAllows")
					}
				}
				resp := b.doInvalid(t, tc.req)
				p := wantProblem(t, resp, tc.status, tc.code)
				if tc.detail != "" && !strings.Contains(p.Detail, tc.detail) {
					t.Errorf("detail %q does not mention %q", p.Detail, tc.detail)
				}
				if len(resp.body) > 1024 {
					t.Errorf("problem body is %d bytes, want at most 1 KiB", len(resp.body))
				}
				lower := strings.ToLower(string(resp.body))
				for _, leak := range []string{"sql", "pq:", "goroutine", ".go:", "sqlite", "postgres", "runtime."} {
					if strings.Contains(lower, leak) {
						t.Errorf("problem leaks %q: %s", leak, resp.body)
					}
				}
				if after := b.snapshot(t); !after.equal(before) {
					t.Fatalf("the store changed:\nbefore %+v\nafter  %+v", before, after)
				}
			})
		}
	})
}

// blockingBody yields n bytes of a JSON-looking body, then blocks until
// release is closed; it stands for a client still sending a huge body.
type blockingBody struct {
	n       int
	release chan struct{}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if b.n == 0 {
		<-b.release
		return 0, io.ErrUnexpectedEOF
	}
	k := min(len(p), b.n)
	for i := range k {
		p[i] = ' '
	}
	b.n -= k
	return k, nil
}

// TestHugeBody: a 10 MiB body is refused with 413 while the client is still
// sending it, both when Content-Length announces it (refused before reading)
// and when it is chunked (refused after 64 KiB, 1 MiB for a batch).
func TestHugeBody(t *testing.T) {
	t.Parallel()
	forEachStore(t, func(t *testing.T, open openStore) {
		b := setup(t, open(t), defaultOptions())
		for _, tc := range []struct {
			name, path    string
			contentLength int64
		}{
			{"ContentLength", "/leases/" + b.job("huge") + "/acquire", 10 << 20},
			{"Chunked", "/leases/" + b.job("huge") + "/acquire", -1},
			{"BatchContentLength", "/acquire", 10 << 20},
			{"BatchChunked", "/heartbeat", -1},
		} {
			t.Run(tc.name, func(t *testing.T) {
				before := b.snapshot(t)
				// More than any limit, then the client stalls.
				body := &blockingBody{n: 2 << 20, release: make(chan struct{})}
				defer close(body.release)
				req := request{method: http.MethodPost, path: tc.path, bodyReader: body, contentLength: tc.contentLength}
				resp := b.doInvalid(t, req)
				wantProblem(t, resp, http.StatusRequestEntityTooLarge, api.CodePayloadTooLarge)
				if after := b.snapshot(t); !after.equal(before) {
					t.Fatal("the store changed")
				}
			})
		}
	})
}
