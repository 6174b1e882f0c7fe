package web

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestOptionsBounds(t *testing.T) {
	for _, tc := range []struct {
		in, want time.Duration
	}{
		{0, DefaultPollInterval},
		{time.Nanosecond, MinPollInterval},
		{-time.Second, MinPollInterval},
		{time.Second, time.Second},
		{time.Hour, MaxPollInterval},
	} {
		assert.Equal(t, tc.want, New(nil, Options{PollInterval: tc.in}).opts.PollInterval, "%v", tc.in)
	}
	assert.Equal(t, int64(DefaultInlineLimit), New(nil, Options{}).opts.InlineLimit)
	assert.Equal(t, 500, New(nil, Options{PageSize: 10000}).opts.PageSize)
}
