package sessionstore

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendKeepTime(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(dir, nil)
	require.NoError(t, err)
	m, err := st.Create(ctx, Meta{})
	require.NoError(t, err)

	then := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.FixedZone("x", 3600))
	a := UserText("imported")
	a.Time = then
	b := AssistantText("no time given")
	before := time.Now()
	out, err := st.AppendWith(ctx, m.ID, AppendOptions{KeepTime: true}, a, b)
	require.NoError(t, err)
	require.Len(t, out, 2)
	assert.True(t, out[0].Time.Equal(then), "kept: %s", out[0].Time)
	assert.Equal(t, time.UTC, out[0].Time.Location())
	assert.False(t, out[1].Time.Before(before.Add(-time.Second)), "a zero Time gets the append's: %s", out[1].Time)

	// Without KeepTime a caller's Time is refused, as before.
	c := UserText("later")
	c.Time = then
	_, err = st.Append(ctx, m.ID, c)
	assert.ErrorIs(t, err, ErrInvalidEvent)
	c.Time = time.Time{}
	_, err = st.Append(ctx, m.ID, c)
	require.NoError(t, err)

	// The kept time survives a reopen (it is in the chunk line).
	require.NoError(t, st.Close())
	st, err = Open(dir, nil)
	require.NoError(t, err)
	defer st.Close()
	evs, err := st.Load(ctx, m.ID)
	require.NoError(t, err)
	require.Len(t, evs, 3)
	assert.True(t, evs[0].Time.Equal(then), "after reopen: %s", evs[0].Time)

	for _, bad := range []time.Time{time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		e := UserText("bad time")
		e.Time = bad
		_, err := st.AppendWith(ctx, m.ID, AppendOptions{KeepTime: true}, e)
		assert.ErrorIs(t, err, ErrInvalidEvent, "%s", bad)
	}
	evs, err = st.Load(ctx, m.ID)
	require.NoError(t, err)
	assert.Len(t, evs, 3, "a refused time writes nothing")
}
