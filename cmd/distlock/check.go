package main

import "github.com/distlock/distlock"

// checkMutex returns the configuration error of m (an invalid name, key
// prefix or TTL) without contacting Redis, so that bad input is reported
// as such even when Redis is unreachable.
func checkMutex(m *distlock.Mutex) error { return m.Err() }

// checkClient returns the configuration error of c (an invalid key
// prefix) without contacting Redis.
func checkClient(c *distlock.Client) error { return c.Err() }
