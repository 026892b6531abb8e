package certs

import (
	"crypto/x509"
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// A node certificate names the node ID it was issued for as a URI subject
// alternative name shale://node/<id> (docs/security.md, "Node
// identity"). A node holding it may act only as that node: the others
// check every node ID it claims against it. A URI SAN rather than the
// common name, so that the CN stays free for humans and the host names
// stay in DNS/IP SANs where TLS checks them.

// NodeIDURIScheme and NodeIDURIHost make the URI shale://node/<id>.
const (
	NodeIDURIScheme = "shale"
	NodeIDURIHost   = "node"
)

// NodeIDURI is the URI SAN that binds a certificate to node id.
func NodeIDURI(id uint64) *url.URL {
	return &url.URL{Scheme: NodeIDURIScheme, Host: NodeIDURIHost, Path: "/" + strconv.FormatUint(id, 10)}
}

// NodeIDOf returns the node ID a certificate is bound to, and whether it
// names one. A certificate naming more than one node ID, or a malformed
// one, is an error: it binds nothing.
func NodeIDOf(cert *x509.Certificate) (uint64, bool, error) {
	var ids []uint64
	for _, u := range cert.URIs {
		if u.Scheme != NodeIDURIScheme || u.Host != NodeIDURIHost {
			continue
		}
		id, err := strconv.ParseUint(strings.TrimPrefix(u.Path, "/"), 10, 64)
		if err != nil || id == 0 {
			return 0, false, fmt.Errorf("certificate %q: malformed node ID URI %q", cert.Subject.CommonName, u.String())
		}
		ids = append(ids, id)
	}
	switch len(ids) {
	case 0:
		return 0, false, nil
	case 1:
		return ids[0], true, nil
	}
	return 0, false, fmt.Errorf("certificate %q names %d node IDs; a node certificate must name one", cert.Subject.CommonName, len(ids))
}
