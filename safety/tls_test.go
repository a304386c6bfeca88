//go:build linux

package safety

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distlock/distlock"
	"github.com/distlock/distlock/redisstore"
	"github.com/distlock/distlock/redistest"
	"github.com/redis/go-redis/v9"
)

// A pki is a CA and a server certificate it signed, as PEM files.
type pki struct {
	pool              *x509.CertPool
	caFile, cert, key string
	caCert            *x509.Certificate
	caKey             *ecdsa.PrivateKey
}

func newPKI(t *testing.T, dir, name string) *pki {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " test CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{pool: x509.NewCertPool(), caCert: caCert, caKey: caKey,
		caFile: filepath.Join(dir, name+"-ca.pem"), cert: filepath.Join(dir, name+"-server.pem"), key: filepath.Join(dir, name+"-server.key")}
	p.pool.AddCert(caCert)
	write := func(path, typ string, der []byte) {
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(p.caFile, "CERTIFICATE", caDER)
	write(p.cert, "CERTIFICATE", srvDER)
	write(p.key, "EC PRIVATE KEY", keyDER)
	return p
}

// startTLSRedis starts a TLS-only redis-server (--port 0). redistest cannot:
// it sets --port itself and probes readiness over plain TCP, so a TLS-only
// server never becomes "ready" for it. The process is ours: started on a
// free loopback port, killed with us (Pdeathsig), stopped by pid.
func startTLSRedis(t *testing.T, p *pki, password string) string {
	t.Helper()
	bin, err := redistest.Binary()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	dir := t.TempDir()
	args := []string{"--port", "0", "--tls-port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--tls-cert-file", p.cert, "--tls-key-file", p.key, "--tls-ca-cert-file", p.caFile, "--tls-auth-clients", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no", "--protected-mode", "no",
		"--requirepass", password}
	cmd := exec.Command(bin, args...)
	out, err := os.Create(filepath.Join(dir, "redis.out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// Ready when a verified TLS connection gets PONG.
	deadline := time.Now().Add(10 * time.Second)
	for {
		rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: &tls.Config{RootCAs: p.pool}, MaxRetries: -1, DialTimeout: time.Second})
		err := rdb.Ping(context.Background()).Err()
		rdb.Close()
		if err == nil {
			return addr
		}
		select {
		case <-exited:
			b, _ := os.ReadFile(out.Name())
			t.Fatalf("TLS redis-server exited: %s", b)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("TLS redis-server not ready: %v", err)
		}
	}
}

func tlsLocks(t *testing.T, addr, password string, conf *tls.Config) (*distlock.Client, *redis.Client) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, Password: password, TLSConfig: conf, MaxRetries: -1, DialTimeout: 2 * time.Second})
	t.Cleanup(func() { rdb.Close() })
	c := distlock.New(redisstore.New(rdb), distlock.WithLogger(nil))
	t.Cleanup(func() { c.Close() })
	return c, rdb
}

// With certificate verification on, a valid certificate works (lock,
// re-entry, a waiter woken over the TLS subscription, inspect); a wrong CA,
// a wrong server name, a wrong password or plain TCP fail closed with
// ErrBackend and write nothing.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	good, other := newPKI(t, dir, "good"), newPKI(t, dir, "other")
	const pw = "tls-s3cret"
	addr := startTLSRedis(t, good, pw)
	ctx := testCtx(t)

	t.Run("valid certificate", func(t *testing.T) {
		ev := newEventWaiter()
		c, _ := tlsLocks(t, addr, pw, &tls.Config{RootCAs: good.pool, MinVersion: tls.VersionTLS12})
		wrdb := redis.NewClient(&redis.Options{Addr: addr, Password: pw, TLSConfig: &tls.Config{RootCAs: good.pool, ServerName: "localhost"}})
		defer wrdb.Close()
		w := distlock.New(redisstore.New(wrdb), distlock.WithLogger(nil), distlock.WithEventHandler(ev.handle))
		defer w.Close()
		l, err := c.Mutex("tls", distlock.WithTTL(time.Minute)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		in, err := c.Mutex("tls").Lock(l.Context())
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan error, 1)
		go func() {
			wl, err := w.Mutex("tls").Lock(ctx)
			if err == nil {
				err = wl.Unlock(ctx)
			}
			got <- err
		}()
		<-ev.ch[distlock.EventWaiting]
		if info, err := c.Mutex("tls").Inspect(ctx); err != nil || !info.Locked || info.Holds != 2 || info.Waiters != 1 {
			t.Fatalf("Inspect over TLS: %+v, %v", info, err)
		}
		if err := in.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-got; err != nil { // the lease is a minute: only the notification wakes it in time
			t.Fatalf("waiter over TLS: %v", err)
		}
	})

	_, admin := tlsLocks(t, addr, pw, &tls.Config{RootCAs: good.pool})
	for _, tc := range []struct {
		name, pw string
		conf     *tls.Config
		contains string
	}{
		{"wrong CA", pw, &tls.Config{RootCAs: other.pool}, "x509"},
		{"no CA (system roots)", pw, &tls.Config{}, "x509"},
		{"wrong server name", pw, &tls.Config{RootCAs: good.pool, ServerName: "redis.example.com"}, "x509"},
		{"wrong password", "wrong", &tls.Config{RootCAs: good.pool}, "WRONGPASS"},
		{"no password", "", &tls.Config{RootCAs: good.pool}, "NOAUTH"},
		{"plain TCP", pw, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := tlsLocks(t, addr, tc.pw, tc.conf)
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			_, err := c.Mutex("refused").TryLock(cctx)
			if !errors.Is(err, distlock.ErrBackend) || errors.Is(err, distlock.ErrNotAcquired) {
				t.Fatalf("TryLock: %v; want ErrBackend only", err)
			}
			if !strings.Contains(fmt.Sprint(err), tc.contains) {
				t.Fatalf("TryLock: %q does not say %q", err, tc.contains)
			}
			if _, err := c.Mutex("refused").Inspect(cctx); !errors.Is(err, distlock.ErrBackend) {
				t.Fatalf("Inspect: %v; want ErrBackend", err)
			}
			if n := admin.Exists(ctx, "distlock:{refused}", "distlock:{refused}:fence").Val(); n != 0 {
				t.Fatal("a refused connection wrote keys")
			}
			t.Logf("%s: %v", tc.name, err)
		})
	}
}
