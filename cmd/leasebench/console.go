package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// consoleLeases is the table size of the console scenario.
const consoleLeases = 1_000_000

// consoleRenders is how many lease pages the scenario renders.
const consoleRenders = 30

// ConsoleDetail is the console scenario's own measurements.
type ConsoleDetail struct {
	Leases int `json:"leases"`
	// FirstLoadBytes is the sum of the encoded (on the wire) sizes of every
	// response of the first load of /ui/ with an empty cache, until the
	// overview shows its lease table; FirstLoadResponses counts them.
	FirstLoadBytes     int64 `json:"firstLoadBytes"`
	FirstLoadResponses int   `json:"firstLoadResponses"`
	// Render*: from the hash change to the lease page's rows in the DOM.
	RenderP50Ms float64 `json:"renderP50Ms"`
	RenderMaxMs float64 `json:"renderMaxMs"`
}

// renderScript changes the hash to the lease page of %q and resolves with
// the milliseconds until that page's rows are in the DOM (performance.now
// in the page: the fetch, the JSON decoding and the DOM building).
const renderScript = `new Promise((resolve, reject) => {
  const main = document.getElementById('main');
  const want = %q;
  const t0 = performance.now();
  const done = () => main.getAttribute('aria-busy') === 'false' && location.hash === want &&
    main.querySelector('h1')?.textContent === 'Leases' && main.querySelector('table.leases tbody tr');
  const obs = new MutationObserver(() => {
    if (done()) { obs.disconnect(); resolve(performance.now() - t0); }
  });
  obs.observe(main, { childList: true, subtree: true, attributes: true });
  setTimeout(() => { obs.disconnect(); reject(new Error('no rows after 10 s')); }, 10000);
  location.hash = want;
})`

// console measures the operations console in headless Chromium with a
// million leases: what its first load transfers, and how long a lease page
// takes to render.
func (b *bench) console(ctx context.Context) error {
	path, err := exec.LookPath("chromium")
	if err != nil {
		return errors.New("chromium is not on PATH: run `bash scripts/ensure-packages.sh chromium:chromium` (make bench does)")
	}
	n := consoleLeases
	if b.opts.quick {
		n = 100_000
	}
	if err := b.db.truncate(ctx); err != nil {
		return err
	}
	b.logf("console: seeding %d leases", n)
	if err := b.db.seedLeases(ctx, 0, n); err != nil {
		return err
	}
	b.seq++
	srv, err := startServer(ctx, serverConfig{bin: b.bin, dsn: b.db.dsn, acquireMode: "fast", logLevel: b.opts.logLevel,
		logDir: b.tmp, name: fmt.Sprintf("%02d-console", b.seq), extraEnv: b.opts.serverEnv})
	if err != nil {
		return err
	}
	detail, renders, err := measureConsole(ctx, path, srv.url, b.tmp)
	if serr := srv.stop(); err == nil {
		err = serr
	}
	if err != nil {
		return err
	}
	detail.Leases = n
	slices.Sort(renders)
	var m measurement
	m.ops = int64(len(renders))
	for _, r := range renders {
		m.elapsed += r
	}
	m.p50 = renders[len(renders)/2]
	m.p99 = renders[min(len(renders)-1, len(renders)*99/100)]
	m.max = renders[len(renders)-1]
	m.dbCalls = -1
	row := newRow(fmt.Sprintf("console-%s-leases", sizeName(n)), "browser", "-", 1, m)
	row.Console = &detail
	row.Note = fmt.Sprintf("first load %.1f KB in %d responses; ops are lease pages rendered (hash change to rows in the DOM)",
		float64(detail.FirstLoadBytes)/1000, detail.FirstLoadResponses)
	b.add(row)
	return nil
}

func measureConsole(ctx context.Context, chromium, baseURL, tmp string) (ConsoleDetail, []time.Duration, error) {
	var d ConsoleDetail
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(ctx,
		chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.UserDataDir(tmp+"/chromium-profile"),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true))
	defer cancelAlloc()
	bctx, cancel := chromedp.NewContext(allocCtx)
	defer cancel()
	if err := chromedp.Do(bctx); err != nil {
		return d, nil, fmt.Errorf("start chromium: %w", err)
	}

	// The first load: every response's encoded bytes, from an empty cache.
	var mu sync.Mutex
	var bytes int64
	var responses int
	if err := chromedp.Listen(bctx, func(ev any) {
		if e, ok := ev.(*network.EventLoadingFinished); ok {
			mu.Lock()
			bytes += int64(e.EncodedDataLength)
			responses++
			mu.Unlock()
		}
	}); err != nil {
		return d, nil, err
	}
	if _, err := chromedp.Call(bctx, network.Enable, network.EnableParams{}); err != nil {
		return d, nil, fmt.Errorf("network events: %w", err)
	}
	step, cancelStep := context.WithTimeout(bctx, 60*time.Second)
	err := chromedp.Do(step,
		chromedp.Navigate(baseURL+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`[data-stat="held"]`)),
		chromedp.WaitVisible(chromedp.CSS(`table.leases tbody tr`)))
	cancelStep()
	if err != nil {
		return d, nil, fmt.Errorf("first load of the console: %w", err)
	}
	// Let the last responses' loadingFinished events arrive.
	time.Sleep(500 * time.Millisecond)
	mu.Lock()
	d.FirstLoadBytes, d.FirstLoadResponses = bytes, responses
	mu.Unlock()

	// Lease pages: each render a new route (a prefix of its own), so the
	// console fetches and builds it; the first one is not counted (warm-up).
	var renders []time.Duration
	for i := range consoleRenders + 1 {
		hash := fmt.Sprintf("#/leases?prefix=list-0%02d", i%100)
		step, cancelStep := context.WithTimeout(bctx, 20*time.Second)
		ms, err := chromedp.Run(step, chromedp.Evaluate[float64](fmt.Sprintf(renderScript, hash), chromedp.EvalAwaitPromise))
		cancelStep()
		if err != nil {
			return d, nil, fmt.Errorf("render %s: %w", hash, err)
		}
		if i > 0 {
			renders = append(renders, time.Duration(ms*float64(time.Millisecond)))
		}
	}
	sorted := slices.Clone(renders)
	slices.Sort(sorted)
	d.RenderP50Ms = ms(sorted[len(sorted)/2])
	d.RenderMaxMs = ms(sorted[len(sorted)-1])
	return d, renders, nil
}
