package sessionstore

import (
	"fmt"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AppendOptions.Stored says whether AppendWith wrote the batch or returned
// it as stored: of racers appending one batch, exactly one writes it.
func TestAppendWithStored(t *testing.T) {
	ctx := t.Context()
	s, _ := apiNewStore(t, nil)
	session := apiNewSession(t, s)
	var stored bool
	batch := []Event{rtWithID(UserText("a"), uuid.Must(uuid.NewV7())), rtWithID(AssistantText("b"), uuid.Must(uuid.NewV7()))}
	_, err := s.AppendWith(ctx, session, AppendOptions{Stored: &stored}, batch...)
	require.NoError(t, err)
	assert.False(t, stored, "written")
	_, err = s.AppendWith(ctx, session, AppendOptions{Stored: &stored}, batch...)
	require.NoError(t, err)
	assert.True(t, stored, "returned as stored")
	_, err = s.AppendWith(ctx, session, AppendOptions{Stored: &stored}, UserText("c"))
	require.NoError(t, err)
	assert.False(t, stored, "an event without an id is written")

	for round := range 10 {
		const racers = 4
		ev := rtWithID(UserText(fmt.Sprint("round ", round)), uuid.Must(uuid.NewV7()))
		flags := make([]bool, racers)
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				_, err := s.AppendWith(ctx, session, AppendOptions{Stored: &flags[r]}, ev)
				assert.NoError(t, err)
			})
		}
		wg.Wait()
		written := 0
		for _, f := range flags {
			if !f {
				written++
			}
		}
		assert.Equal(t, 1, written, "round %d: one racer wrote the event", round)
	}
}
