package certs

import (
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
)

// Role is what a client (or node) is allowed to do. Roles are ordered:
// each one includes every right of the roles before it.
type Role int

// The roles, weakest first. RoleNone is no right at all.
const (
	RoleNone Role = iota
	RoleReadOnly
	RoleReadWrite
	RoleAdmin
	// RoleNode is a cluster member: every right of admin, and the only
	// role allowed on the node-to-node Raft transport.
	RoleNode
)

// NodeOU is the OrganizationalUnit of a node certificate; RoleOUPrefix
// starts that of a client certificate ("shale-role:admin").
const (
	NodeOU       = "shale-node"
	RoleOUPrefix = "shale-role:"
)

var roleNames = map[Role]string{
	RoleNone:      "none",
	RoleReadOnly:  "read-only",
	RoleReadWrite: "read-write",
	RoleAdmin:     "admin",
	RoleNode:      "node",
}

// String returns the role's name as written in certificates, token files
// and flags.
func (r Role) String() string {
	if s, ok := roleNames[r]; ok {
		return s
	}
	return fmt.Sprintf("Role(%d)", int(r))
}

// ParseRole parses a client role name: read-only, read-write or admin.
// "node" is not accepted: only a node certificate makes a node.
func ParseRole(s string) (Role, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "read-only", "readonly", "ro":
		return RoleReadOnly, nil
	case "read-write", "readwrite", "rw":
		return RoleReadWrite, nil
	case "admin":
		return RoleAdmin, nil
	}
	return RoleNone, fmt.Errorf("unknown role %q: want read-only, read-write or admin", s)
}

// RoleOf returns the role a verified certificate grants: RoleNode for a
// node certificate (OU shale-node, usable as a TLS client and server), the
// client role its OU names, or RoleNone with the reason when it names
// none or more than one. The caller must have verified the certificate
// against the cluster CA: the OU is only as trustworthy as its signer.
func RoleOf(cert *x509.Certificate) (Role, error) {
	var found []Role
	for _, ou := range cert.Subject.OrganizationalUnit {
		switch {
		case ou == NodeOU:
			if !hasUsage(cert, x509.ExtKeyUsageServerAuth) || !hasUsage(cert, x509.ExtKeyUsageClientAuth) {
				return RoleNone, fmt.Errorf("certificate %q says %s but lacks the server and client key usages", cert.Subject.CommonName, NodeOU)
			}
			found = append(found, RoleNode)
		case strings.HasPrefix(ou, RoleOUPrefix):
			r, err := ParseRole(strings.TrimPrefix(ou, RoleOUPrefix))
			if err != nil {
				return RoleNone, fmt.Errorf("certificate %q: %w", cert.Subject.CommonName, err)
			}
			found = append(found, r)
		}
	}
	switch len(found) {
	case 0:
		return RoleNone, fmt.Errorf("certificate %q names no Shale role (OU %s or %s<role>)", cert.Subject.CommonName, NodeOU, RoleOUPrefix)
	case 1:
		return found[0], nil
	}
	return RoleNone, fmt.Errorf("certificate %q names %d roles; a certificate must name one", cert.Subject.CommonName, len(found))
}

func hasUsage(cert *x509.Certificate, u x509.ExtKeyUsage) bool {
	return slices.Contains(cert.ExtKeyUsage, u)
}
