package podfit

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// DefaultMaxMessageBytes is the largest message sent or received unless WithMaxMessageBytes says
// otherwise: the server's own default, so that a large cluster's List or Replace fits.
const DefaultMaxMessageBytes = 64 << 20

// Option configures Dial.
type Option func(*dialConfig)

type dialConfig struct {
	insecure         bool
	tls              *tls.Config
	caFile           string
	certFile         string
	keyFile          string
	token            string
	tokenSet         bool
	tokenOverPlain   bool
	maxMessageBytes  int
	extraDialOptions []grpc.DialOption
}

// WithInsecure dials without TLS: for a server on loopback or behind a sidecar that terminates TLS.
// Without it Dial uses TLS, verified against the system's roots.
func WithInsecure() Option {
	return func(c *dialConfig) { c.insecure = true }
}

// WithTLS dials with this TLS configuration (roots, client certificates, server name, ...). It is
// cloned; WithCAFile and WithClientCertFiles add to the clone.
func WithTLS(config *tls.Config) Option {
	return func(c *dialConfig) { c.tls = config }
}

// WithCAFile trusts the PEM CA certificate(s) in path instead of the system's roots: a private CA.
func WithCAFile(path string) Option {
	return func(c *dialConfig) { c.caFile = path }
}

// WithClientCertFiles presents the PEM certificate and key in certFile and keyFile: mutual TLS, for
// a server started with --tls-client-ca-file.
func WithClientCertFiles(certFile, keyFile string) Option {
	return func(c *dialConfig) { c.certFile, c.keyFile = certFile, keyFile }
}

// WithToken sends "authorization: Bearer <token>" on every call, for a server started with
// --auth-token-file. Dial refuses to send it over plaintext unless WithAllowInsecureToken is given
// too: anyone on the path could read it.
func WithToken(token string) Option {
	return func(c *dialConfig) { c.token, c.tokenSet = token, true }
}

// WithAllowInsecureToken lets WithToken's token travel over a WithInsecure connection: for tests,
// or a loopback sidecar.
func WithAllowInsecureToken() Option {
	return func(c *dialConfig) { c.tokenOverPlain = true }
}

// WithMaxMessageBytes bounds the messages sent and received (DefaultMaxMessageBytes by default).
func WithMaxMessageBytes(n int) Option {
	return func(c *dialConfig) { c.maxMessageBytes = n }
}

// WithDialOptions passes more options to grpc.NewClient (interceptors, keepalive, a custom
// resolver, ...). They come after podfit's own, so they win.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(c *dialConfig) { c.extraDialOptions = append(c.extraDialOptions, opts...) }
}

// dialOptions checks the combination of options and turns it into gRPC's.
func (c *dialConfig) dialOptions() ([]grpc.DialOption, error) {
	tlsGiven := c.tls != nil || c.caFile != "" || c.certFile != "" || c.keyFile != ""
	if c.insecure && tlsGiven {
		return nil, errors.New("podfit: WithInsecure contradicts the TLS options given")
	}
	if (c.certFile == "") != (c.keyFile == "") {
		return nil, errors.New("podfit: WithClientCertFiles needs both a certificate and a key file")
	}
	if c.tokenSet && c.insecure && !c.tokenOverPlain {
		return nil, errors.New("podfit: refusing to send a bearer token over plaintext: dial with TLS, or add WithAllowInsecureToken")
	}
	var transport credentials.TransportCredentials
	if c.insecure {
		transport = insecure.NewCredentials()
	} else {
		config, err := c.tlsConfig()
		if err != nil {
			return nil, err
		}
		transport = credentials.NewTLS(config)
	}
	size := c.maxMessageBytes
	if size <= 0 {
		size = DefaultMaxMessageBytes
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(transport),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(size), grpc.MaxCallSendMsgSize(size)),
	}
	if c.tokenSet {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken{token: c.token, secure: !c.tokenOverPlain}))
	}
	return append(opts, c.extraDialOptions...), nil
}

func (c *dialConfig) tlsConfig() (*tls.Config, error) {
	config := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.tls != nil {
		config = c.tls.Clone()
	}
	if c.caFile != "" {
		pem, err := os.ReadFile(c.caFile)
		if err != nil {
			return nil, fmt.Errorf("podfit: CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("podfit: CA file %s holds no PEM certificate", c.caFile)
		}
		config.RootCAs = pool
	}
	if c.certFile != "" {
		certificate, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if err != nil {
			return nil, fmt.Errorf("podfit: client certificate: %w", err)
		}
		config.Certificates = append(config.Certificates, certificate)
	}
	return config, nil
}

// bearerToken is the per-call credential of WithToken. secure makes gRPC itself refuse to send it on
// a connection without transport security, should one be configured through WithDialOptions.
type bearerToken struct {
	token  string
	secure bool
}

func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + b.token}, nil
}

func (b bearerToken) RequireTransportSecurity() bool {
	return b.secure
}
