package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaseapi/leaseapi"
)

// RunPrunerConfig configures a RunPruner.
type RunPrunerConfig struct {
	// Retention is how long finished runs are kept (default 7 days).
	Retention time.Duration
	// Interval is the time between passes (default 1 minute).
	Interval time.Duration
	// BatchSize bounds the rows one statement deletes (default 1000), so a
	// pass never holds locks on many rows or runs into statement_timeout.
	BatchSize int
}

func (c *RunPrunerConfig) setDefaults() {
	if c.Retention == 0 {
		c.Retention = 7 * 24 * time.Hour
	}
	if c.Interval == 0 {
		c.Interval = time.Minute
	}
	if c.BatchSize == 0 {
		c.BatchSize = 1000
	}
}

// Validate reports a configuration the pruner cannot run with.
func (c *RunPrunerConfig) Validate() error {
	if c.Retention <= 0 {
		return fmt.Errorf("run pruner: retention %s must be positive", c.Retention)
	}
	if c.Interval <= 0 {
		return fmt.Errorf("run pruner: interval %s must be positive", c.Interval)
	}
	if c.BatchSize <= 0 {
		return fmt.Errorf("run pruner: batch size %d must be positive", c.BatchSize)
	}
	return nil
}

// RunPruner deletes run history older than the retention, and the
// Idempotency-Keys older than leaseapi.IdempotencyTTL, in batches, on an
// interval. Each pass is idempotent and skips rows another instance is
// deleting, so every leaseapi instance may run one.
type RunPruner struct {
	store  leaseapi.Store
	cfg    RunPrunerConfig
	logger *slog.Logger
}

// maxBatchesPerPass bounds one pass; what is left waits for the next one.
const maxBatchesPerPass = 100

// passTimeout bounds one batch statement.
const passTimeout = 10 * time.Second

// NewRunPruner returns a pruner over store; zero config fields get defaults.
func NewRunPruner(store leaseapi.Store, cfg RunPrunerConfig, logger *slog.Logger) (*RunPruner, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &RunPruner{store: store, cfg: cfg, logger: logger}, nil
}

// Run prunes once now and then every interval until ctx is cancelled.
func (p *RunPruner) Run(ctx context.Context) {
	every(ctx, p.cfg.Interval, func(ctx context.Context) {
		deleted, err := p.runOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			p.logger.WarnContext(ctx, "pruning run history failed", slog.Any("error", err))
		case deleted > 0:
			p.logger.InfoContext(ctx, "pruned run history", slog.Int64("deleted", deleted),
				slog.Duration("retention", p.cfg.Retention))
		}
	})
}

// every runs pass now and then every interval until ctx is cancelled: the
// shape of the background loops, each of them safe on every instance.
func every(ctx context.Context, interval time.Duration, pass func(context.Context)) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		pass(ctx)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// runOnce deletes batches until one comes back short, and returns how many
// runs it deleted.
func (p *RunPruner) runOnce(ctx context.Context) (int64, error) {
	var total int64
	for range maxBatchesPerPass {
		batchCtx, cancel := context.WithTimeout(ctx, passTimeout)
		n, err := p.store.PruneRuns(batchCtx, p.cfg.Retention, p.cfg.BatchSize)
		cancel()
		total += n
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return total, nil
			}
			return total, err
		}
		if n < int64(p.cfg.BatchSize) {
			break
		}
	}
	keys, err := p.pruneIdempotencyKeys(ctx)
	if keys > 0 {
		p.logger.InfoContext(ctx, "pruned idempotency keys", slog.Int64("deleted", keys), slog.Duration("ttl", leaseapi.IdempotencyTTL))
	}
	return total, err
}

// pruneIdempotencyKeys deletes the Idempotency-Keys older than
// leaseapi.IdempotencyTTL, in batches, when the store keeps them.
func (p *RunPruner) pruneIdempotencyKeys(ctx context.Context) (int64, error) {
	is, ok := p.store.(leaseapi.IdempotencyStore)
	if !ok {
		return 0, nil
	}
	var total int64
	for range maxBatchesPerPass {
		batchCtx, cancel := context.WithTimeout(ctx, passTimeout)
		n, err := is.PruneIdempotencyKeys(batchCtx, p.cfg.BatchSize)
		cancel()
		total += n
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return total, nil
			}
			return total, err
		}
		if n < int64(p.cfg.BatchSize) {
			break
		}
	}
	return total, nil
}
