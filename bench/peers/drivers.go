package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
)

// locker is one client on a lock of its own.
type locker interface {
	// cycle acquires the lock and releases it.
	cycle(ctx context.Context) error
	close() error
}

// cycleTimeout bounds one cycle.
const cycleTimeout = 10 * time.Second

// etcdLocker is one etcd client with a session (a lease kept alive in the
// background) and a concurrency.Mutex on /lock/<i>, as the official
// client's recipe has it.
type etcdLocker struct {
	cli     *clientv3.Client
	session *concurrency.Session
	mutex   *concurrency.Mutex
}

// etcdSessionTTL is the session's lease TTL in seconds: the lock's
// lifetime when its holder dies, as Redis's PX 30000.
const etcdSessionTTL = 30

func newEtcdLocker(ctx context.Context, endpoint string, i int) (*etcdLocker, error) {
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
	})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, cycleTimeout)
	defer cancel()
	session, err := concurrency.NewSession(cli, concurrency.WithTTL(etcdSessionTTL), concurrency.WithContext(context.WithoutCancel(ctx)))
	if err != nil {
		return nil, errors.Join(fmt.Errorf("etcd session: %w", err), cli.Close())
	}
	return &etcdLocker{cli: cli, session: session, mutex: concurrency.NewMutex(session, fmt.Sprintf("/lock/%d", i))}, nil
}

func (l *etcdLocker) cycle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cycleTimeout)
	defer cancel()
	if err := l.mutex.Lock(ctx); err != nil {
		return fmt.Errorf("etcd lock: %w", err)
	}
	if err := l.mutex.Unlock(ctx); err != nil {
		return fmt.Errorf("etcd unlock: %w", err)
	}
	return nil
}

func (l *etcdLocker) close() error {
	return errors.Join(l.session.Close(), l.cli.Close())
}

// redisLocker is one Redis connection; the lock is the key lock:<i>
// holding a token that is new for every grant.
type redisLocker struct {
	c      *redis.Client
	key    string
	prefix string
	n      int64
}

// redisLockTTL is the lock's lifetime when its holder dies.
const redisLockTTL = 30 * time.Second

// compareAndDelete deletes the key only if it still holds the caller's
// token: a holder whose lock expired and was granted to another must not
// release the other's grant.
var compareAndDelete = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

func newRedisLocker(ctx context.Context, endpoint string, i int) (*redisLocker, error) {
	c := redis.NewClient(&redis.Options{
		Addr:         endpoint,
		PoolSize:     1, // one connection per client, as leaseapi's clients have one each
		MinIdleConns: 1,
		DialTimeout:  5 * time.Second,
		MaxRetries:   -1, // a failed command is an error of the run, not retried silently
	})
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	l := &redisLocker{c: c, key: fmt.Sprintf("lock:%d", i), prefix: fmt.Sprintf("%d-%s-", i, hex.EncodeToString(nonce[:]))}
	ctx, cancel := context.WithTimeout(ctx, cycleTimeout)
	defer cancel()
	// Loaded once, so that every release is an EVALSHA.
	if err := compareAndDelete.Load(ctx, c).Err(); err != nil {
		return nil, errors.Join(fmt.Errorf("redis script load: %w", err), c.Close())
	}
	return l, nil
}

// tryAcquire is SET key token NX PX 30000: granted unless the key exists.
func (l *redisLocker) tryAcquire(ctx context.Context, token string) (bool, error) {
	err := l.c.Do(ctx, "SET", l.key, token, "NX", "PX", redisLockTTL.Milliseconds()).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	}
	return false, fmt.Errorf("redis set nx: %w", err)
}

// release runs the compare-and-delete script by EVALSHA: true if the key
// held token and is deleted.
func (l *redisLocker) release(ctx context.Context, token string) (bool, error) {
	n, err := compareAndDelete.EvalSha(ctx, l.c, []string{l.key}, token).Int()
	if err != nil {
		return false, fmt.Errorf("redis compare-and-delete: %w", err)
	}
	return n == 1, nil
}

func (l *redisLocker) cycle(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, cycleTimeout)
	defer cancel()
	l.n++
	token := fmt.Sprintf("%s%d", l.prefix, l.n)
	// With a lock of its own the first SET is always granted; a refusal
	// (a release that did not reach the server) is retried until the key
	// expires or the cycle's deadline.
	for {
		ok, err := l.tryAcquire(ctx, token)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redis set nx: not granted: %w", ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
	released, err := l.release(ctx, token)
	if err != nil {
		return err
	}
	if !released {
		return errors.New("redis compare-and-delete: the key did not hold this grant's token")
	}
	return nil
}

func (l *redisLocker) close() error { return l.c.Close() }
