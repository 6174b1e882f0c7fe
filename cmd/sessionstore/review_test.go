package main

import (
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeListener is a listener at addr that accepts nothing.
type fakeListener struct {
	net.Listener
	addr net.Addr
}

func (l fakeListener) Addr() net.Addr { return l.addr }

// TestCheckListener: serve refuses a listener that is not on a loopback
// address, which a -addr of localhost gives when the resolver names
// another address.
func TestCheckListener(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		ok   bool
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}, true},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8080}, true},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 8080}, false},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 8080}, false},
		{&net.UnixAddr{Name: "/tmp/x", Net: "unix"}, false},
	} {
		err := checkListener(fakeListener{addr: tc.addr})
		if tc.ok {
			assert.NoError(t, err, "%v", tc.addr)
		} else if assert.Error(t, err, "%v", tc.addr) {
			assert.Contains(t, err.Error(), "not a loopback address")
		}
	}
	ln, err := net.Listen("tcp", "localhost:0")
	require.NoError(t, err)
	defer ln.Close()
	assert.NoError(t, checkListener(ln), "localhost here is %s", ln.Addr())
}
