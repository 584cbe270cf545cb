package podfit_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	podfit "github.com/podfit/podfit/sdk/go"
)

// pki is a throwaway CA with a server certificate for 127.0.0.1 and a client certificate, as PEM files.
type pki struct {
	dir                                              string
	ca, serverCert, serverKey, clientCert, clientKey string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	dir := t.TempDir()
	p := &pki{dir: dir}
	caKey, caCert := certificate(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "podfit test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}, nil, nil)
	p.ca = writePEM(t, dir, "ca.pem", "CERTIFICATE", caCert.Raw)
	serverKey, serverCert := certificate(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "podfit-server"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:    []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, caCert, caKey)
	p.serverCert = writePEM(t, dir, "server.pem", "CERTIFICATE", serverCert.Raw)
	p.serverKey = writeKey(t, dir, "server-key.pem", serverKey)
	clientKey, clientCert := certificate(t, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "podfit-client"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, caCert, caKey)
	p.clientCert = writePEM(t, dir, "client.pem", "CERTIFICATE", clientCert.Raw)
	p.clientKey = writeKey(t, dir, "client-key.pem", clientKey)
	return p
}

// certificate signs template with parent's key (self-signed when parent is nil).
func certificate(t *testing.T, template, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*ecdsa.PrivateKey, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	template.SerialNumber = serial
	template.NotBefore = time.Now().Add(-time.Hour)
	template.NotAfter = time.Now().Add(time.Hour)
	if parent == nil {
		parent, parentKey = template, key
	}
	der, err := x509.CreateCertificate(rand.Reader, template, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return key, cert
}

func writePEM(t *testing.T, dir, name, blockType string, der []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeKey(t *testing.T, dir, name string, key *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return writePEM(t, dir, name, "PRIVATE KEY", der)
}

func TestMutualTLSWithAToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	p := newPKI(t)
	tokenFile := filepath.Join(p.dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	server := startServer(t,
		[]string{"--tls-cert-file", p.serverCert, "--tls-key-file", p.serverKey, "--tls-client-ca-file", p.ca, "--auth-token-file", tokenFile},
		podfit.WithCAFile(p.ca), podfit.WithClientCertFiles(p.clientCert, p.clientKey))

	keyPair, err := tls.LoadX509KeyPair(p.clientCert, p.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(p.ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)

	for _, tc := range []struct {
		name string
		opts []podfit.Option
		want codes.Code
	}{
		{"CA and client certificate files, and the token",
			[]podfit.Option{podfit.WithCAFile(p.ca), podfit.WithClientCertFiles(p.clientCert, p.clientKey), podfit.WithToken("s3cret")}, codes.OK},
		{"a tls.Config, and the token",
			[]podfit.Option{podfit.WithTLS(&tls.Config{RootCAs: roots, Certificates: []tls.Certificate{keyPair}}), podfit.WithToken("s3cret")}, codes.OK},
		{"no token", []podfit.Option{podfit.WithCAFile(p.ca), podfit.WithClientCertFiles(p.clientCert, p.clientKey)}, codes.Unauthenticated},
		{"no client certificate", []podfit.Option{podfit.WithCAFile(p.ca), podfit.WithToken("s3cret")}, codes.Unavailable},
		{"the system's roots, which do not know the CA", []podfit.Option{podfit.WithToken("s3cret")}, codes.Unavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := dial(t, server.target, tc.opts...)
			_, err := client.Stats(ctx)
			if got := status.Code(err); got != tc.want {
				t.Fatalf("Stats: code %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

func TestDialRefusesContradictoryOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []podfit.Option
	}{
		{"a token over plaintext", []podfit.Option{podfit.WithInsecure(), podfit.WithToken("t")}},
		{"plaintext and TLS", []podfit.Option{podfit.WithInsecure(), podfit.WithCAFile("ca.pem")}},
		{"a certificate without its key", []podfit.Option{podfit.WithClientCertFiles("client.pem", "")}},
		{"a CA file that does not exist", []podfit.Option{podfit.WithCAFile(filepath.Join(t.TempDir(), "missing.pem"))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if client, err := podfit.Dial(context.Background(), "127.0.0.1:1", tc.opts...); err == nil {
				client.Close()
				t.Fatal("Dial accepted the options")
			}
		})
	}
}
