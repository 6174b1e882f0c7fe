package sessionstore

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

// TestCloseDuringReplay: Store.Close while a SubscribeFrom replay
// is between two of its batches: the pump's next batch (seqBatch ->
// readBatch -> s.begin) blocks on closeMu.RLock, which Close holds
// while hub.close waits for the pump to exit.
func TestCloseDuringReplay(t *testing.T) {
	old := seqBatchEvents
	seqBatchEvents = 4 // 1024 by default: a session of >1024 events does the same
	defer func() { seqBatchEvents = old }()
	ctx := context.Background()
	s, err := Open(t.TempDir(), nil)
	require.NoError(t, err)
	id := apiNewSession(t, s)
	for i := range 40 {
		apiAppend(t, s, id, textEv(fmt.Sprint(i)))
	}
	// Other open sessions make closeAll take a while (each checkpoints).
	for range 30 {
		o := apiNewSession(t, s)
		apiAppend(t, s, o, textEv("x"))
	}
	sub, err := s.SubscribeFrom(ctx, id, uuid.Nil)
	require.NoError(t, err)
	// Take the first batch but its last event: the pump waits to send it.
	for range 3 {
		<-sub.C
	}
	closed := make(chan error, 1)
	go func() { closed <- s.Close() }()
	time.Sleep(time.Millisecond) // Close holds closeMu, closing the sessions
	// The batch's last event: the pump goes on to the next batch.
	go func() {
		for range sub.C {
		}
	}()
	select {
	case err := <-closed:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("Store.Close hangs: the replay's pump waits for closeMu, Close waits for the pump")
	}
}
