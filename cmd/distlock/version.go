package main

import "runtime/debug"

// version is the version of distlock, set when building a release:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/distlock
var version = "dev"

// versionString is version or, for a "dev" build installed with
// "go install module@version", the version of the module.
func versionString() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return version
}
