package corrupt

import (
	"errors"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestErrorf(t *testing.T) {
	err := Errorf("/s/chunks/000001.jsonl.zst", 42, "embedded index: %w", io.ErrUnexpectedEOF)
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Equal(t, "/s/chunks/000001.jsonl.zst", e.Path)
	assert.Equal(t, int64(42), e.Offset)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the cause is wrapped")
	assert.Equal(t, "corrupt data in /s/chunks/000001.jsonl.zst at offset 42: embedded index: unexpected EOF", err.Error())
	assert.False(t, errors.As(io.EOF, &e))
}
