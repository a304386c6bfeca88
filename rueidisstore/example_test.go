package rueidisstore_test

import (
	"context"
	"fmt"
	"log"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redistest"
	"github.com/distlock/distlock/rueidisstore"
	"github.com/redis/rueidis"
)

func ExampleNew() {
	srv, err := redistest.NewServer() // a throwaway redis-server; yours in your code
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	client, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.Addr()}})
	if err != nil {
		log.Fatal(err)
	}
	defer client.Close() // after the distlock Client: deferred first, runs last

	locks := distlock.New(rueidisstore.New(client)) // one per process
	defer locks.Close()

	ctx := context.Background()
	lease, err := locks.Mutex("nightly-report").Lock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("held; fencing token above zero:", lease.Token() > 0)
	// Output: held; fencing token above zero: true
}
