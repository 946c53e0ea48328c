package localstack

import (
	"errors"
	"fmt"
	"net"
	"sync"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") whose port is free
// at this moment and was never returned before in this process.
func FreeAddr() (string, error) {
	a, err := freshAddr(nil)
	if err != nil {
		return "", err
	}
	return a.String(), nil
}

// FreePort is FreeAddr's port.
func FreePort() (int, error) {
	a, err := freshAddr(nil)
	if err != nil {
		return 0, err
	}
	return a.Port, nil
}

// rabbitPort is FreePort outside the ports RabbitMQ's own tools use (4369,
// 25672 and 35672-35682 for CLI distribution).
func rabbitPort() (int, error) {
	a, err := freshAddr(func(port int) bool {
		return port != 25672 && port != 4369 && (port < 35672 || port > 35682)
	})
	if err != nil {
		return 0, err
	}
	return a.Port, nil
}

// handedOut are the addresses freshAddr returned in this process.
var handedOut sync.Map

// freshAddr returns a loopback address whose port is free at this moment
// and was never returned before in this process, and that accept (when not
// nil) takes: the kernel may give a port again as soon as its listener is
// closed, and two ports of one service (its public and its ops port, a
// node's AMQP and distribution port) must differ.
func freshAddr(accept func(port int) bool) (*net.TCPAddr, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		a := ln.Addr().(*net.TCPAddr)
		ln.Close()
		if accept != nil && !accept(a.Port) {
			continue
		}
		if _, given := handedOut.LoadOrStore(a.String(), true); !given {
			return a, nil
		}
	}
	return nil, errors.New("find a free port: the kernel kept giving ports handed out before or refused")
}
