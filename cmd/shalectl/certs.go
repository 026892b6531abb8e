package main

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/shaledb/shale/internal/certs"
)

func init() { register(func(*globals) *cobra.Command { return newCertsCmd() }) }

// newCertsCmd makes the certificates of a secure cluster (docs/security.md):
//
//	shalectl certs create-ca     --certs-dir certs
//	shalectl certs create-node   --certs-dir certs --out certs/node1 127.0.0.1 node1.example
//	shalectl certs create-client --certs-dir certs --role read-only alice
//	shalectl certs create-token
func newCertsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "certs",
		Short: "Create the cluster CA, node and client certificates, and tokens",
	}
	var certsDir string
	var validity time.Duration
	cmd.PersistentFlags().StringVar(&certsDir, "certs-dir", "certs", "directory of the CA (ca.crt, ca.key)")
	cmd.PersistentFlags().DurationVar(&validity, "validity", 0,
		fmt.Sprintf("how long certificates are valid (0: %v for a CA, %v otherwise, never past the CA's end)",
			certs.DefaultCAValidity, certs.DefaultCertValidity))

	createCA := &cobra.Command{
		Use:   "create-ca",
		Short: "Create the cluster CA in --certs-dir (refuses to replace one)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			name, _ := cmd.Flags().GetString("name")
			if err := certs.CreateCA(certsDir, name, validity); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s and %s (keep the key offline: whoever holds it can mint nodes and admins)\n",
				filepath.Join(certsDir, certs.CACertFile), filepath.Join(certsDir, certs.CAKeyFile))
			return nil
		},
	}
	createCA.Flags().String("name", "Shale cluster CA", "the CA's common name")

	var nodeOut string
	var nodeID uint64
	createNode := &cobra.Command{
		Use:   "create-node HOST... --node-id N",
		Short: "Create a node certificate, bound to a node ID, for the host names and IP addresses it is reached at",
		Long: `create-node makes the certificate of node --node-id N for the host names
and IP addresses it is reached at. The certificate names the node ID
(a URI SAN shale://node/N): its holder can act as no other node, and a
node refuses to run as another ID with it. --node-id 0 makes an unbound
certificate that any node may use, and whose theft lets the thief act as
any node: only for migrating an existing cluster (docs/security.md).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, hosts []string) error {
			if !cmd.Flags().Changed("node-id") {
				return errors.New("--node-id is required (0 for an unbound certificate: see docs/security.md)")
			}
			out := nodeOut
			if out == "" {
				out = certsDir
			}
			if err := certs.CreateNode(certsDir, out, hosts, nodeID, validity); err != nil {
				return err
			}
			bound := fmt.Sprintf("node %d", nodeID)
			if nodeID == 0 {
				bound = "no node ID (unbound)"
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s and %s for %v, bound to %s\n",
				filepath.Join(out, certs.NodeCertFile), filepath.Join(out, certs.NodeKeyFile), hosts, bound)
			return nil
		},
	}
	createNode.Flags().StringVar(&nodeOut, "out", "", "directory to write node.crt and node.key to (default: --certs-dir)")
	createNode.Flags().Uint64Var(&nodeID, "node-id", 0, "the node ID the certificate is bound to (required; 0: unbound)")

	var clientOut, role string
	createClient := &cobra.Command{
		Use:   "create-client NAME",
		Short: "Create a client certificate with a role: read-only, read-write or admin",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := certs.ParseRole(role)
			if err != nil {
				return fmt.Errorf("--role: %w", err)
			}
			out := clientOut
			if out == "" {
				out = certsDir
			}
			if err := certs.CreateClient(certsDir, out, args[0], r, validity); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s and %s (role %v)\n",
				filepath.Join(out, certs.ClientCertFile(args[0])), filepath.Join(out, certs.ClientKeyFile(args[0])), r)
			return nil
		},
	}
	createClient.Flags().StringVar(&clientOut, "out", "", "directory to write the certificate and key to (default: --certs-dir)")
	createClient.Flags().StringVar(&role, "role", "", "read-only, read-write or admin (required)")

	createToken := &cobra.Command{
		Use:   "create-token [ROLE [NAME]]",
		Short: "Print a new random bearer token, as a token-file line when a role is given",
		Args:  cobra.MaximumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			var b [32]byte
			if _, err := rand.Read(b[:]); err != nil {
				return fmt.Errorf("reading random bytes: %w", err)
			}
			tok := base64.RawURLEncoding.EncodeToString(b[:])
			if len(args) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), tok)
				return nil
			}
			r, err := certs.ParseRole(args[0])
			if err != nil {
				return err
			}
			line := r.String() + " " + tok
			if len(args) == 2 {
				if args[1] == "" {
					return errors.New("empty token name")
				}
				line += " " + args[1]
			}
			fmt.Fprintln(cmd.OutOrStdout(), line)
			return nil
		},
	}
	cmd.AddCommand(createCA, createNode, createClient, createToken, newCreateClusterCmd(&certsDir, &validity))
	return cmd
}

// newCreateClusterCmd makes every certificate of a small cluster in one
// idempotent step, for test beds and containers (deploy/docker-compose-tls.yml):
// what exists is kept, what is missing is made.
func newCreateClusterCmd(certsDir *string, validity *time.Duration) *cobra.Command {
	var extraHosts []string
	var admin string
	var bindIDs bool
	cmd := &cobra.Command{
		Use:   "create-cluster NAME[=HOST,...]...",
		Short: "Create, where missing, the CA, a node certificate per NAME (in --certs-dir/NAME) and an admin client",
		Long: `create-cluster creates, each only if it does not exist yet: the CA in
--certs-dir; for every NAME a node certificate in --certs-dir/NAME, naming
NAME, the HOSTs given after it and --extra-hosts, beside a copy of ca.crt;
and the client certificate of --admin with the admin role. It is safe to
run again. With --bind-node-ids the i-th NAME's certificate is bound to
node ID i (1, 2, ...). For a production cluster make the certificates one
by one and keep ca.key off the nodes (docs/security.md).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			dir := *certsDir
			if !exists(filepath.Join(dir, certs.CACertFile)) {
				if err := certs.CreateCA(dir, "", 0); err != nil {
					return err
				}
				fmt.Fprintf(out, "created the CA in %s\n", dir)
			}
			caPEM, err := os.ReadFile(filepath.Join(dir, certs.CACertFile))
			if err != nil {
				return err
			}
			for i, arg := range args {
				name, hostList, _ := strings.Cut(arg, "=")
				if name == "" || strings.ContainsAny(name, `/\`) {
					return fmt.Errorf("node %q: want NAME[=HOST,...]", arg)
				}
				nodeDir := filepath.Join(dir, name)
				if !exists(filepath.Join(nodeDir, certs.NodeCertFile)) {
					hosts := append([]string{name}, strings.Split(hostList, ",")...)
					hosts = append(hosts, extraHosts...)
					var id uint64
					if bindIDs {
						id = uint64(i + 1)
					}
					if err := certs.CreateNode(dir, nodeDir, hosts, id, *validity); err != nil {
						return err
					}
					fmt.Fprintf(out, "created the certificate of node %s in %s\n", name, nodeDir)
				}
				if ca := filepath.Join(nodeDir, certs.CACertFile); !exists(ca) {
					if err := os.WriteFile(ca, caPEM, 0o644); err != nil {
						return fmt.Errorf("copying the CA certificate: %w", err)
					}
				}
			}
			if admin != "" && !exists(filepath.Join(dir, certs.ClientCertFile(admin))) {
				if err := certs.CreateClient(dir, dir, admin, certs.RoleAdmin, *validity); err != nil {
					return err
				}
				fmt.Fprintf(out, "created the admin client certificate %s\n", filepath.Join(dir, certs.ClientCertFile(admin)))
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVar(&extraHosts, "extra-hosts", nil, "host names and IPs every node certificate names besides its own (e.g. localhost,127.0.0.1)")
	cmd.Flags().StringVar(&admin, "admin", "root", "name of the admin client certificate to create (empty: none)")
	cmd.Flags().BoolVar(&bindIDs, "bind-node-ids", false, "bind the i-th NAME's certificate to node ID i")
	return cmd
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
