package main

import (
	"context"
	"flag"
	"time"

	"github.com/distlock/distlock"
)

// demoWorkerCommand is one worker process of the demo, started by demo
// itself; it is not listed in the help. It reads the Redis URL from
// $REDIS_URL, so that a password does not show on its command line.
var demoWorkerCommand = &command{
	name:     "demo-worker",
	synopsis: "[flags]",
	summary:  "one worker of the demo (started by distlock demo)",
	doc:      "Demo-worker is one worker process of distlock demo, which starts it.\n",
	hidden:   true,
	setup: func(fs *flag.FlagSet) func(commandLine) error {
		rf := addStoreFlags(fs)
		var w demoWorker
		fs.StringVar(&w.run, "run", "", "`ID` of the demo run")
		fs.StringVar(&w.lock, "lock", "", "`NAME` of the lock")
		fs.IntVar(&w.id, "id", 0, "worker `NUMBER`, from 1")
		fs.DurationVar(&w.pause, "pause", 0, "`DURATION` between reading and writing the stock")
		fs.BoolVar(&w.unsafe, "unsafe", false, "sell without the lock")
		return func(line commandLine) error {
			if len(line.args) != 0 || w.run == "" || w.lock == "" || w.id < 1 {
				return usageErrorf("demo-worker is started by distlock demo")
			}
			return w.work(rf)
		}
	},
}

// A demoWorker sells items of the demo's shop until it is sold out.
type demoWorker struct {
	run, lock string
	id        int
	pause     time.Duration
	unsafe    bool
}

func (w *demoWorker) work(rf *storeFlags) error {
	ctx := context.Background()
	s, err := newSession(rf)
	if err != nil {
		return err
	}
	defer s.Close()
	shop := newShop(s.rdb, w.run)
	if err := shop.workerReady(ctx, w.id); err != nil {
		return s.failure(err)
	}
	m := s.client.Mutex(w.lock)
	for {
		more, err := w.sellOne(ctx, m, shop)
		if err != nil {
			return s.failure(err)
		}
		if !more {
			return nil
		}
		// Take the next order: without this pause, the worker that just
		// released the lock would nearly always take it again first.
		time.Sleep(w.pause)
	}
}

// sellOne sells one item, under the lock unless w.unsafe, with a write
// fenced by the lock's token. It reports false when the stock is sold out.
func (w *demoWorker) sellOne(ctx context.Context, m *distlock.Mutex, shop *shop) (bool, error) {
	if w.unsafe {
		return shop.sell(ctx, w.id, 0, w.pause)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		return false, err
	}
	more, err := shop.sell(lease.Context(), w.id, lease.Token(), w.pause)
	if uerr := lease.Unlock(ctx); err == nil {
		err = uerr
	}
	return more, err
}
