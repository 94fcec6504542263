//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/leaseapi/leaseapi/api"
	"github.com/leaseapi/leaseapi/internal/checker"
	"github.com/leaseapi/leaseapi/webhook"
)

// receiver is the chaos run's webhook endpoint: it checks every message's
// signature with the webhook's secret (webhook.Verify), records what it
// accepted for I12, and refuses the first attempt of a seeded share of the
// events with a 503, so that the service's retries are exercised too.
type receiver struct {
	srv *http.Server
	ln  net.Listener
	// refuse is the share of events whose first attempt is answered 503.
	refuse float64

	mu         sync.Mutex
	secret     string
	rng        *rand.Rand
	seen       map[string]bool // webhook-ids that reached it at least once
	deliveries []checker.Delivery
	refused    int
}

// maxWebhookBody bounds what the receiver reads of one message.
const maxWebhookBody = 1 << 20

// startReceiver listens on a free loopback port.
func startReceiver(seed uint64, refuse float64) (*receiver, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("webhook receiver: %w", err)
	}
	rv := &receiver{ln: ln, refuse: refuse, rng: rand.New(rand.NewPCG(seed, 0x77656268)), seen: make(map[string]bool)}
	rv.srv = &http.Server{Handler: rv, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = rv.srv.Serve(ln) }()
	return rv, nil
}

// URL is where the webhook is registered.
func (rv *receiver) URL() string { return "http://" + rv.ln.Addr().String() + "/hook" }

// setSecret gives the receiver the secret POST /webhooks answered with.
func (rv *receiver) setSecret(s string) {
	rv.mu.Lock()
	rv.secret = s
	rv.mu.Unlock()
}

func (rv *receiver) close() { _ = rv.srv.Close() }

// webhookBody is the part of a standard-format body the checker needs.
type webhookBody struct {
	Type string `json:"type"`
	Data struct {
		JobID string `json:"jobId"`
		Run   *struct {
			Token   *int64  `json:"token"`
			Tick    *string `json:"tick"`
			Outcome string  `json:"outcome"`
		} `json:"run"`
	} `json:"data"`
}

// parseDelivery reads the run an event names from its body.
func parseDelivery(id string, body []byte, at time.Time) (checker.Delivery, error) {
	var b webhookBody
	if err := json.Unmarshal(body, &b); err != nil {
		return checker.Delivery{}, fmt.Errorf("webhook body of %s: %w", id, err)
	}
	d := checker.Delivery{ID: id, Type: b.Type, Job: b.Data.JobID, At: at}
	if b.Type == "" || d.Job == "" || b.Data.Run == nil {
		return d, errors.New("webhook body of " + id + " lacks type, data.jobId or data.run")
	}
	d.Outcome = b.Data.Run.Outcome
	if b.Data.Run.Token != nil {
		d.Token = *b.Data.Run.Token
	}
	if b.Data.Run.Tick != nil {
		t, err := api.ParseTime(*b.Data.Run.Tick)
		if err != nil {
			return d, fmt.Errorf("webhook body of %s: tick: %w", id, err)
		}
		d.Tick = t
	}
	return d, nil
}

func (rv *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxWebhookBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	id := r.Header.Get("webhook-id")
	rv.mu.Lock()
	defer rv.mu.Unlock()
	verified := rv.secret != "" &&
		webhook.Verify(rv.secret, id, r.Header.Get("webhook-timestamp"), r.Header.Get("webhook-signature"), body) == nil
	d, perr := parseDelivery(id, body, at)
	d.Verified = verified
	if !verified {
		// Recorded: I12 flags a message signed with anything but the secret.
		rv.deliveries = append(rv.deliveries, d)
		http.Error(w, "signature does not verify", http.StatusUnauthorized)
		return
	}
	if perr != nil {
		http.Error(w, perr.Error(), http.StatusBadRequest)
		return
	}
	first := !rv.seen[id]
	rv.seen[id] = true
	if first && rv.rng.Float64() < rv.refuse {
		rv.refused++
		http.Error(w, "refused once on purpose", http.StatusServiceUnavailable)
		return
	}
	rv.deliveries = append(rv.deliveries, d)
	w.WriteHeader(http.StatusNoContent)
}

// accepted returns a copy of what the receiver recorded, and how many
// first attempts it refused on purpose.
func (rv *receiver) accepted() ([]checker.Delivery, int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return append([]checker.Delivery(nil), rv.deliveries...), rv.refused
}

// TestReceiver: the receiver accepts what webhook.Deliver signs with the
// secret and records the run it names, refuses a first attempt when told
// to (the retry is then accepted), and records a message signed with
// another secret as unverified, answering 401.
func TestReceiver(t *testing.T) {
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	rv, err := startReceiver(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rv.close()
	rv.setSecret(secret)
	client := webhook.NewClient(true)
	tick := time.Date(2026, 12, 2, 15, 0, 2, 0, time.UTC)
	data := func(token string, outcome string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"jobId":"job-03","run":{"token":%s,"owner":null,"tick":%q,"outcome":%q},"lease":{}}`,
			token, api.FormatTime(tick), outcome))
	}
	send := func(secret string, m webhook.Message) webhook.Result {
		return webhook.Deliver(context.Background(), client, rv.URL(), secret, webhook.FormatStandard, "", m, time.Now())
	}
	if res := send(secret, webhook.Message{ID: "msg_a", Type: webhook.RunFailed, Timestamp: time.Now(), Data: data("7", "failed")}); !res.Delivered {
		t.Fatalf("signed delivery refused: %+v", res)
	}
	if res := send(secret, webhook.Message{ID: "msg_b", Type: webhook.RunMissed, Timestamp: time.Now(), Data: data("null", "missed")}); !res.Delivered {
		t.Fatalf("signed delivery refused: %+v", res)
	}
	other, _ := webhook.NewSecret()
	if res := send(other, webhook.Message{ID: "msg_c", Type: webhook.RunFailed, Timestamp: time.Now(), Data: data("8", "failed")}); res.Delivered || res.Status != http.StatusUnauthorized {
		t.Fatalf("delivery signed with another secret: %+v, want 401", res)
	}
	got, refused := rv.accepted()
	want := []checker.Delivery{
		{ID: "msg_a", Type: "run.failed", Job: "job-03", Token: 7, Tick: tick, Outcome: "failed", Verified: true},
		{ID: "msg_b", Type: "run.missed", Job: "job-03", Tick: tick, Outcome: "missed", Verified: true},
		{ID: "msg_c", Type: "run.failed", Job: "job-03", Token: 8, Tick: tick, Outcome: "failed"},
	}
	if len(got) != len(want) || refused != 0 {
		t.Fatalf("recorded %d deliveries (%d refused), want %d: %+v", len(got), refused, len(want), got)
	}
	for i := range want {
		g := got[i]
		g.At = time.Time{}
		if g != want[i] {
			t.Errorf("delivery %d: got %+v, want %+v", i, g, want[i])
		}
	}

	// Refusing every first attempt: the first is a 503, its retry (the
	// same webhook-id) is accepted.
	rv2, err := startReceiver(1, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rv2.close()
	rv2.setSecret(secret)
	m := webhook.Message{ID: "msg_d", Type: webhook.RunExpired, Timestamp: time.Now(), Data: data("9", "expired")}
	first := webhook.Deliver(context.Background(), client, rv2.URL(), secret, webhook.FormatStandard, "", m, time.Now())
	retry := webhook.Deliver(context.Background(), client, rv2.URL(), secret, webhook.FormatStandard, "", m, time.Now())
	if first.Status != http.StatusServiceUnavailable || !retry.Delivered {
		t.Fatalf("first attempt %+v (want 503), retry %+v (want delivered)", first, retry)
	}
	if got, refused := rv2.accepted(); len(got) != 1 || refused != 1 || got[0].Token != 9 || got[0].Type != "run.expired" {
		t.Fatalf("after a refused first attempt: %+v, %d refused; want the retry alone, 1 refused", got, refused)
	}
}
