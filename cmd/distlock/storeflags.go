package main

import (
	"flag"
	"os"
	"strings"

	"github.com/distlock/distlock/etcdstore"
	"github.com/distlock/distlock/redisstore"
)

// storeEnv is the environment variable that names the store when no flag
// does, before $REDIS_URL.
const storeEnv = "DISTLOCK_STORE"

// storeFlags are the flags that say which store and which locks to use:
// --store (any store), --redis (Redis only, its older name), --redlock,
// --prefix and the TLS files.
type storeFlags struct {
	store     string   // --store
	url       string   // --redis
	masters   []string // --redlock, each time it is given
	prefix    string   // --prefix, else redisstore.DefaultPrefix
	prefixSet bool     // --prefix was given
	tls       tlsFiles
}

// addStoreFlags defines --store, --redis, --redlock, --prefix and the
// TLS flags on fs.
func addStoreFlags(fs *flag.FlagSet) *storeFlags {
	rf := &storeFlags{prefix: redisstore.DefaultPrefix}
	fs.StringVar(&rf.store, "store", "",
		"store `URL`: redis[s]://, etcd[s]://, postgres:// or mysql:// (see distlock --help)\n"+
			"(default $"+storeEnv+", else $REDIS_URL, else "+defaultRedisURL+")")
	fs.StringVar(&rf.url, "redis", "",
		"Redis server `URL`: redis://[[USER]:PASSWORD@]HOST[:PORT][/DB], or\n"+
			"rediss:// for TLS (default $REDIS_URL, else "+defaultRedisURL+");\n"+
			"Sentinel: redis://SENTINEL:PORT?master_name=NAME[&addr=HOST:PORT...];\n"+
			"Cluster: redis://NODE:PORT?addr=HOST:PORT[&addr=...] or ...?cluster=true")
	fs.Func("redlock", "`URL` of one of the independent Redis masters of a Redlock quorum, once\n"+
		"per master (an odd number, at least 3); not with --redis or --store", func(u string) error {
		rf.masters = append(rf.masters, u)
		return nil
	})
	fs.Func("prefix", "`PREFIX` of the keys of the locks; all users of a lock must use the\n"+
		"same (default "+redisstore.DefaultPrefix+" on Redis, "+etcdstore.DefaultPrefix+" on etcd; not on SQL)", func(p string) error {
		rf.prefix, rf.prefixSet = p, true
		return nil
	})
	rf.tls.addFlags(fs)
	return rf
}

// A storeURL is the URL of the store to use and where it comes from, for
// messages: "--store", "$DISTLOCK_STORE", "the default URL", ...
type storeURL struct {
	url, from string
	// redisOnly is set for --redis and $REDIS_URL, which name a Redis.
	redisOnly bool
	// given is unset for the default URL, which nobody asked for.
	given bool
}

// resolvedURL is the store to use: --store or --redis, else
// $DISTLOCK_STORE, else $REDIS_URL, else the default. The flags exclude
// each other; an environment variable is used only when no flag names a
// store, and $DISTLOCK_STORE, distlock's own, wins over $REDIS_URL,
// which other programs use too. It is not used with --redlock.
func (rf *storeFlags) resolvedURL() (storeURL, error) {
	switch {
	case rf.store != "" && rf.url != "":
		return storeURL{}, usageErrorf("--store and --redis exclude each other: give the store once, with --store URL (--redis URL is the same for a Redis URL)")
	case rf.store != "":
		return storeURL{url: rf.store, from: "--store", given: true}, nil
	case rf.url != "":
		return storeURL{url: rf.url, from: "--redis", redisOnly: true, given: true}, nil
	}
	if u := os.Getenv(storeEnv); u != "" {
		return storeURL{url: u, from: "$" + storeEnv, given: true}, nil
	}
	if u := os.Getenv("REDIS_URL"); u != "" {
		return storeURL{url: u, from: "$REDIS_URL", redisOnly: true, given: true}, nil
	}
	return storeURL{url: defaultRedisURL, from: "the default URL", redisOnly: true}, nil
}

// scheme is the URL's scheme, in lower case.
func (u storeURL) scheme() string {
	scheme, _, _ := strings.Cut(u.url, "://")
	return strings.ToLower(scheme)
}

// isEtcd reports whether the URL names an etcd cluster (etcd:// or
// etcds://), by its scheme alone.
func (u storeURL) isEtcd() bool {
	return u.scheme() == etcdScheme || u.scheme() == etcdTLSScheme
}

// isSQL reports whether the URL names a SQL database (postgres://,
// postgresql:// or mysql://), by its scheme alone.
func (u storeURL) isSQL() bool { return isSQLScheme(u.scheme()) }
