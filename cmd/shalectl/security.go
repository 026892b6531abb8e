package main

import (
	"os"

	"github.com/spf13/pflag"

	"github.com/shaledb/shale/client"
)

// The environment variables are SHALE_CLIENT_*, not SHALE_TLS_*: those
// configure a node (cmd/shale derives SHALE_<FLAG> for every flag), and a
// shell that runs both must not hand a node a client's certificate.

// securityFlags say how shalectl authenticates to a secure cluster: TLS
// with the cluster CA, and a client certificate or a bearer token. None of
// them: plaintext, for a cluster in insecure mode.
type securityFlags struct {
	ca, cert, key string
	token         string
}

func (s *securityFlags) register(pf *pflag.FlagSet) {
	pf.StringVar(&s.ca, "tls-ca", os.Getenv("SHALE_CLIENT_TLS_CA"), "cluster CA certificate: connect with TLS (env SHALE_CLIENT_TLS_CA)")
	pf.StringVar(&s.cert, "tls-cert", os.Getenv("SHALE_CLIENT_TLS_CERT"), "client certificate (env SHALE_CLIENT_TLS_CERT)")
	pf.StringVar(&s.key, "tls-key", os.Getenv("SHALE_CLIENT_TLS_KEY"), "client key (env SHALE_CLIENT_TLS_KEY)")
	// A token on the command line would show in ps: the environment only.
	s.token = os.Getenv("SHALE_TOKEN")
}

// options returns the client options for the flags.
func (s *securityFlags) options(o client.Options) (client.Options, error) {
	if s.ca == "" && s.cert == "" && s.key == "" && s.token == "" {
		return o, nil
	}
	cfg, err := client.LoadTLSConfig(s.ca, s.cert, s.key)
	if err != nil {
		return o, err
	}
	o.TLS, o.Token = cfg, s.token
	return o, nil
}
