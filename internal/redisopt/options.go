// Package redisopt holds the options of distlock's Redis stores, which
// every Redis client's store (redisstore for go-redis, rueidisstore for
// rueidis) takes alike, and the store of a constructor that was given
// invalid ones.
package redisopt

import (
	"fmt"
	"os"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/distlock/distlock/internal/redisbackend"
	"github.com/distlock/distlock/store"
)

// Defaults.
const (
	DefaultPrefix         = "distlock:"
	DefaultFenceRetention = time.Hour
)

// MaxReplicaTimeout is the longest wait ReplicaAck accepts.
const MaxReplicaTimeout = 2 * time.Second

// Options is what the options set.
type Options struct {
	Prefix         string
	FenceRetention time.Duration
	Replicas       int
	ReplicaTimeout time.Duration
	// Err is the first invalid option's error.
	Err error
}

// An Option sets Options.
type Option func(*Options)

// Apply returns the defaults as opts change them.
func Apply(opts []Option) Options {
	o := Options{Prefix: DefaultPrefix, FenceRetention: DefaultFenceRetention}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// Fail records err, unless an error was recorded before.
func (o *Options) Fail(err error) {
	if o.Err == nil {
		o.Err = err
	}
}

// Backend configures a Redis backend after o, for this process.
func (o *Options) Backend() redisbackend.Config {
	host, _ := os.Hostname()
	return redisbackend.Config{
		Keys:           redisbackend.Keys{Prefix: o.Prefix},
		FenceRetention: o.FenceRetention,
		Host:           host,
		PID:            os.Getpid(),
		Replicas:       o.Replicas,
		ReplicaTimeout: o.ReplicaTimeout,
	}
}

// Prefix sets the prefix of every key and channel.
func Prefix(prefix string) Option {
	return func(o *Options) {
		if problem := prefixProblem(prefix); problem != "" {
			o.Fail(fmt.Errorf("%w: prefix %q: %s", store.ErrInvalidOption, prefix, problem))
		}
		o.Prefix = prefix
	}
}

// prefixProblem says what is wrong with p as a key prefix, or returns "".
// The lock name is the Cluster hash tag of every key of a lock: a brace in
// the prefix would change which part of the key is hashed.
func prefixProblem(p string) string {
	switch {
	case len(p) > 512:
		return fmt.Sprintf("%d bytes, more than 512", len(p))
	case !utf8.ValidString(p):
		return "not UTF-8"
	case strings.ContainsAny(p, "{}"):
		return "contains a brace"
	case strings.ContainsFunc(p, unicode.IsControl):
		return "contains a control character"
	}
	return ""
}

// FenceRetention sets how long a fencing counter outlives the last
// acquisition of its lock.
func FenceRetention(d time.Duration) Option {
	return func(o *Options) {
		if d < time.Second || d > 365*24*time.Hour {
			o.Fail(fmt.Errorf("%w: fence retention %v outside [1s, 365d]", store.ErrInvalidOption, d))
		}
		o.FenceRetention = d
	}
}

// ReplicaAck makes acquisitions and renewals count once replicas
// replicas acknowledged them within timeout.
func ReplicaAck(replicas int, timeout time.Duration) Option {
	return func(o *Options) {
		if replicas < 1 || replicas > 64 {
			o.Fail(fmt.Errorf("%w: replica acknowledgement by %d replicas, outside [1, 64]", store.ErrInvalidOption, replicas))
			return
		}
		if timeout < time.Millisecond || timeout > MaxReplicaTimeout {
			o.Fail(fmt.Errorf("%w: replica acknowledgement timeout %v outside [1ms, %v]", store.ErrInvalidOption, timeout, MaxReplicaTimeout))
			return
		}
		o.Replicas, o.ReplicaTimeout = replicas, timeout
	}
}
