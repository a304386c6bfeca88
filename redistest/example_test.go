package redistest_test

import (
	"context"
	"fmt"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/distlock/distlock/redistest"
)

// This example starts a server outside a test, talks to it with go-redis and
// stops it.
func Example() {
	srv, err := redistest.NewServer()
	if err != nil {
		log.Fatal(err)
	}
	defer srv.Stop()

	rdb := redis.NewClient(srv.Options())
	defer rdb.Close()

	pong, err := rdb.Ping(context.Background()).Result()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(pong)
	// Output: PONG
}
