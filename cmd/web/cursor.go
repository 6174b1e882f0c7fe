package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/google/uuid"
)

// Resuming a session's live stream
//
// Every message of a session's live stream that moves the client on
// ("tree", "delta", "settled") carries an SSE id: the liveCursor after it.
// It holds the two positions the stream keeps: how many nodes of the tree
// the client holds and the last of them (what known and last say), and
// the cursor of the last update the store's Tail delivered (durable
// deltas and events, sessionstore's docs/streams.md). A request that
// gives one back (a Last-Event-ID header, which a browser's EventSource
// sends when it reconnects, or a cursor query parameter) is sent the
// nodes after the ones it holds and exactly the deltas after the last
// one it received: none lost, none twice. Without one, the stream starts
// from known and last, and sends the deltas no event has settled yet.

// errBadCursor reports a cursor the live stream did not make.
var errBadCursor = errors.New("bad cursor")

// maxCursor bounds a cursor's length; the ones the stream makes are
// under 160 bytes.
const maxCursor = 512

// liveCursor is a position in a session's live stream.
type liveCursor struct {
	known int       // nodes of the tree the client holds
	last  uuid.UUID // the last of them, uuid.Nil for none
	tail  string    // the last Tail update's Cursor, "" for none yet
}

// String is the cursor as an SSE id: "<known>.<last>.<tail>", last "-"
// for none. The tail cursor holds no newline (sessionstore.Update).
func (c liveCursor) String() string {
	last := "-"
	if c.last != uuid.Nil {
		last = c.last.String()
	}
	return strconv.Itoa(c.known) + "." + last + "." + c.tail
}

func parseLiveCursor(s string) (liveCursor, error) {
	bad := func(why string) (liveCursor, error) {
		return liveCursor{}, fmt.Errorf("%w %.80q: %s", errBadCursor, s, why)
	}
	if len(s) > maxCursor {
		return bad("too long")
	}
	parts := strings.SplitN(s, ".", 3)
	if len(parts) != 3 {
		return bad("want <nodes>.<last node>.<tail cursor>")
	}
	var c liveCursor
	n, err := strconv.Atoi(parts[0])
	if err != nil || n < 0 || parts[0] != strconv.Itoa(n) {
		return bad("the count of nodes is not a number")
	}
	c.known = n
	if parts[1] != "-" {
		id, err := uuid.Parse(parts[1])
		if err != nil || len(parts[1]) != 36 {
			return bad("the last node is not a UUID")
		}
		c.last = id
	}
	if strings.ContainsAny(parts[2], "\r\n\x00") {
		return bad("a control character")
	}
	c.tail = parts[2]
	return c, nil
}

// resumeFrom is the cursor a live request resumes from: its Last-Event-ID
// header, else its cursor query parameter, else "".
func resumeFrom(r *http.Request) string {
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		return v
	}
	return r.URL.Query().Get("cursor")
}
