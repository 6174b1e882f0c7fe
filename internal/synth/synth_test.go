package synth

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestToolOutput(t *testing.T) {
	for _, n := range []int{0, 1, 100, 70000} {
		assert.Len(t, ToolOutput(1, n), n)
	}
	assert.Equal(t, ToolOutput(3, 500), ToolOutput(3, 500), "the same seed gives the same text")
	assert.NotEqual(t, ToolOutput(3, 500), ToolOutput(4, 500), "another seed gives other text")
	assert.Contains(t, ToolOutput(5, 5000), "\n")
}
