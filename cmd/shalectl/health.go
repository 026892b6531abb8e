package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/shaledb/shale/client"
	"github.com/spf13/cobra"
)

func init() { register(newHealthCmd) }

// newHealthCmd checks one node: its HTTP /healthz with --http (what the
// Docker health check runs, as the image has no curl), else whether one
// of --endpoints answers the gRPC health check with SERVING.
func newHealthCmd(g *globals) *cobra.Command {
	var httpAddr string
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 if a node is serving: its /healthz (--http) or the gRPC health check",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			out := cmd.OutOrStdout()
			if httpAddr == "" {
				_, _, done, err := g.connect(cmd)
				if err != nil {
					return err
				}
				done()
				if g.json {
					return writeJSON(out, map[string]any{"healthy": true})
				}
				_, err = fmt.Fprintln(out, "ok")
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), g.timeout)
			defer cancel()
			// host:port is plaintext; https://host:port a node serving
			// --http-tls, checked against --tls-ca.
			hc := http.DefaultClient
			url := "http://" + httpAddr + "/healthz"
			if addr, ok := strings.CutPrefix(httpAddr, "https://"); ok {
				if g.security.ca == "" {
					return errors.New("--http https://...: give the cluster CA with --tls-ca to check the node")
				}
				cfg, err := client.LoadTLSConfig(g.security.ca, "", "")
				if err != nil {
					return err
				}
				hc = &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
				url = "https://" + addr + "/healthz"
			}
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return fmt.Errorf("--http %q: %w", httpAddr, err)
			}
			resp, err := hc.Do(req)
			if err != nil {
				return fmt.Errorf("GET %s: %w", url, err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			msg := strings.TrimSpace(string(body))
			healthy := resp.StatusCode == http.StatusOK
			if g.json {
				if err := writeJSON(out, map[string]any{"healthy": healthy, "status": resp.StatusCode, "message": msg}); err != nil {
					return err
				}
			} else if healthy {
				fmt.Fprintln(out, msg)
			}
			if !healthy {
				return fmt.Errorf("GET %s: %s: %s", url, resp.Status, msg)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&httpAddr, "http", "", "check this HTTP address's /healthz (host:port, or https://host:port with --tls-ca for a node with --http-tls) instead of the gRPC endpoints")
	return cmd
}
