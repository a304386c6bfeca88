package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"os"
)

// tlsFiles are the flags that configure the TLS of a rediss:// or
// etcds:// URL: the CA that signed the server's certificate, instead of
// the system's, and a client certificate for servers that ask for one.
type tlsFiles struct {
	ca, cert, key string
}

// addFlags defines --tls-ca, --tls-cert and --tls-key on fs.
func (f *tlsFiles) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.ca, "tls-ca", "",
		"with rediss:// or etcds://: trust the CAs in PEM `FILE`, not the system's")
	fs.StringVar(&f.cert, "tls-cert", "",
		"with rediss:// or etcds://: present the client certificate in PEM `FILE`")
	fs.StringVar(&f.key, "tls-key", "",
		"with --tls-cert: the private key of the client certificate, in PEM `FILE`")
}

// set reports whether any of the flags was given.
func (f tlsFiles) set() bool { return f.ca != "" || f.cert != "" || f.key != "" }

// errNotTLS is the usage error of TLS flags given for a URL without TLS.
func (f tlsFiles) errNotTLS(from string) error {
	return usageErrorf("--tls-ca, --tls-cert and --tls-key are for TLS, and the URL in %s is plain text: use rediss:// or etcds://", from)
}

// apply adds the files to config, the TLS configuration of a URL: the
// CA certificates replace the system's, and the client certificate is
// presented to the server. A file that cannot be read or parsed is a
// usage error that names its flag.
func (f tlsFiles) apply(config *tls.Config) error {
	if f.ca != "" {
		pem, err := os.ReadFile(f.ca)
		if err != nil {
			return usageErrorf("invalid value for --tls-ca: %v", pathError(err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return usageErrorf("invalid value for --tls-ca: %s holds no PEM certificate", f.ca)
		}
		config.RootCAs = pool
	}
	switch {
	case f.cert == "" && f.key == "":
	case f.cert == "":
		return usageErrorf("--tls-key needs --tls-cert, the certificate of the key")
	case f.key == "":
		return usageErrorf("--tls-cert needs --tls-key, the private key of the certificate")
	default:
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return usageErrorf("invalid --tls-cert or --tls-key: %v", pathError(err))
		}
		config.Certificates = []tls.Certificate{pair}
	}
	return nil
}

// pathError is err without the operation of an *os.PathError ("open"),
// which says nothing to a user: "FILE: no such file or directory".
func pathError(err error) error {
	var perr *os.PathError
	if errors.As(err, &perr) {
		return fmt.Errorf("%s: %v", perr.Path, perr.Err)
	}
	return err
}
