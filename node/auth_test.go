package node

import (
	"strings"
	"testing"

	"github.com/shaledb/shale/api/kvpb"
	"github.com/shaledb/shale/api/raftrpcpb"
	"github.com/shaledb/shale/internal/certs"
)

// TestMethodRoles: every method of the services has the role the
// security docs promise, and a method nobody listed needs admin.
func TestMethodRoles(t *testing.T) {
	reads := map[string]bool{"Get": true, "Scan": true, "BatchGet": true,
		"Status": true, "RangeLookup": true, "Ranges": true, "Nodes": true, "HotSpots": true}
	check := func(service string, m string, want certs.Role) {
		t.Helper()
		if got := requiredRole("/" + service + "/" + m); got != want {
			t.Errorf("%s/%s needs %v, want %v", service, m, got, want)
		}
	}
	for _, m := range kvpb.KV_ServiceDesc.Methods {
		want := certs.RoleReadWrite
		if reads[m.MethodName] {
			want = certs.RoleReadOnly
		}
		check(kvpb.KV_ServiceDesc.ServiceName, m.MethodName, want)
	}
	for _, m := range kvpb.Admin_ServiceDesc.Methods {
		want := certs.RoleAdmin
		if reads[m.MethodName] {
			want = certs.RoleReadOnly
		}
		check(kvpb.Admin_ServiceDesc.ServiceName, m.MethodName, want)
	}
	for _, m := range kvpb.Txn_ServiceDesc.Methods {
		want := certs.RoleReadWrite
		switch m.MethodName {
		case "Begin":
			want = certs.RoleReadOnly
		case "WaitFor": // the nodes' push graph
			want = certs.RoleNode
		}
		check(kvpb.Txn_ServiceDesc.ServiceName, m.MethodName, want)
	}
	for _, s := range raftrpcpb.RaftTransport_ServiceDesc.Streams {
		check(raftrpcpb.RaftTransport_ServiceDesc.ServiceName, s.StreamName, certs.RoleNode)
	}
	check("shale.kv.v1.Admin", "SomethingNew", certs.RoleAdmin)
	check("shale.kv.v1.KV", "SomethingNew", certs.RoleAdmin)
	check("grpc.health.v1.Health", "Check", certs.RoleNone)
}

func TestParseTokens(t *testing.T) {
	good := "# comment\n\nread-only  aaaaaaaaaaaaaaaaaaaaaaaaaaaa dash # trailing\nadmin bbbbbbbbbbbbbbbbbbbbbbbbbbbb\n"
	toks, err := parseTokens([]byte(good))
	if err != nil || len(toks) != 2 {
		t.Fatalf("parseTokens = %v, %v", toks, err)
	}
	for in, want := range map[string]string{
		"read-only short":                        "shorter than",
		"root aaaaaaaaaaaaaaaaaaaaaaaaaaaa":      "unknown role",
		"node aaaaaaaaaaaaaaaaaaaaaaaaaaaa":      "unknown role",
		"admin":                                  "want <role> <token>",
		"admin aaaaaaaaaaaaaaaaaaaaaaaaaaaa x y": "want <role> <token>",
		"admin aaaaaaaaaaaaaaaaaaaaaaaaaaaa\nro aaaaaaaaaaaaaaaaaaaaaaaaaaaa": "listed twice",
	} {
		if _, err := parseTokens([]byte(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseTokens(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

func TestSecurityConfigValidate(t *testing.T) {
	for _, c := range []SecurityConfig{
		{TLS: TLSFiles{CAFile: "ca"}},
		{TLS: TLSFiles{CertFile: "c", KeyFile: "k"}},
		{TokenFile: "tokens"},
	} {
		if err := c.validate(); err == nil {
			t.Errorf("%+v: validate succeeded", c)
		}
	}
	if err := (SecurityConfig{}).validate(); err != nil {
		t.Errorf("insecure mode: %v", err)
	}
}
