package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// A shop is the state the demo's workers share in Redis: a stock of items
// sold one at a time, the list of sales, and a fence, the highest fencing
// token the shop has accepted a write from.
type shop struct {
	rdb redis.UniversalClient
	// Keys.
	stock, sales, fence string
	ready, start        string // the workers' starting line
}

// newShop returns the shop of the demo run run.
func newShop(rdb redis.UniversalClient, run string) *shop {
	k := "distlock-demo:{" + run + "}:" // one hash slot: the shop's transactions span its keys
	return &shop{rdb: rdb, stock: k + "stock", sales: k + "sales", fence: k + "fence", ready: k + "ready", start: k + "start"}
}

// open sets the stock to n and forgets earlier sales.
func (s *shop) open(ctx context.Context, n int) error {
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Del(ctx, s.sales, s.fence, s.ready, s.start)
		p.Set(ctx, s.stock, n, 0)
		return nil
	})
	return err
}

// close deletes the shop's keys.
func (s *shop) close(ctx context.Context) error {
	return s.rdb.Del(ctx, s.stock, s.sales, s.fence, s.ready, s.start).Err()
}

// sell sells one item for worker, the way a naive program does: it reads
// the stock, pauses (standing for the work between reading and writing),
// then writes the stock minus one and records the sale. This
// read-modify-write is not atomic: two workers that read the same stock
// both sell. With a token (not 0), the write is fenced: the shop refuses it
// if it has seen a higher token. sell reports false when the stock is
// sold out.
func (s *shop) sell(ctx context.Context, worker int, token uint64, pause time.Duration) (bool, error) {
	n, err := s.rdb.Get(ctx, s.stock).Int()
	if err != nil {
		return false, err
	}
	if n <= 0 {
		return false, nil
	}
	time.Sleep(pause)
	write := func(p redis.Pipeliner) {
		p.Set(ctx, s.stock, n-1, 0)
		p.RPush(ctx, s.sales, fmt.Sprintf("%d %d", worker, token))
	}
	if token == 0 {
		_, err = s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error { write(p); return nil })
		return true, err
	}
	return true, s.fencedWrite(ctx, token, write)
}

// errStaleToken is the shop refusing a write whose fencing token is lower
// than one it has already accepted.
type errStaleToken struct{ token, seen uint64 }

func (e *errStaleToken) Error() string {
	return fmt.Sprintf("stale fencing token %d: the shop has seen %d", e.token, e.seen)
}

// fencedWrite applies write, and records token as the highest seen, in one
// transaction, unless the shop has seen a token higher than token. It
// uses WATCH on the fence, so that a concurrent write with a higher token
// cannot slip between the check and the write.
func (s *shop) fencedWrite(ctx context.Context, token uint64, write func(redis.Pipeliner)) error {
	for {
		err := s.rdb.Watch(ctx, func(tx *redis.Tx) error {
			seen, err := tx.Get(ctx, s.fence).Uint64()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			if token < seen {
				return &errStaleToken{token, seen}
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, s.fence, token, 0)
				write(p)
				return nil
			})
			return err
		}, s.fence)
		if !errors.Is(err, redis.TxFailedErr) {
			return err
		}
		// The fence moved between WATCH and EXEC: check again.
	}
}

// report returns the number of sales, the sales of each worker
// (1-based), and the stock left.
func (s *shop) report(ctx context.Context, workers int) (sold int, per []int, left int, err error) {
	sales, err := s.rdb.LRange(ctx, s.sales, 0, -1).Result()
	if err != nil {
		return 0, nil, 0, err
	}
	per = make([]int, workers+1)
	for _, sale := range sales {
		var w int
		var tok uint64
		if _, err := fmt.Sscan(sale, &w, &tok); err == nil && w >= 1 && w <= workers {
			per[w]++
		}
	}
	left, err = s.rdb.Get(ctx, s.stock).Int()
	return len(sales), per[1:], left, err
}

// workerReady tells the demo that a worker is connected and waits for the
// start signal.
func (s *shop) workerReady(ctx context.Context, worker int) error {
	if err := s.rdb.RPush(ctx, s.ready, strconv.Itoa(worker)).Err(); err != nil {
		return err
	}
	return s.await(ctx, s.start)
}

// await pops one element of the list key, waiting for it in short BLPOPs
// so that ctx is honoured.
func (s *shop) await(ctx context.Context, key string) error {
	for {
		err := s.rdb.BLPop(ctx, time.Second, key).Err()
		if !errors.Is(err, redis.Nil) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// startWorkers waits until n workers are ready, then lets them all go.
func (s *shop) startWorkers(ctx context.Context, n int) error {
	for range n {
		if err := s.await(ctx, s.ready); err != nil {
			return err
		}
	}
	args := make([]any, n)
	for i := range args {
		args[i] = "go"
	}
	return s.rdb.RPush(ctx, s.start, args...).Err()
}
