package etcdtest_test

import (
	"context"
	"fmt"
	"log"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/distlock/distlock/etcdtest"
)

// This example starts a one-member cluster outside a test, writes and reads
// a key with the etcd client and stops the cluster.
func Example() {
	cl, err := etcdtest.NewCluster(1, "")
	if err != nil {
		log.Fatal(err)
	}
	defer cl.Stop()

	cli, err := clientv3.New(etcdtest.ClientConfig(cl.Endpoints()...))
	if err != nil {
		log.Fatal(err)
	}
	defer cli.Close()

	ctx := context.Background()
	if _, err := cli.Put(ctx, "greeting", "hello"); err != nil {
		log.Fatal(err)
	}
	resp, err := cli.Get(ctx, "greeting")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(resp.Kvs[0].Value))
	// Output: hello
}
