package clusterharness

import (
	"fmt"
	"net"
)

// FreePortOn returns a TCP port free on ip at the time of the call.
func FreePortOn(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("cannot listen on %s (the tests need 127.0.0.0/8 on loopback): %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
