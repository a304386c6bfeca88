package etcdtest

import (
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
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// A TLSMember is a single etcd member that serves clients over TLS only,
// and asks them for a client certificate: the set-up of a production
// etcd that clients such as the distlock command must be configured for.
// Its certificates, made by [StartTLSMember] for the test, are in PEM
// files: a CA, the member's certificate (for 127.0.0.1 and localhost)
// and a client certificate, both signed by the CA.
//
// A TLSMember has no proxy and cannot be killed or restarted; use a
// [Cluster] for faults.
type TLSMember struct {
	e          *embed.Etcd
	clientPort int

	// CAFile is the CA certificate that signed the member's certificate
	// and the client's.
	CAFile string
	// CertFile and KeyFile are a client certificate that the member
	// accepts, and its key.
	CertFile, KeyFile string
}

// StartTLSMember starts a TLS member for the test tb, in a directory from
// tb.TempDir, and registers a cleanup function with tb that stops it.
// It calls tb.Fatalf if the member cannot be started.
func StartTLSMember(tb TB) *TLSMember {
	tb.Helper()
	dir := tb.TempDir()
	m := &TLSMember{}
	server, err := writePKI(dir, m)
	if err != nil {
		tb.Fatalf("etcdtest: TLS member certificates: %v", err)
	}
	for attempt := 1; attempt <= startAttempts; attempt++ {
		err = m.start(filepath.Join(dir, fmt.Sprintf("data%d", attempt)), server)
		if err == nil || !isAddrInUse(err) {
			break
		}
	}
	if err != nil {
		tb.Fatalf("etcdtest: start TLS member: %v", err)
	}
	tb.Cleanup(m.e.Close)
	return m
}

// start starts the member on free ports, with its data in dir, and
// waits until it is ready to serve.
func (m *TLSMember) start(dir string, server transport.TLSInfo) error {
	ports, err := freePorts(2)
	if err != nil {
		return fmt.Errorf("pick ports: %w", err)
	}
	m.clientPort = ports[0]
	client := url.URL{Scheme: "https", Host: m.Addr()}
	peer := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	cfg := embed.NewConfig()
	cfg.Name = "tls0"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{client}
	cfg.AdvertiseClientUrls = []url.URL{client}
	cfg.ListenPeerUrls = []url.URL{peer}
	cfg.AdvertisePeerUrls = []url.URL{peer}
	cfg.InitialCluster = cfg.Name + "=" + peer.String()
	cfg.InitialClusterToken = "etcdtest-tls-" + randomHex(8)
	cfg.ClientTLSInfo = server
	cfg.UnsafeNoFsync = true
	cfg.TickMs = uint(HeartbeatInterval / time.Millisecond)
	cfg.ElectionMs = uint(ElectionTimeout / time.Millisecond)
	cfg.EnableGRPCGateway = false
	cfg.Logger = "zap"
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		_ = os.RemoveAll(dir)
		return err
	}
	if err := awaitReady(e); err != nil {
		e.Close()
		return err
	}
	m.e = e
	return nil
}

// Addr returns the member's client address, "127.0.0.1:PORT".
func (m *TLSMember) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(m.clientPort))
}

// Endpoint returns the member's client URL, "https://127.0.0.1:PORT".
func (m *TLSMember) Endpoint() string { return "https://" + m.Addr() }

// TLSConfig returns the TLS configuration of a client of the member:
// it trusts the CA and presents the client certificate.
func (m *TLSMember) TLSConfig() (*tls.Config, error) {
	info := transport.TLSInfo{CertFile: m.CertFile, KeyFile: m.KeyFile, TrustedCAFile: m.CAFile}
	return info.ClientConfig()
}

// Client returns a client of the member, as [Dial] does, over TLS with
// the client certificate.
func (m *TLSMember) Client(tb TB) *clientv3.Client {
	tb.Helper()
	conf, err := m.TLSConfig()
	if err != nil {
		tb.Fatalf("etcdtest: TLS client configuration: %v", err)
	}
	cfg := ClientConfig(m.Endpoint())
	cfg.TLS = conf
	cli, err := clientv3.New(cfg)
	if err != nil {
		tb.Fatalf("etcdtest: client for %s: %v", m.Endpoint(), err)
	}
	tb.Cleanup(func() { _ = cli.Close() })
	return cli
}

// writePKI writes a CA, a certificate for the member and a client
// certificate, with their keys, into dir; it sets m's file names and
// returns the member's TLS configuration.
func writePKI(dir string, m *TLSMember) (transport.TLSInfo, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	ca := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "etcdtest CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		return transport.TLSInfo{}, err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return transport.TLSInfo{}, err
	}
	m.CAFile = filepath.Join(dir, "ca.pem")
	if err := writePEM(m.CAFile, "CERTIFICATE", caDER); err != nil {
		return transport.TLSInfo{}, err
	}
	// The member's certificate serves TLS and, as etcd's own client
	// certificate, may be presented to itself.
	serverCert, serverKey := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server-key.pem")
	err = writeLeaf(serverCert, serverKey, ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return transport.TLSInfo{}, err
	}
	m.CertFile, m.KeyFile = filepath.Join(dir, "client.pem"), filepath.Join(dir, "client-key.pem")
	err = writeLeaf(m.CertFile, m.KeyFile, ca, caKey, &x509.Certificate{
		SerialNumber: big.NewInt(3), Subject: pkix.Name{CommonName: "etcdtest client"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return transport.TLSInfo{}, err
	}
	return transport.TLSInfo{CertFile: serverCert, KeyFile: serverKey, TrustedCAFile: m.CAFile, ClientCertAuth: true}, nil
}

// writeLeaf makes the certificate tmpl, signed by ca, with a new key, and
// writes both in PEM files.
func writeLeaf(certFile, keyFile string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.NotBefore, tmpl.NotAfter = ca.NotBefore, ca.NotAfter
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return errors.Join(writePEM(certFile, "CERTIFICATE", der), writePEM(keyFile, "EC PRIVATE KEY", keyDER))
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
