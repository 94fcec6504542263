package repo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/leaseapi/leaseapi"
)

// TickSweeperConfig configures a TickSweeper.
type TickSweeperConfig struct {
	// Interval is the time between passes (default 10 s): a tick is decided
	// at most about this long after its grace ended, and a grant past its
	// expiresAt is counted as expired as late.
	Interval time.Duration
	// BatchSize bounds the jobs one SweepTicks call decides (default
	// DefaultSweepBatch). The Postgres store writes a batch's decisions with
	// one statement, which holds the rows of the batch locked while it
	// runs: larger batches spread the few statements of a call over more
	// jobs, smaller ones hold fewer rows for less time.
	BatchSize int
}

func (c *TickSweeperConfig) setDefaults() {
	if c.Interval == 0 {
		c.Interval = 10 * time.Second
	}
	if c.BatchSize == 0 {
		c.BatchSize = DefaultSweepBatch
	}
}

// Validate reports a configuration the sweeper cannot run with.
func (c *TickSweeperConfig) Validate() error {
	if c.Interval <= 0 {
		return fmt.Errorf("tick sweeper: interval %s must be positive", c.Interval)
	}
	if c.BatchSize <= 0 {
		return fmt.Errorf("tick sweeper: batch size %d must be positive", c.BatchSize)
	}
	return nil
}

// DefaultSweepBatch is TickSweeperConfig.BatchSize's default. A call costs
// five or six statements whatever its size, plus its rows' work; measured
// (docs/performance.md, The tick sweep), 500 jobs a call decide about as
// many ticks per second as 1,000 and twice as many as 100, and hold half
// as many rows locked as 1,000 while their decisions are written.
const DefaultSweepBatch = 500

// TickSweeper decides the fate of every due tick of the scheduled jobs and
// counts the grants that passed their expiresAt unreleased, on an interval
// (leaseapi.Store.SweepTicks). Every leaseapi instance may run one: the
// store decides each tick once however many sweep.
type TickSweeper struct {
	store  leaseapi.Store
	cfg    TickSweeperConfig
	logger *slog.Logger
}

// maxSweepsPerPass bounds one pass; what is left waits for the next one.
const maxSweepsPerPass = 1000

// NewTickSweeper returns a sweeper over store; zero config fields get defaults.
func NewTickSweeper(store leaseapi.Store, cfg TickSweeperConfig, logger *slog.Logger) (*TickSweeper, error) {
	cfg.setDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &TickSweeper{store: store, cfg: cfg, logger: logger}, nil
}

// Run sweeps once now and then every interval until ctx is cancelled.
func (s *TickSweeper) Run(ctx context.Context) {
	every(ctx, s.cfg.Interval, func(ctx context.Context) {
		res, err := s.runOnce(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			s.logger.WarnContext(ctx, "sweeping ticks failed", slog.Any("error", err))
		case res.Missed > 0 || res.Expirations > 0 || res.Unclaimed > 0:
			s.logger.InfoContext(ctx, "swept ticks", slog.Int("jobs", res.Jobs),
				slog.Int64("missed", res.Missed), slog.Int64("skipped", res.Skipped),
				slog.Int64("expirations", res.Expirations), slog.Int64("unclaimed", res.Unclaimed))
		}
	})
}

// runOnce sweeps batches until no due work is left, and returns the sum.
func (s *TickSweeper) runOnce(ctx context.Context) (leaseapi.SweepResult, error) {
	var total leaseapi.SweepResult
	for range maxSweepsPerPass {
		batchCtx, cancel := context.WithTimeout(ctx, passTimeout)
		res, err := s.store.SweepTicks(batchCtx, s.cfg.BatchSize)
		cancel()
		more := res.More
		res.More = false
		total.Add(res)
		if err != nil {
			if errors.Is(err, context.Canceled) && ctx.Err() != nil {
				return total, nil
			}
			return total, err
		}
		if !more {
			return total, nil
		}
	}
	total.More = true
	return total, nil
}
