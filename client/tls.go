package client

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// LoadTLSConfig returns a TLS 1.3 configuration that trusts the cluster CA
// in caFile and, when certFile and keyFile are given, presents that client
// certificate (made by shalectl certs create-client; its role decides what
// the client may do). Without a certificate the client must authenticate
// with Options.Token.
func LoadTLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" {
		return nil, errors.New("client: TLS needs the cluster CA certificate file")
	}
	caPEM, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("client: reading the CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, fmt.Errorf("client: %s holds no PEM certificate", caFile)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: pool}
	switch {
	case certFile != "" && keyFile != "":
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("client: loading the client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	case certFile != "" || keyFile != "":
		return nil, errors.New("client: a client certificate needs both the certificate and the key file")
	}
	return cfg, nil
}

// securityDialOptions returns the dial options for o's security: TLS
// (with the token as per-request credentials) or plaintext.
func (o *Options) securityDialOptions() ([]grpc.DialOption, error) {
	if o.TLS == nil {
		if o.Token != "" {
			return nil, errors.New("client: a bearer token needs TLS (Options.TLS): it would cross the network in plaintext")
		}
		return []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, nil
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(o.TLS))}
	if o.Token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(bearerToken(o.Token)))
	}
	return opts, nil
}

// bearerToken sends "authorization: Bearer <token>" with every request,
// and only over TLS.
type bearerToken string

func (t bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(t)}, nil
}

func (bearerToken) RequireTransportSecurity() bool { return true }

// explainTransportFailure adds the likely cause to a connection failure
// whose own words do not say it. A plaintext client's HTTP/2 preface is
// not a TLS ClientHello, so a TLS node drops the connection at once and
// gRPC reports only "error reading server preface: EOF".
func explainTransportFailure(msg string, usingTLS bool) string {
	if !usingTLS && strings.Contains(msg, "error reading server preface") {
		return msg + " (the node closed the connection before speaking HTTP/2: " +
			"if the cluster runs with TLS, give the client the cluster CA, e.g. shalectl --tls-ca)"
	}
	return msg
}
