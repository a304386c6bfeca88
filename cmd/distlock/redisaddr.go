package main

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// checkAddr checks an address HOST[:PORT] of a Redis URL (its host, or
// an addr parameter): HOST is a name, an IPv4 address or an IPv6 address
// in brackets, and PORT, if there is a colon, is a number from 1 to
// 65535. go-redis dials a missing or malformed host as the local one
// (redis://::: connects to [::]:6379), which would lock on the wrong
// server without a word.
func checkAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	var aerr *net.AddrError
	switch {
	case err == nil:
		if n, perr := strconv.Atoi(port); perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("address %q: the port must be a number from 1 to 65535", addr)
		}
	case errors.As(err, &aerr) && aerr.Err == "missing port in address":
		host = addr
	case strings.Count(addr, ":") > 1 && !strings.HasPrefix(addr, "["):
		return fmt.Errorf("address %q: an IPv6 address goes in brackets, as in [::1]:6379", addr)
	default:
		return fmt.Errorf("address %q: want HOST or HOST:PORT", addr)
	}
	if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1] // net.SplitHostPort took them off if there was a port
	}
	switch {
	case host == "":
		return fmt.Errorf("address %q: missing host", addr)
	case strings.Contains(host, ":"):
		if ip := net.ParseIP(host); ip == nil {
			return fmt.Errorf("address %q: %q is not an IPv6 address", addr, host)
		}
	case strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != "":
		return fmt.Errorf("address %q: the host must be a name or an IP address", addr)
	}
	return nil
}

// ordinal spells n as an ordinal number: 1st, 2nd, 3rd, 4th, ... 11th,
// 12th, 13th, ..., 21st.
func ordinal(n int) string {
	suffix := "th"
	switch {
	case n%100 >= 11 && n%100 <= 13:
	case n%10 == 1:
		suffix = "st"
	case n%10 == 2:
		suffix = "nd"
	case n%10 == 3:
		suffix = "rd"
	}
	return strconv.Itoa(n) + suffix
}
